import { checkInitial } from "../algorithms/bucket-base.js";
import { LeakyBucket } from "../algorithms/leaky-bucket.js";
import { checkNumber, checkOptionNames, checkOptions } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { bucketHints, bucketRequired, optionNames } from "../core/option-names.js";
import { checkReconfigureOptions } from "../core/reconfigure.js";
import { localTwin, RedisLimiter } from "./limiter.js";
import { BUCKET_BLOCK_SCRIPT } from "./lua/block.js";
import { LEAKY_BUCKET_REFUND_SCRIPT } from "./lua/refund.js";
import { LEAKY_BUCKET_SCRIPT } from "./lua/token-bucket.js";
import {
  checkRedisOptions,
  REDIS_HINTS,
  REDIS_OPTIONS,
  type RedisLimiterOptions,
} from "./options.js";
import { bucketReply } from "./token-bucket.js";

/** Options of {@link RedisLeakyBucket}: those of `LeakyBucket` (no `clock`) plus the Redis ones. */
export interface RedisLeakyBucketOptions extends RedisLimiterOptions {
  /** Most units a key's bucket holds: the burst tolerance (> 0, fractions allowed). */
  readonly capacity: number;
  /** Units drained per second, continuously (>= 0; 0 never drains). */
  readonly leakPerSecond: number;
  /**
   * The level of a key's new bucket, from 0 to `capacity`, draining from the key's first
   * use; a key forgotten when empty (its state expires) starts again from it.
   * docs/semantics.md#initial-tokens.
   * @default 0 (a new key's bucket is empty)
   */
  readonly initialLevel?: number | undefined;
}

const WHERE = "RedisLeakyBucket";
const SCRIPTS = [LEAKY_BUCKET_SCRIPT, LEAKY_BUCKET_REFUND_SCRIPT, BUCKET_BLOCK_SCRIPT] as const;
/** The options `reconfigure` may change; `OPTIONS`, every one the constructor takes. */
const TUNABLE = ["capacity", "leakPerSecond", "initialLevel"] as const;
const OPTIONS = optionNames<RedisLeakyBucketOptions>()([...TUNABLE, ...REDIS_OPTIONS]);
const HINTS = { ...bucketHints(WHERE, "leakPerSecond", "refillPerSecond"), ...REDIS_HINTS };
const REQUIRED = bucketRequired(WHERE, "leakPerSecond");

/**
 * A `LeakyBucket` meter per key, shared through Redis: the level starts at `initialLevel`
 * (0) and drains at `leakPerSecond`; allowed when `level + cost <= capacity`. Decides as the in-memory class
 * does, atomically on Redis's clock, with the token bucket's script (the free room is its
 * tokens). An empty bucket has no key; others expire when they would be empty.
 *
 * Good for: a sustained shared rate with a bounded burst (GCRA). Watch out: no shaping
 * (`wait`/`reserve`) across processes; as a meter it admits `capacity` at once.
 * @example
 * const limiter = new RedisLeakyBucket({ client: fromIoredis(redis), capacity: 10, leakPerSecond: 5 })
 * await limiter.consume("tenant:7", 10) //=> { allowed: true, remaining: 0, resetAfterMs: 2000, … }
 * @throws {RangeError} If `capacity` is not a finite number > 0, `leakPerSecond` not >= 0, or a Redis
 *   option is out of range (docs/redis.md#common-options).
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class RedisLeakyBucket extends RedisLimiter {
  /** Most units a bucket holds. */
  readonly capacity!: number;
  /** Units drained per second. */
  readonly leakPerSecond!: number;
  /** The level of a key's new bucket: 0 unless given. */
  readonly initialLevel!: number;

  constructor(options: RedisLeakyBucketOptions) {
    const o = checkOptions<RedisLeakyBucketOptions>(WHERE, options, REQUIRED);
    checkOptionNames(WHERE, o, OPTIONS, HINTS, REQUIRED);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const leakPerSecond = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true);
    const initialLevel = checkInitial(WHERE, "initialLevel", o.initialLevel, capacity) ?? 0;
    // Above 0 it is part of the state's definition (and so of the default keyspace).
    const initial = initialLevel === 0 ? {} : { initialLevel };
    const state = { capacity, leakPerSecond, ...initial };
    super(checkRedisOptions(WHERE, o, "leaky-bucket", state), WHERE, SCRIPTS);
    this.tune(capacity, leakPerSecond, initialLevel);
  }

  /** @internal Takes checked numbers, for the constructor and {@link reconfigure}. */
  private tune(capacity: number, leakPerSecond: number, initialLevel: number): void {
    const initial = initialLevel === 0 ? {} : { initialLevel };
    this.retune(
      capacity,
      [capacity, leakPerSecond],
      localTwin(LeakyBucket, { capacity, leakPerSecond, ...initial }),
      initialLevel === 0 ? [] : [capacity - initialLevel],
    );
    Object.assign(this, { capacity, leakPerSecond, initialLevel });
  }

  /**
   * Changes `capacity`, `leakPerSecond` and/or `initialLevel` (for keys new from then) live, from
   * the next call, for every key: the keyspace stays, so each key's stored state is judged by the
   * new numbers (docs/redis.md#changing-limits-live). The `'local'` policy's limiter follows.
   * Checked first, with the constructor's messages; a throw changes nothing.
   * @throws {TypeError} For an unknown option (the Redis options and `clock` cannot change).
   * @throws {RangeError} As the constructor, for an option out of range.
   */
  reconfigure(
    options: Partial<Pick<RedisLeakyBucketOptions, "capacity" | "leakPerSecond" | "initialLevel">>,
  ): void {
    const o = checkReconfigureOptions<RedisLeakyBucketOptions>(WHERE, options, TUNABLE, HINTS);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false, this.capacity);
    const rate = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true, this.leakPerSecond);
    const level = o.initialLevel ?? this.initialLevel;
    this.tune(capacity, rate, checkInitial(WHERE, "initialLevel", level, capacity)!);
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    return bucketReply(reply, cost, this.capacity, this.leakPerSecond);
  }
}
