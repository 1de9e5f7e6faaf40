import { bucketDecision } from "../algorithms/bucket-math.js";
import { checkNumber, checkOptionNames, checkOptions } from "../errors.js";
import type { Decision } from "../limiter.js";
import { bucketHints, optionNames } from "../option-names.js";
import { RedisLimiter } from "./limiter.js";
import { TOKEN_BUCKET_SCRIPT } from "./lua/token-bucket.js";
import {
  checkRedisOptions,
  REDIS_HINTS,
  REDIS_OPTIONS,
  type RedisLimiterOptions,
} from "./options.js";
import { checkAgreement, replyArray, replyNumber } from "./reply.js";

/** Options of {@link RedisLeakyBucket}: those of `LeakyBucket` (no `clock`) plus the Redis ones. */
export interface RedisLeakyBucketOptions extends RedisLimiterOptions {
  /** Most units a key's bucket holds: the burst tolerance (> 0, fractions allowed). */
  readonly capacity: number;
  /** Units drained per second, continuously (>= 0; 0 never drains). */
  readonly leakPerSecond: number;
}

const WHERE = "RedisLeakyBucket";
/** The option names of {@link RedisLeakyBucketOptions}, checked by the constructor. */
const OPTIONS = optionNames<RedisLeakyBucketOptions>()([
  "capacity",
  "leakPerSecond",
  ...REDIS_OPTIONS,
]);
const HINTS = { ...bucketHints(WHERE, "leakPerSecond", "refillPerSecond"), ...REDIS_HINTS };

/**
 * A `LeakyBucket` meter per key, shared through Redis: each key's level starts at 0,
 * drains at `leakPerSecond`, and a request is allowed when `level + cost <= capacity`.
 * Decisions are the in-memory `LeakyBucket`'s for the same timeline, computed
 * atomically on Redis's clock. As a meter it is the token bucket whose tokens are the
 * free room, so it runs the token bucket's script (stored state: the free room).
 *
 * Good for: a sustained shared rate with a bounded burst (GCRA). Watch out: there is no
 * shaping mode (`wait`/`reserve`) across processes; as a meter it admits a burst of
 * `capacity` at once.
 *
 * An empty bucket has no key; any other state expires exactly when the bucket would be
 * empty (capped by `maxTtlMs`).
 * @throws {TypeError} If `options` is not an object or an option has the wrong type.
 * @throws {RangeError} If `capacity` is not a finite number > 0, `leakPerSecond` not a
 *   finite number >= 0, or a Redis option is out of range.
 * @example
 * const limiter = new RedisLeakyBucket({ client: fromIoredis(redis), capacity: 10, leakPerSecond: 5 })
 * await limiter.consume("tenant:7", 10) //=> { allowed: true, remaining: 0, resetAfterMs: 2000, … }
 */
export class RedisLeakyBucket extends RedisLimiter {
  /** Most units a bucket holds. */
  readonly capacity: number;
  /** Units drained per second. */
  readonly leakPerSecond: number;
  protected readonly where = WHERE;
  protected readonly script = TOKEN_BUCKET_SCRIPT;

  constructor(options: RedisLeakyBucketOptions) {
    const o = checkOptions<RedisLeakyBucketOptions>(WHERE, options);
    checkOptionNames(WHERE, o, OPTIONS, HINTS);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const leakPerSecond = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true);
    super(checkRedisOptions(WHERE, o, "leaky-bucket", { capacity, leakPerSecond }), capacity, [
      capacity,
      leakPerSecond,
    ]);
    this.capacity = capacity;
    this.leakPerSecond = leakPerSecond;
  }

  protected decode(reply: unknown, cost: number): Decision {
    const [allowed, room] = replyArray(reply, 2);
    const decision = bucketDecision(cost, replyNumber(room), this.capacity, this.leakPerSecond);
    return checkAgreement(decision, allowed);
  }
}
