import { FixedWindow } from "./algorithms/fixed-window.js";
import { LeakyBucket } from "./algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "./algorithms/sliding-window-counter.js";
import { TokenBucket } from "./algorithms/token-bucket.js";
import { AllOf } from "./composite.js";
import { checkCost, checkInteger, checkOptionNames, checkOptions, describe } from "./errors.js";
import type { Decision, Limiter, WaitOptions } from "./limiter.js";
import { fits } from "./numeric.js";
import { optionNames } from "./option-names.js";
import { BucketSlab, type SlabBucket } from "./registry/bucket-slab.js";
import { CounterSlab } from "./registry/counter-slab.js";
import { LimiterMap } from "./registry/limiter-map.js";
import { MultiBucketSlab } from "./registry/multi-bucket-slab.js";
import {
  armSweepTimer,
  checkedFactory,
  checkKey,
  checkSweepInterval,
  isLimiter,
  MAX_KEYS_LIMIT,
  WHERE,
} from "./registry/options.js";
import type { KeyedLimiterStats, KeyStore } from "./registry/store.js";
import { WaitingKeys } from "./registry/waiting.js";
import { FixedWindowSlab } from "./registry/window-slab.js";
import { checkWaitOptions } from "./wait.js";

export type { KeyedLimiterStats } from "./registry/store.js";

/** A limiter the registry can copy per key: any built-in limiter, or an `allOf` of them. */
export interface CloneableLimiter extends Limiter {
  /** A fresh limiter with the same options (clock included) and no usage. */
  clone(): Limiter;
}

/** Options of {@link KeyedLimiter}. */
export interface KeyedLimiterOptions {
  /**
   * Most keys kept at once (an integer from 1 to 2^28). When a new key arrives at the bound,
   * idle keys go first; if none of the keys looked at is idle, the one closest to idle goes
   * (a lossy eviction, counted in `stats.evictedLossy`). Memory at the bound, beyond the key
   * strings: about 54 bytes per key on the fast path with one bucket or a `FixedWindow`
   * (so at most about 54 MB at the default; 8 bytes more for a `SlidingWindowCounter`,
   * 16 bytes more per extra bucket of an `allOf`), and one Map entry
   * plus one limiter object per key (about 160 bytes for a `TokenBucket`) on the generic path.
   * @default 1_000_000
   */
  readonly maxKeys?: number | undefined;
  /**
   * Period of the one background sweep, in milliseconds (> 0, or `Infinity` for none). It
   * drops idle keys during quiet periods, when no calls drive the incremental sweep. The
   * timer is unref'd (it never keeps a process alive) and holds the registry weakly.
   * @default 60_000
   */
  readonly sweepIntervalMs?: number | undefined;
}

/** The option names of {@link KeyedLimiterOptions}, checked by the constructor. */
const KEYED_OPTIONS = optionNames<KeyedLimiterOptions>()(["maxKeys", "sweepIntervalMs"]);
const NO_TTL =
  "keys have no time to live: a key is dropped once idle (a fresh limiter would decide the same), by the incremental sweep or the one of sweepIntervalMs";
/** Hints for names from caches and other limiters' stores. */
const KEYED_HINTS: Readonly<Record<string, string>> = {
  max: 'use "maxKeys" (the most keys kept at once)',
  maxSize: 'use "maxKeys" (the most keys kept at once)',
  ttl: NO_TTL,
  ttlMs: NO_TTL,
  idleTimeoutMs: NO_TTL,
  cleanupIntervalMs: 'use "sweepIntervalMs" (milliseconds)',
  sweepInterval: 'use "sweepIntervalMs" (milliseconds)',
};

/** Default {@link KeyedLimiterOptions.maxKeys}. */
export const DEFAULT_MAX_KEYS = 1_000_000;

/**
 * True for a policy the slab store serves: exactly a `TokenBucket` or `LeakyBucket`, not a
 * subclass (the slab decides with the buckets' own arithmetic, so a subclass's overrides
 * would be skipped; a subclass takes the generic path, one `clone()` per key). The
 * prototype is checked rather than `constructor`, which an object may shadow.
 */
