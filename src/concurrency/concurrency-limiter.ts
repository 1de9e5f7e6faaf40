/**
 * `ConcurrencyLimiter`: at most `limit` permits held at once, with a bounded FIFO queue.
 * @module
 */
import { RateLimitError } from "../core/errors.js";
import type { Decision, WaitOptions } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { checkWaitOptions, timerDelay } from "../core/wait.js";
import { WaitList, type WaitListNode } from "../core/wait-list.js";
import { checkConcurrency, concurrencyDenial, isChecked } from "./options.js";
import { HeldPermit, type Permit, type PermitOwner } from "./permit.js";

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Most permits held at once, an integer from 1 to 2^31 - 1. Required. */
  readonly limit: number;
  /**
   * Most pending `acquire` calls (0 to 2^31 - 1); one past it rejects at once with a
   * `RateLimitError`. @default 0 (no queue: `acquire` waits for nothing)
   */
  readonly maxQueue?: number | undefined;
  /**
   * The `retryAfterMs` a denial's `Decision` carries, in ms (finite, >= 0): a hint, since
   * when a holder finishes is not known. `tollgate/http` sends it as `Retry-After`.
   * @default 1000
   */
  readonly retryAfterMs?: number | undefined;
}

const OPTIONS = optionNames<ConcurrencyLimiterOptions>()(["limit", "maxQueue", "retryAfterMs"]);
const HINTS: Readonly<Record<string, string>> = {
  max: 'use "limit" (most permits held at once)',
  concurrency: 'use "limit" (most permits held at once)',
  maxConcurrent: 'use "limit" (most permits held at once)',
  queueLimit: 'use "maxQueue" (most pending acquire calls)',
  maxQueueSize: 'use "maxQueue" (most pending acquire calls)',
  maxWaiters: 'use "maxQueue" (most pending acquire calls)',
};

interface Waiter extends WaitListNode<Waiter> {
  readonly resolve: (permit: Permit) => void;
  readonly reject: (reason: unknown) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The seam a `KeyedConcurrencyLimiter` keeps each key's limiter on: told when the limiter holds
 * nothing and has no waiters (so the key can be forgotten), and asked before a waiter queues.
 */
export interface ConcurrencyLink {
  /** The limiter holds no permit and has no waiter. */
  idle(): void;
  /** May one more waiter queue? `true` takes a place in the shared budget. */
  enqueue(): boolean;
  /** A waiter left the queue (granted, rejected, aborted): gives its place back. */
  dequeue(): void;
  /** One more permit is held. */
  acquired(): void;
  /** One permit less is held (one passed on to a waiter is still held). */
  released(): void;
}

/**
 * At most `limit` permits held at once: `tryAcquire()` gives a {@link Permit} or `null`,
 * `acquire({ signal, maxWaitMs })` waits first-in, first-out in a queue of at most
 * `maxQueue`. Concurrency, not rate: a permit comes back when its holder calls `release()`,
 * not with time (Stripe's concurrent-requests limiter; .NET's `ConcurrencyLimiter`).
 *
 * Watch out: a permit never released is lost for good; release it in a `finally`.
 * See docs/concurrency.md.
 * @throws {TypeError} For an unknown option; {RangeError} for one out of its range.
 * @example
 * const slots = new ConcurrencyLimiter({ limit: 2, maxQueue: 10 });
 * const permit = await slots.acquire(); try { await work() } finally { permit.release() }
 */
export class ConcurrencyLimiter implements PermitOwner {
  /** Most permits held at once. */
  readonly limit: number;
  /** Most pending `acquire` calls. */
  readonly maxQueue: number;
  /** The `retryAfterMs` of a denial. */
  readonly retryAfterMs: number;
  /** @internal */
  private held = 0;
  /** @internal */
  private readonly queue = new WaitList<Waiter>((w, reason) => this.leave(w, reason));
  /** @internal */
  private readonly link: ConcurrencyLink | undefined;

