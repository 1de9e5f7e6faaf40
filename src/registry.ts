import { LeakyBucket } from "./algorithms/leaky-bucket.js";
import { TokenBucket } from "./algorithms/token-bucket.js";
import { AllOf } from "./composite.js";
import { checkCost, checkInteger, checkOptions, describe } from "./errors.js";
import type { Decision, Limiter, WaitOptions } from "./limiter.js";
import { fits } from "./numeric.js";
import { BucketSlab, type SlabBucket } from "./registry/bucket-slab.js";
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
import { WaitQueue } from "./wait.js";

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
   * strings: about 54 bytes per key on the fast path with one bucket (so at most about
   * 54 MB at the default; 16 bytes more per extra bucket of an `allOf`), and one Map entry
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

/** Default {@link KeyedLimiterOptions.maxKeys}. */
export const DEFAULT_MAX_KEYS = 1_000_000;

/** True for a policy the slab store serves: an exact `TokenBucket` or `LeakyBucket`. */
function isBucketPolicy(policy: unknown): policy is TokenBucket | LeakyBucket {
  return (
    (policy instanceof TokenBucket && policy.constructor === TokenBucket) ||
    (policy instanceof LeakyBucket && policy.constructor === LeakyBucket)
  );
}

/**
 * True for an `allOf` the multi-bucket slab serves: an exact `AllOf` of two or more
 * exact buckets that share one clock (so one reading per call answers for all of them).
 */