function isBucketPolicy(policy: unknown): policy is TokenBucket | LeakyBucket {
  if (typeof policy !== "object" || policy === null) return false;
  const proto: unknown = Object.getPrototypeOf(policy);
  return proto === TokenBucket.prototype || proto === LeakyBucket.prototype;
}

/**
 * True for a policy the window slab serves: exactly a `FixedWindow`, not a subclass (for
 * the same reason as {@link isBucketPolicy}).
 */
function isFixedWindowPolicy(policy: unknown): policy is FixedWindow {
  if (typeof policy !== "object" || policy === null) return false;
  return Object.getPrototypeOf(policy) === FixedWindow.prototype;
}

/** True for a policy the counter slab serves: exactly a `SlidingWindowCounter`. */
function isCounterPolicy(policy: unknown): policy is SlidingWindowCounter {
  if (typeof policy !== "object" || policy === null) return false;
  return Object.getPrototypeOf(policy) === SlidingWindowCounter.prototype;
}

/**
 * True for an `allOf` the multi-bucket slab serves: an exact `AllOf` of two or more
 * exact buckets that share one clock (so one reading per call answers for all of them).
 */
function isBucketComposite(policy: unknown): policy is AllOf {
  if (typeof policy !== "object" || policy === null) return false;
  if (Object.getPrototypeOf(policy) !== AllOf.prototype) return false;
  const parts = (policy as AllOf).parts;
  return (
    parts.length >= 2 &&
    parts.every(isBucketPolicy) &&
    parts.every(
      (part) => (part as TokenBucket | LeakyBucket).clock === (parts[0] as TokenBucket).clock,
    )
  );
}

/** The slab description of a bucket: its capacity and refill (or leak) rate. */
function slabBucket(bucket: TokenBucket | LeakyBucket): SlabBucket {
  // As a meter a leaky bucket is a token bucket: its free room is the tokens.
  const ratePerSecond =
    bucket instanceof TokenBucket ? bucket.refillPerSecond : bucket.leakPerSecond;
  return { capacity: bucket.capacity, ratePerSecond };
}

/** The limiter each registry's keys copy, for registries built from one (not a function). */
const policies = new WeakMap<object, CloneableLimiter>();

/**
 * The limiter whose configuration every key of `limiter` copies, when `limiter` is a
 * {@link KeyedLimiter} built from one; `undefined` for a function policy or anything else.
 * Internal (not exported by the package): `tollgate/http` reads the policy's `windowMs`
 * for the `w=` of `RateLimit-Policy`.
 */
export function keyedPolicyOf(limiter: unknown): CloneableLimiter | undefined {
  return typeof limiter === "object" && limiter !== null ? policies.get(limiter) : undefined;
}