  constructor(options: ConcurrencyLimiterOptions, link?: ConcurrencyLink) {
    // A key's limiter gets its keyed limiter's settings, checked once for every key.
    const o = isChecked(options)
      ? options
      : checkConcurrency("ConcurrencyLimiter", options, OPTIONS, HINTS);
    this.limit = o.limit;
    this.maxQueue = o.maxQueue;
    this.retryAfterMs = o.retryAfterMs;
    this.link = link;
  }

  /** Permits held now (0 to `limit`). */
  get inUse(): number {
    return this.held;
  }

  /** Pending `acquire` calls now (0 to `maxQueue`). */
  get waiting(): number {
    return this.queue.size;
  }

  /** Permits free now: `limit - inUse`. */
  get available(): number {
    return this.limit - this.held;
  }

  /** A permit when one is free and nobody waits (waiters are never overtaken), else `null`. */
  tryAcquire(): Permit | null {
    if (this.held >= this.limit || this.queue.size > 0) return null;
    this.held++;
    this.link?.acquired();
    return new HeldPermit(this);
  }

  /**
   * Resolves with a permit, at once when one is free and nobody waits, else first-in,
   * first-out once one is released. Rejects (never throws) with `TypeError`/`RangeError`
   * for a bad option, a `RateLimitError` when the queue is full (`maxQueue`) or no permit
   * came within `maxWaitMs` (0: none free now), and `signal.reason` when aborted.
   */
  acquire(options?: WaitOptions): Promise<Permit> {
    return new Promise<Permit>((resolve, reject) => {
      const where = "ConcurrencyLimiter.acquire";
      const { signal, maxWaitMs } = checkWaitOptions(where, options); // throws: rejects
      if (signal?.aborted) throw signal.reason;
      const permit = this.tryAcquire();
      if (permit !== null) {
        resolve(permit);
        return;
      }
      const refused =
        maxWaitMs === 0
          ? "maxWaitMs is 0"
          : this.queue.size >= this.maxQueue || (this.link !== undefined && !this.link.enqueue())
            ? "the queue is full"
            : undefined;
      if (refused !== undefined) {
        throw this.refusal(`${where}: no permit free (limit ${this.limit}) and ${refused}`);
      }
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: undefined,
        prev: undefined,
        next: undefined,
        queued: false,
        timer: undefined,
      };
      this.queue.push(waiter);
      if (maxWaitMs !== Number.POSITIVE_INFINITY) {
        waiter.timer = setTimeout(() => {
          if (waiter.queued) {
            this.leave(waiter, this.refusal(`${where}: no permit within maxWaitMs ${maxWaitMs}`));
          }
        }, timerDelay(maxWaitMs));
      }
    });
  }

  /** The denial now: `allowed: false`, nothing remaining, the configured `retryAfterMs`. */
  denial(): Decision {
    return concurrencyDenial(this.limit, this.retryAfterMs);
  }

  /** A permit came back (called by the permit, once): the oldest waiter gets it, else it is free. */
  releaseOne(): void {
    const head = this.queue.head;
    if (head !== undefined) {
      this.remove(head);
      head.resolve(new HeldPermit(this)); // the unit passes straight on: held stays the same
      return;
    }
    this.held--;
    if (this.link !== undefined) {
      this.link.released();
      if (this.held === 0) this.link.idle();
    }
  }

  /** @internal */
  private refusal(message: string): RateLimitError {
    return new RateLimitError(message, this.denial());
  }

  /** @internal A waiter rejected (aborted, past maxWaitMs): it leaves the queue, holding nothing. */
  private leave(w: Waiter, reason: unknown): void {
    this.remove(w);
    w.reject(reason);
    if (this.held === 0 && this.queue.size === 0) this.link?.idle();
  }

  /** @internal */
  private remove(w: Waiter): void {
    this.queue.remove(w);
    if (w.timer !== undefined) clearTimeout(w.timer);
    w.timer = undefined;
    this.link?.dequeue();
  }
}
