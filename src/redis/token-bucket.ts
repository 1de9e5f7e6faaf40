import { checkInitial } from "../algorithms/bucket-base.js";
import { bucketDecision, tokensAt } from "../algorithms/bucket-math.js";
import { TokenBucket } from "../algorithms/token-bucket.js";
import { checkNumber, checkOptionNames, checkOptions } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { fits, retryNotEarly } from "../core/numeric.js";
import { bucketHints, bucketRequired, optionNames } from "../core/option-names.js";
import { checkReconfigureOptions } from "../core/reconfigure.js";
import { markCharge } from "../store/limiter.js";
import { blockedDecision, localTwin, RedisLimiter } from "./limiter.js";
import { BUCKET_BLOCK_SCRIPT } from "./lua/block.js";
import { TOKEN_BUCKET_REFUND_SCRIPT } from "./lua/refund.js";
import { TOKEN_BUCKET_SCRIPT } from "./lua/token-bucket.js";
import {
  checkRedisOptions,
  REDIS_HINTS,
  REDIS_OPTIONS,
  type RedisLimiterOptions,
} from "./options.js";
import { checkAgreement, replyArray, replyFloat, replyNumber } from "./reply.js";

/** Options of {@link RedisTokenBucket}: those of `TokenBucket` (no `clock`) plus the Redis ones. */
export interface RedisTokenBucketOptions extends RedisLimiterOptions {
  /** Most tokens a key's bucket holds, and so the largest burst (> 0, fractions allowed). */
  readonly capacity: number;
  /** Tokens added per second, continuously (>= 0; 0 never refills: a fixed quota). */
  readonly refillPerSecond: number;
  /**
   * Tokens a key's new bucket holds, from 0 to `capacity`, refilling from the key's first
   * use; a key forgotten when full (its state expires) starts again from it.
   * docs/semantics.md#initial-tokens.
   * @default capacity (a new key's bucket is full)
   */
  readonly initialTokens?: number | undefined;
}

const WHERE = "RedisTokenBucket";
const SCRIPTS = [TOKEN_BUCKET_SCRIPT, TOKEN_BUCKET_REFUND_SCRIPT, BUCKET_BLOCK_SCRIPT] as const;
/** The options `reconfigure` may change; `OPTIONS`, every one the constructor takes. */
const TUNABLE = ["capacity", "refillPerSecond", "initialTokens"] as const;
const OPTIONS = optionNames<RedisTokenBucketOptions>()([...TUNABLE, ...REDIS_OPTIONS]);
const HINTS = { ...bucketHints(WHERE, "refillPerSecond", "leakPerSecond"), ...REDIS_HINTS };
const REQUIRED = bucketRequired(WHERE, "refillPerSecond");