/**
 * Many limiters, one per key (an API key, a user id, an IP address): `allow(key, cost)`
 * is what a service calls on every request.
 *
 * `policy` is either a limiter whose configuration, clock included, every key copies
 * (its `clone()`; its own usage is ignored), or a function `(key) => Limiter` called when
 * a key without kept state is used, for per-key policies (plans, tiers) and custom
 * limiters. The function must not call the registry for a key it does not hold (its own
 * key included): such a re-entrant call throws a `TypeError` (`KeyedLimiter: the policy
 * function called the registry re-entrantly for key "x"`) and changes nothing. A
 * `TokenBucket`, `LeakyBucket`, `FixedWindow` or `SlidingWindowCounter` policy, or an
 * `allOf` of buckets sharing one clock, takes the fast path (exactly those classes: a subclass, whose overrides the slab
 * would skip, takes the generic path with one `clone()` per key, and its `clone()` keeps
 * the subclass): no object per key, state in a `Float64Array` slab,
 * decisions bit for bit those of one limiter per key, with one clock reading per call and
 * one clock high-water mark for the whole registry (a reading behind the latest one seen
 * by any key counts as that latest one; with a monotonic clock this is the same as per
 * key). Any other policy keeps a `Map<string, Limiter>` (the generic path).
 *
 * Keys are dropped only when their state is fresh again (`isIdle`), so dropping never
 * changes a decision: no timer per key, but a few entries are checked every few calls
 * (amortized incremental sweep), `sweep()` drops all idle keys now, and one unref'd
 * background timer sweeps during quiet periods. `size` never exceeds `maxKeys`: when a
 * new key arrives at the bound and none of the next 32 entries is idle, the one of them
 * with the smallest `resetAfterMs` is dropped (the one lossy case, counted in
 * `stats.evictedLossy`), so a client that is being limited is the last one forgotten.
 *
 * Waiting (`wait`) is first-in, first-out per key, with the policy's own waiting (a token
 * bucket goes into debt, a leaky bucket shapes); on the fast path a key with waiters is
 * served by a bucket object of its own until its waits settle (see `registry/waiting.ts`).
 *
 * @throws {TypeError} If `policy` is neither a limiter with `clone()` nor a function, or
 *   `options` is not an object or names an unknown option (`maxkeys`: "did you mean
 *   maxKeys?"), or `maxKeys`/`sweepIntervalMs` is not a number.
 * @throws {RangeError} If `maxKeys` is not an integer from 1 to 2^28, or `sweepIntervalMs`
 *   is not a number > 0.
 * @example
 * const perKey = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))
 * perKey.allow("api-key-1") //=> true
 * perKey.consume("api-key-1", 20).retryAfterMs //=> Infinity (cost above capacity)
 */
export class KeyedLimiter {
  /** Most keys kept at once. */
  readonly maxKeys!: number;
  /** @internal The per-key state. */
  protected readonly store!: KeyStore;
  /** @internal The generic store, when the policy is not a bucket. */
  protected readonly map: LimiterMap | undefined;
  /** @internal The fast path's keys with waiters, served outside the slab; else undefined. */
  protected readonly waiting: WaitingKeys | undefined;

  constructor(
    policy: CloneableLimiter | ((key: string) => Limiter),
    options?: KeyedLimiterOptions,
  ) {
    // A bucket policy gets the fast-path subclass: its methods call the slab directly, so
    // each class's call sites stay monomorphic (one shared method dispatching to two stores
    // went polymorphic, and V8 then stopped inlining the slab path).
    if (new.target === KeyedLimiter && isBucketPolicy(policy)) {
      // biome-ignore lint/correctness/noConstructorReturn: returns the fast-path subclass
      return new BucketKeyedLimiter(policy, options);
    }
    if (new.target === KeyedLimiter && isFixedWindowPolicy(policy)) {
      // biome-ignore lint/correctness/noConstructorReturn: returns the fast-path subclass
      return new FixedWindowKeyedLimiter(policy, options);
    }
    if (new.target === KeyedLimiter && isCounterPolicy(policy)) {
      // biome-ignore lint/correctness/noConstructorReturn: returns the fast-path subclass
      return new CounterKeyedLimiter(policy, options);
    }
    if (new.target === KeyedLimiter && isBucketComposite(policy)) {
      // biome-ignore lint/correctness/noConstructorReturn: returns the fast-path subclass
      return new CompositeKeyedLimiter(policy, options);
    }
    const o = options === undefined ? {} : checkOptions<KeyedLimiterOptions>(WHERE, options);
    checkOptionNames(WHERE, o, KEYED_OPTIONS, KEYED_HINTS);
    this.maxKeys =
      o.maxKeys === undefined
        ? DEFAULT_MAX_KEYS
        : checkInteger(WHERE, "maxKeys", o.maxKeys, 1, MAX_KEYS_LIMIT);
    const sweepIntervalMs = checkSweepInterval(o.sweepIntervalMs);
    if (isBucketPolicy(policy)) {
      const slab = new BucketSlab([slabBucket(policy)], policy.clock, this.maxKeys);
      this.waiting = new WaitingKeys(slab, policy);
      this.store = slab;
      this.map = undefined;
    } else if (isFixedWindowPolicy(policy)) {
      const slab = new FixedWindowSlab(policy, this.maxKeys);
      this.waiting = new WaitingKeys(slab, policy);
      this.store = slab;
      this.map = undefined;
    } else if (isCounterPolicy(policy)) {
      const slab = new CounterSlab(policy, this.maxKeys);
      this.waiting = new WaitingKeys(slab, policy);
      this.store = slab;
      this.map = undefined;
    } else if (isBucketComposite(policy)) {
      const parts = policy.parts as readonly (TokenBucket | LeakyBucket)[];
      const slab = new MultiBucketSlab(parts.map(slabBucket), parts[0]!.clock, this.maxKeys);
      this.waiting = new WaitingKeys(slab, policy);
      this.store = slab;
      this.map = undefined;
    } else if (typeof policy === "function") {
      this.map = new LimiterMap(checkedFactory(policy, "policy"), this.maxKeys);
      this.store = this.map;
      this.waiting = undefined;
    } else if (isLimiter(policy) && typeof (policy as CloneableLimiter).clone === "function") {
      const template = policy as CloneableLimiter;
      this.map = new LimiterMap(
        checkedFactory(() => template.clone(), "policy.clone()"),
        this.maxKeys,
        "policy.clone()",
      );
      this.store = this.map;
      this.waiting = undefined;
    } else {
      throw new TypeError(
        `${WHERE}: policy must be a limiter with clone() or a function (key) => Limiter, got ${describe(policy)}`,
      );
    }
    if (sweepIntervalMs !== Number.POSITIVE_INFINITY) {
      armSweepTimer(new WeakRef(this), sweepIntervalMs);
    }
    if (typeof policy !== "function") policies.set(this, policy);
  }