function isBucketComposite(policy: unknown): policy is AllOf {
  if (!(policy instanceof AllOf && policy.constructor === AllOf)) return false;
  const parts = policy.parts;
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

/**
 * Many limiters, one per key (an API key, a user id, an IP address): `allow(key, cost)`
 * is what a service calls on every request.
 *
 * `policy` is either a limiter whose configuration, clock included, every key copies
 * (its `clone()`; its own usage is ignored), or a function `(key) => Limiter` called when
 * a key without kept state is used, for per-key policies (plans, tiers) and custom
 * limiters. A `TokenBucket` or `LeakyBucket` policy, or an `allOf` of them sharing one
 * clock, takes the fast path: no object per key, state in a `Float64Array` slab,
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
 * Waiting (`wait`) uses a first-in, first-out queue per key; on the fast path it waits
 * for free tokens without holding them (no debt), as the windows do.
 *
 * @throws {TypeError} If `policy` is neither a limiter with `clone()` nor a function, or
 *   `options` is not an object, or `maxKeys`/`sweepIntervalMs` is not a number.
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
  /** Wait queues of the fast path, by key; removed when they drain. */
  private readonly waiting = new Map<string, WaitQueue>();

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
    if (new.target === KeyedLimiter && isBucketComposite(policy)) {
      // biome-ignore lint/correctness/noConstructorReturn: returns the fast-path subclass
      return new CompositeKeyedLimiter(policy, options);
    }
    const o = options === undefined ? {} : checkOptions<KeyedLimiterOptions>(WHERE, options);
    this.maxKeys =
      o.maxKeys === undefined
        ? DEFAULT_MAX_KEYS
        : checkInteger(WHERE, "maxKeys", o.maxKeys, 1, MAX_KEYS_LIMIT);
    const sweepIntervalMs = checkSweepInterval(o.sweepIntervalMs);
    if (isBucketPolicy(policy)) {
      const slab = new BucketSlab([slabBucket(policy)], policy.clock, this.maxKeys);
      slab.trackWaiters(this.waiting);
      this.store = slab;
      this.map = undefined;
    } else if (isBucketComposite(policy)) {
      const parts = policy.parts as readonly (TokenBucket | LeakyBucket)[];
      const slab = new MultiBucketSlab(parts.map(slabBucket), parts[0]!.clock, this.maxKeys);
      slab.trackWaiters(this.waiting);
      this.store = slab;
      this.map = undefined;
    } else if (typeof policy === "function") {
      this.map = new LimiterMap(checkedFactory(policy, "policy"), this.maxKeys);
      this.store = this.map;
    } else if (isLimiter(policy) && typeof (policy as CloneableLimiter).clone === "function") {
      const template = policy as CloneableLimiter;
      this.map = new LimiterMap(
        checkedFactory(() => template.clone(), "policy.clone()"),
        this.maxKeys,
      );
      this.store = this.map;
    } else {
      throw new TypeError(
        `${WHERE}: policy must be a limiter with clone() or a function (key) => Limiter, got ${describe(policy)}`,
      );
    }
    if (sweepIntervalMs !== Number.POSITIVE_INFINITY) {
      armSweepTimer(new WeakRef(this), sweepIntervalMs);
    }
  }

  /** Number of keys with kept state (at most `maxKeys`). */
  get size(): number {
    return this.store.size;
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
    return this.store.allow(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  /**
   * Takes `cost` units from the key's limiter when they are available (creating its state
   * on first use); a denied request changes nothing. See {@link Limiter.consume}.
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `cost` is NaN, negative or infinite.
   */
  consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.store.consume(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  /**
   * What `consume(key, cost)` would answer now; changes nothing, and keeps nothing for
   * an unknown key (on the generic path the policy may be called to answer).
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `cost` is NaN, negative or infinite.
   */
  peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.store.peek(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  /**
   * Resolves once `cost` units of the key were taken, first-in, first-out behind the
   * key's earlier waiters. See {@link Limiter.wait}; rejects (never throws) for a bad
   * key, cost or option.
   */
  wait(key: string, cost?: number, options?: WaitOptions): Promise<Decision> {
    try {
      checkKey(key);
      const c = checkCost(`${WHERE}.wait`, cost);
      if (this.map !== undefined) return this.map.wait(key, c, options);
      const limit = (this.store as BucketSlab).smallestCapacity();
      // A cost above any one bucket can never be served (the combined decision's limit is
      // that of the bucket with the least remaining, so the queue alone could miss it).
      if (!fits(c, limit)) throw new RangeError(`${WHERE}.wait: cost ${c} exceeds limit ${limit}`);
      let queue = this.waiting.get(key);
      if (queue === undefined) {
        queue = new WaitQueue(WHERE, {
          peek: (cost) => this.peek(key, cost),
          consume: (cost) => this.consume(key, cost),
        });
        this.waiting.set(key, queue);
      }
      const drained = queue;
      const forget = () => {
        if (drained.size === 0 && this.waiting.get(key) === drained) this.waiting.delete(key);
      };
      const promise = queue.wait(c, options);
      promise.then(forget, forget);
      return promise;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Forgets the key's usage: its next request starts fresh. Pending waiters keep waiting. */
  reset(key: string): void {
    this.store.reset(checkKey(key));
  }

  /** Forgets every key. Pending waiters keep waiting; `stats` keep counting. */
  clear(): void {
    this.store.clear();
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

  constructor(policy: TokenBucket | LeakyBucket, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as BucketSlab;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    return this.slab.allow(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.slab.consume(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.slab.peek(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }
}

/**
 * The fast path of {@link KeyedLimiter} for an `allOf` of buckets sharing one clock: the
 * same API, with `allow`, `consume` and `peek` calling the multi-bucket slab directly (a
 * class of its own, so its call sites stay monomorphic too). Not exported.
 */
class CompositeKeyedLimiter extends KeyedLimiter {
  private readonly slab: MultiBucketSlab;

  constructor(policy: AllOf, options: KeyedLimiterOptions | undefined) {
    super(policy, options);
    this.slab = this.store as MultiBucketSlab;
  }

  override allow(key: string, cost?: number): boolean {
    if (typeof key !== "string") checkKey(key);
    return this.slab.allow(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  override consume(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.slab.consume(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }

  override peek(key: string, cost?: number): Decision {
    if (typeof key !== "string") checkKey(key);
    return this.slab.peek(key, cost === undefined ? 1 : checkCost(WHERE, cost));
  }
}