/**
 * A `TokenBucket` per key, shared by every process using the same Redis, prefix and
 * options (docs/redis.md#key-layout-and-sharing): up to `capacity` tokens, starting full
 * (or at `initialTokens`), refilled at `refillPerSecond`. Decides as the in-memory class does, atomically, in one
 * Lua script on Redis's clock. A full bucket has no key; others expire when full again.
 *
 * Good for: one shared burst-plus-rate limit across a fleet. Watch out: one round trip per
 * decision; choose a `failure` policy for when Redis is away (docs/redis.md#failure-policies).
 * @example
 * const limiter = new RedisTokenBucket({ client: fromIoredis(redis), capacity: 10, refillPerSecond: 1 })
 * await limiter.consume("user:42") //=> { allowed: true, limit: 10, remaining: 9, …, source: 'redis' }
 * @throws {RangeError} If `capacity` is not a finite number > 0, `refillPerSecond` not >= 0, or a Redis
 *   option is out of range (docs/redis.md#common-options).
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class RedisTokenBucket extends RedisLimiter {
  /** Most tokens a bucket holds. */
  readonly capacity!: number;
  /** Tokens added per second. */
  readonly refillPerSecond!: number;
  /** Tokens a key's new bucket holds: `capacity` unless given. */
  readonly initialTokens!: number;

  constructor(options: RedisTokenBucketOptions) {
    const o = checkOptions<RedisTokenBucketOptions>(WHERE, options, REQUIRED);
    checkOptionNames(WHERE, o, OPTIONS, HINTS, REQUIRED);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    const initialTokens = checkInitial(WHERE, "initialTokens", o.initialTokens, capacity);
    // Given and not the default, it is part of the state's definition (and the default keyspace).
    const initial =
      initialTokens === undefined || initialTokens === capacity ? {} : { initialTokens };
    const state = { capacity, refillPerSecond, ...initial };
    super(checkRedisOptions(WHERE, o, "token-bucket", state), WHERE, SCRIPTS);
    this.tune(capacity, refillPerSecond, initial.initialTokens);
    this.initialGiven = initialTokens !== undefined;
  }

  /** @internal Whether `initialTokens` was given, or follows `capacity`. */
  private initialGiven: boolean;

  /** @internal Takes checked numbers, for the constructor and {@link reconfigure}. */
  private tune(capacity: number, refillPerSecond: number, initialTokens: number | undefined): void {
    const initial = initialTokens === undefined ? {} : { initialTokens };
    this.retune(
      capacity,
      [capacity, refillPerSecond],
      localTwin(TokenBucket, { capacity, refillPerSecond, ...initial }),
      initialTokens === undefined ? [] : [initialTokens],
    );
    Object.assign(this, { capacity, refillPerSecond, initialTokens: initialTokens ?? capacity });
  }

  /**
   * Changes `capacity`, `refillPerSecond` and/or `initialTokens` (for keys new from then) live,
   * from the next call, for every key: the keyspace stays, so each key's stored state is judged by
   * the new numbers (docs/redis.md#changing-limits-live). The `'local'` policy's limiter follows.
   * Checked first, with the constructor's messages; a throw changes nothing.
   * @throws {TypeError} For an unknown option (the Redis options and `clock` cannot change).
   * @throws {RangeError} As the constructor, for an option out of range.
   */
  reconfigure(
    options: Partial<
      Pick<RedisTokenBucketOptions, "capacity" | "refillPerSecond" | "initialTokens">
    >,
  ): void {
    const o = checkReconfigureOptions<RedisTokenBucketOptions>(WHERE, options, TUNABLE, HINTS);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false, this.capacity);
    const rate = checkNumber(
      WHERE,
      "refillPerSecond",
      o.refillPerSecond,
      0,
      true,
      this.refillPerSecond,
    );
    const given = o.initialTokens !== undefined || this.initialGiven;
    const initialTokens = given
      ? checkInitial(WHERE, "initialTokens", o.initialTokens ?? this.initialTokens, capacity)!
      : undefined;
    this.tune(capacity, rate, initialTokens);
    this.initialGiven = given;
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    return bucketReply(reply, cost, this.capacity, this.refillPerSecond);
  }
}

/**
 * A token or leaky bucket's decision from its script's reply, `{allowed, units (2), now or
 * the block's ms left (2), [ledger id (2), credited (2),] serverNowMs}` (luaFloats): a
 * denial's `retryAfterMs` is raised as the in-memory kernel raises it, so that a request at
 * `now + retryAfterMs` is not early at an epoch clock reading (docs/semantics.md#milliseconds).
 * Marked for its receipt: the mark is when the bucket is full again with no further
 * traffic; a charge's reply has the ledger too (its id and the units credited so far,
 * src/redis/lua/common.ts `LEDGER_AT`), which a refund through the receipt sends back to be
 * checked.
 * @internal
 */
export function bucketReply(
  reply: unknown,
  cost: number,
  capacity: number,
  ratePerSecond: number,
): Decision {
  const items = replyArray(reply, 6);
  const allowed = items[0];
  const units = replyFloat(items, 1);
  const now = replyFloat(items, 3);
  if (replyNumber(allowed) === 2) {
    return blockedDecision((c) => bucketDecision(c, units, capacity, ratePerSecond), cost, now);
  }
  let decision = bucketDecision(cost, units, capacity, ratePerSecond);
  if (!decision.allowed) {
    const retryAfterMs = retryNotEarly(decision.retryAfterMs, now, (at) =>
      fits(cost, tokensAt(units, now, at, capacity, ratePerSecond)),
    );
    if (retryAfterMs !== decision.retryAfterMs) decision = { ...decision, retryAfterMs };
  }
  checkAgreement(decision, allowed);
  const fullAt = now + decision.resetAfterMs;
  const ledger =
    items.length > 6 ? `${String(replyFloat(items, 5))},${String(replyFloat(items, 7))}` : "";
  return markCharge(decision, fullAt, now, fullAt, ledger);
}