  /**
   * Number of keys with kept state: at most `maxKeys`, except that keys with pending
   * waiters are never dropped, so while more keys than that wait, `size` is their number.
   */
  get size(): number {
    return this.store.size + (this.waiting?.count ?? 0);
  }

  /** Counters: keys created, dropped idle (lossless) and dropped in use (lossy). */
  get stats(): KeyedLimiterStats {
    return this.store.stats;
  }

  /**
   * `consume(key, cost).allowed`, without allocating on a known key.
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `cost` is NaN, negative or infinite.
   */
  allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const waiting = this.waiting;
    if (waiting !== undefined && waiting.count !== 0) {
      const limiter = waiting.get(key);
      if (limiter !== undefined) return limiter.allow(c);
    }
    return this.store.allow(key, c);
  }

  /**
   * Takes `cost` units from the key's limiter when they are available (creating its state
   * on first use); a denied request changes nothing. See {@link Limiter.consume}.
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `cost` is NaN, negative or infinite.
   */
  consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const waiting = this.waiting;
    if (waiting !== undefined && waiting.count !== 0) {
      const limiter = waiting.get(key);
      if (limiter !== undefined) return limiter.consume(c);
    }
    return this.store.consume(key, c);
  }

  /**
   * What `consume(key, cost)` would answer now; changes nothing, and keeps nothing for
   * an unknown key (on the generic path the policy may be called to answer).
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `cost` is NaN, negative or infinite.
   */
  peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const waiting = this.waiting;
    if (waiting !== undefined && waiting.count !== 0) {
      const limiter = waiting.get(key);
      if (limiter !== undefined) return limiter.peek(c);
    }
    return this.store.peek(key, c);
  }

  /**
   * Resolves once `cost` units of the key were taken, first-in, first-out behind the
   * key's earlier waiters, with the key's limiter's own waiting: a token bucket policy
   * goes into debt, a leaky bucket shapes (requests leave `1000 / leakPerSecond` ms
   * apart), windows wait until the window has room (see {@link Limiter.wait}). A key with
   * pending waiters is never swept or evicted. Rejects (never throws) for a bad key, cost
   * or option, before anything is kept for the key.
   */
  wait(key: string, cost?: number, options?: WaitOptions): Promise<Decision> {
    try {
      checkKey(key);
      const c = checkCost(`${WHERE}.wait`, cost);
      const { signal } = checkWaitOptions(`${WHERE}.wait`, options);
      if (this.map !== undefined) return this.map.wait(key, c, options);
      const limit = (this.store as BucketSlab).smallestCapacity();
      // A cost above any one bucket can never be served (the combined decision's limit is
      // that of the bucket with the least remaining, so the queue alone could miss it).
      if (!fits(c, limit)) throw new RangeError(`${WHERE}.wait: cost ${c} exceeds limit ${limit}`);
      if (signal?.aborted) return Promise.reject(signal.reason);
      return this.waiting!.wait(key, c, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Forgets the key's usage: its next request starts fresh. Pending waiters keep waiting. */
  reset(key: string): void {
    const k = checkKey(key);
    if (this.waiting?.reset(k) !== true) this.store.reset(k);
  }

  /** Forgets every key. Pending waiters keep waiting; `stats` keep counting. */
  clear(): void {
    this.store.clear();
    this.waiting?.resetAll();
  }

  /** Drops every key whose state is fresh again, now; returns how many it dropped. */
  sweep(): number {
    return this.store.sweep();
  }
}

/**
 * The fast path of {@link KeyedLimiter} for a `TokenBucket` or `LeakyBucket` policy: the
 * same API, with `allow`, `consume` and `peek` calling the slab store directly.
 * `new KeyedLimiter(bucket)` returns one; it is not exported.
 */
class BucketKeyedLimiter extends KeyedLimiter {
  private readonly slab: BucketSlab;
  private readonly keysWaiting: WaitingKeys;

  constructor(policy: TokenBucket | LeakyBucket, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as BucketSlab;
    this.keysWaiting = this.waiting!;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.allow(c);
    }
    return this.slab.allow(key, c);
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.consume(c);
    }
    return this.slab.consume(key, c);
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.peek(c);
    }
    return this.slab.peek(key, c);
  }
}

