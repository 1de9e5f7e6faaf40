/**
 * `KeyedConcurrencyLimiter`: a {@link ConcurrencyLimiter} per key, bounded like `KeyedLimiter`.
 * @module
 */
import { mustBe, RateLimitError } from "../core/errors.js";
import type { WaitOptions } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { ConcurrencyLimiter, type ConcurrencyLink } from "./concurrency-limiter.js";
import {
  type ConcurrencySettings,
  checkConcurrency,
  concurrencyDenial,
  MAX_CONCURRENCY,
} from "./options.js";
import type { Permit } from "./permit.js";

/** Options of {@link KeyedConcurrencyLimiter}. */
export interface KeyedConcurrencyLimiterOptions {
  /** Most permits one key holds at once, an integer from 1 to 2^31 - 1. Required. */
  readonly limit: number;
  /** Most pending `acquire` calls of one key (0 to 2^31 - 1). @default 0 */
  readonly maxQueue?: number | undefined;
  /** Most keys kept at once (1 to 2^28); a new key past it is refused. @default 100_000 */
  readonly maxKeys?: number | undefined;
  /** Most pending `acquire` calls of all keys together (0 to 2^31 - 1). @default 10_000 */
  readonly maxWaiters?: number | undefined;
  /** Longest key, in UTF-16 code units (1 to 16,383): longer throws a `RangeError`. @default 512 */
  readonly maxKeyLength?: number | undefined;
  /** The `retryAfterMs` of a denial, in ms (finite, >= 0). @default 1000 */
  readonly retryAfterMs?: number | undefined;
}

const WHERE = "KeyedConcurrencyLimiter";
const OPTIONS = optionNames<KeyedConcurrencyLimiterOptions>()([
  "limit",
  "maxQueue",
  "maxKeys",
  "maxWaiters",
  "maxKeyLength",
  "retryAfterMs",
]);
const HINTS: Readonly<Record<string, string>> = {
  max: 'use "limit" (most permits one key holds at once)',
  concurrency: 'use "limit" (most permits one key holds at once)',
  queueLimit: 'use "maxQueue" (most pending acquire calls of one key)',
  whenFull:
    "a full KeyedConcurrencyLimiter always refuses new keys: every key kept holds a permit or has a waiter, so none can go without losing one",
};

/**
 * A {@link ConcurrencyLimiter} per key (an API key, a client address): at most `limit`
 * permits per key at once. A key with no permit held and no waiter is forgotten at once, so
 * the keys kept are the ones in flight; past `maxKeys` a new key is refused (`null`, or a
 * `RateLimitError`), never one in use evicted. See docs/concurrency.md#per-key-concurrency.
 * @throws {TypeError} For an unknown option; {RangeError} for one out of its range.
 * @example
 * const perClient = new KeyedConcurrencyLimiter({ limit: 2, maxKeys: 10_000 });
 * perClient.tryAcquire("client-1")?.release();
 */
export class KeyedConcurrencyLimiter {
  /** Most permits one key holds at once. */
  readonly limit: number;
  /** Most pending `acquire` calls of one key. */
  readonly maxQueue: number;
  /** Most keys kept at once. */
  readonly maxKeys: number;
  /** Most pending `acquire` calls of all keys. */
  readonly maxWaiters: number;
  /** Longest key, in UTF-16 code units. */
  readonly maxKeyLength: number;
  /** The `retryAfterMs` of a denial. */
  readonly retryAfterMs: number;
  /** @internal */
  private readonly keys = new Map<string, ConcurrencyLimiter>();
  /** @internal */
  private queued = 0;
  /** @internal Permits held by all keys (each key's limiter tells through its link). */
  private held = 0;
  /** @internal New keys refused because `maxKeys` were kept. */
  private refusedKeys = 0;
  /** @internal The checked options, handed to each key's limiter (not checked again). */
  private readonly settings: ConcurrencySettings;

