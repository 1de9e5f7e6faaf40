import { SlidingWindowLog } from "../algorithms/sliding-window-log.js";
import { logDecision, logExactEntries } from "../algorithms/window-math.js";
import type { Decision } from "../limiter.js";
import { optionNames } from "../option-names.js";
import { SLIDING_WINDOW_LOG_SCRIPT } from "./lua/sliding-window-log.js";
import { REDIS_OPTIONS, type RedisLimiterOptions } from "./options.js";
import { checkAgreement, replyArray, replyNumber } from "./reply.js";
import { RedisWindowLimiter } from "./window.js";

/**
 * Options of {@link RedisSlidingWindowLog}: those of `SlidingWindowLog` (no `clock`)
 * plus the Redis ones.
 */
export interface RedisSlidingWindowLogOptions extends RedisLimiterOptions {
  /** Most units in any window of `windowMs`, per key (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0). */
  readonly windowMs: number;
}

const WHERE = "RedisSlidingWindowLog";
/** The option names of {@link RedisSlidingWindowLogOptions}, checked by the constructor. */
const OPTIONS = optionNames<RedisSlidingWindowLogOptions>()([
  "limit",
  "windowMs",
  ...REDIS_OPTIONS,
]);

/**
 * A `SlidingWindowLog` per key, shared through Redis: allowed when the units logged in the
 * last `windowMs` plus `cost` fit in `limit`. Decides as the in-memory class does for the
 * same timeline, atomically, in one Lua script on Redis's clock.
 *
 * Good for: an exact shared rolling limit. Watch out: memory per key grows with the requests
 * in a window (about 16 bytes an entry, time slices beyond `max(64, ceil(limit))` as in
 * memory), the work per call does not (docs/redis.md#the-sliding-log-at-large-limits).
 * @example
 * const limiter = new RedisSlidingWindowLog({ client: fromNodeRedis(redis), limit: 5, windowMs: 1000 })
 * await limiter.allow("login:alice") //=> true
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0 (>= 0.001 without a
 *   `clock`; with one, past the float step a call rejects) or a Redis option is out of range.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class RedisSlidingWindowLog extends RedisWindowLimiter {
  /** @internal */
  protected readonly where = WHERE;
  /** @internal */
  protected readonly script = SLIDING_WINDOW_LOG_SCRIPT;
  /** @internal Not yet: the sliding log's Redis layout is being reworked. */
  protected readonly refundScript = undefined;
  /** @internal Not yet: the sliding log's Redis layout is being reworked. */
  protected readonly blockScript = undefined;
  /** @internal Entries kept at their exact time (`logExactEntries(limit)`), as in memory. */
  private readonly exactEntries: number;

  constructor(options: RedisSlidingWindowLogOptions) {
    super(WHERE, options, "sliding-window-log", OPTIONS, SlidingWindowLog);
    this.exactEntries = logExactEntries(this.limit);
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    const [allowed, available, newestLeave, now, retryLeave, size] = replyArray(reply, 6);
    const t = replyNumber(now);
    const decision = logDecision(
      cost,
      replyNumber(available),
      t,
      this.limit,
      this.windowMs,
      this.exactEntries,
      replyNumber(size),
      replyNumber(newestLeave),
      replyNumber(retryLeave),
    );
    return checkAgreement(decision, allowed);
  }
}