/**
 * The fast path of {@link KeyedLimiter} for an `allOf` of buckets sharing one clock: the
 * same API, with `allow`, `consume` and `peek` calling the multi-bucket slab directly (a
 * class of its own, so its call sites stay monomorphic too). Not exported.
 */
class CompositeKeyedLimiter extends KeyedLimiter {
  private readonly slab: MultiBucketSlab;
  private readonly keysWaiting: WaitingKeys;

  constructor(policy: AllOf, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as MultiBucketSlab;
    this.keysWaiting = this.waiting!;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.allow(c);
    }
    return this.slab.allow(key, c);
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.consume(c);
    }
    return this.slab.consume(key, c);
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.peek(c);
    }
    return this.slab.peek(key, c);
  }
}

/**
 * The fast path of {@link KeyedLimiter} for a `FixedWindow` policy: the same API, with
 * `allow`, `consume` and `peek` calling the window slab directly (a class of its own, so
 * its call sites stay monomorphic too). Not exported.
 */
class FixedWindowKeyedLimiter extends KeyedLimiter {
  private readonly slab: FixedWindowSlab;
  private readonly keysWaiting: WaitingKeys;

  constructor(policy: FixedWindow, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as FixedWindowSlab;
    this.keysWaiting = this.waiting!;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.allow(c);
    }
    return this.slab.allow(key, c);
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.consume(c);
    }
    return this.slab.consume(key, c);
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.peek(c);
    }
    return this.slab.peek(key, c);
  }
}

/**
 * The fast path of {@link KeyedLimiter} for a `SlidingWindowCounter` policy: the same API,
 * with `allow`, `consume` and `peek` calling the counter slab directly (a class of its own, so
 * its call sites stay monomorphic too). Not exported.
 */
class CounterKeyedLimiter extends KeyedLimiter {
  private readonly slab: CounterSlab;
  private readonly keysWaiting: WaitingKeys;

  constructor(policy: SlidingWindowCounter, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as CounterSlab;
    this.keysWaiting = this.waiting!;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.allow(c);
    }
    return this.slab.allow(key, c);
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.consume(c);
    }
    return this.slab.consume(key, c);
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    if (this.keysWaiting.count !== 0) {
      const limiter = this.keysWaiting.get(key);
      if (limiter !== undefined) return limiter.peek(c);
    }
    return this.slab.peek(key, c);
  }
}