  constructor(options: KeyedConcurrencyLimiterOptions) {
    const o = checkConcurrency(WHERE, options, OPTIONS, HINTS, {
      maxKeys: [100_000, 1, 2 ** 28],
      maxWaiters: [10_000, 0, MAX_CONCURRENCY],
      maxKeyLength: [512, 1, 16_383],
    });
    this.settings = o;
    this.limit = o.limit;
    this.maxQueue = o.maxQueue;
    this.maxKeys = o.maxKeys;
    this.maxWaiters = o.maxWaiters;
    this.maxKeyLength = o.maxKeyLength;
    this.retryAfterMs = o.retryAfterMs;
  }

  /** Keys kept now: those holding a permit or with a waiter. */
  get size(): number {
    return this.keys.size;
  }

  /** Permits held now, all keys together. */
  get inUse(): number {
    return this.held;
  }

  /** Pending `acquire` calls now, all keys together. */
  get waiting(): number {
    return this.queued;
  }

  /** New keys refused since creation because `maxKeys` keys were kept. */
  get refused(): number {
    return this.refusedKeys;
  }

  /** Permits the key holds now (0 for a key not kept). */
  inUseOf(key: string): number {
    return this.keys.get(this.checkKey(key))?.inUse ?? 0;
  }

  /**
   * A permit of `key` when one is free and nobody of that key waits, else `null` (also
   * when the key is new and `maxKeys` keys are kept).
   * @throws {TypeError} For a non-string key; {RangeError} for one longer than `maxKeyLength`.
   */
  tryAcquire(key: string): Permit | null {
    const k = this.checkKey(key);
    const limiter = this.limiterOf(k);
    if (limiter === undefined) return null;
    const permit = limiter.tryAcquire();
    this.forgetIfIdle(k, limiter);
    return permit;
  }

  /**
   * {@link ConcurrencyLimiter.acquire} for `key`, first-in, first-out per key. Rejects
   * (never throws) as it does, and with a `RateLimitError` at once when the key is new and
   * `maxKeys` keys are kept, or `maxWaiters` calls of all keys are pending.
   */
  acquire(key: string, options?: WaitOptions): Promise<Permit> {
    try {
      const k = this.checkKey(key);
      const limiter = this.limiterOf(k);
      if (limiter === undefined) {
        throw new RateLimitError(
          `${WHERE}.acquire: maxKeys (${this.maxKeys}) keys hold permits; a new key is refused`,
          concurrencyDenial(this.limit, this.retryAfterMs),
        );
      }
      const pending = limiter.acquire(options); // never throws: a problem is a rejection
      this.forgetIfIdle(k, limiter); // refused at once (a bad option, a full queue): nothing kept
      return pending;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** @internal The key's limiter, created when there is room; `undefined` when full. */
  private limiterOf(key: string): ConcurrencyLimiter | undefined {
    let limiter = this.keys.get(key);
    if (limiter !== undefined) return limiter;
    if (this.keys.size >= this.maxKeys) {
      this.refusedKeys++;
      return undefined;
    }
    const link: ConcurrencyLink = {
      idle: () => this.forgetIfIdle(key, limiter!),
      // A waiter takes a place in the budget all keys share, when one is left.
      enqueue: () => {
        if (this.queued >= this.maxWaiters) return false;
        this.queued++;
        return true;
      },
      dequeue: () => this.queued--,
      acquired: () => this.held++,
      released: () => this.held--,
    };
    limiter = new ConcurrencyLimiter(this.settings, link);
    this.keys.set(key, limiter);
    return limiter;
  }

  /** @internal Forgets `key` when its limiter holds nothing and has no waiter. */
  private forgetIfIdle(key: string, limiter: ConcurrencyLimiter): void {
    if (limiter.inUse === 0 && limiter.waiting === 0 && this.keys.get(key) === limiter) {
      this.keys.delete(key);
    }
  }

  /** @internal */
  private checkKey(key: unknown): string {
    if (typeof key !== "string") throw mustBe(WHERE, "key", "a string", key, TypeError);
    if (key.length > this.maxKeyLength) {
      const range = `at most maxKeyLength (${this.maxKeyLength}) UTF-16 code units`;
      throw mustBe(WHERE, "key", range, key.length);
    }
    return key;
  }
}
