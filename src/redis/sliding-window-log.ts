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
 * A `SlidingWindowLog` per key, shared through Redis: each allowed request is logged
 * with its time and cost, an entry counts while it is younger than `windowMs`, and a
 * request is allowed when the logged units plus `cost` fit in `limit`. Decisions are
 * the in-memory class's for the same timeline, computed atomically by one Lua script
 * on Redis's clock.
 *
 * Good for: an exact shared rolling limit. Watch out: memory per key grows with the
 * number of requests in a window: entries of 16 bytes, exact up to `max(64, ceil(limit))`
 * of them; beyond that (only fractional costs get there) entries share time slices of
 * `windowMs / max(64, ceil(limit))`, as in memory, and count up to one slice longer.
 *
 * The key (a list) expires when its newest entry leaves the window, and is deleted as
 * soon as it is empty.
 * @throws {TypeError} If `options` is not an object or an option has the wrong type.
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0, `windowMs` is
 *   below 0.001 (Redis's `TIME` counts microseconds) without a `clock`, or a Redis option
 *   is out of range. With a `clock`, a call rejects with `RangeError` at a reading where
 *   `windowMs` is below the float step, as the in-memory windows throw, before sending.
 * @example
 * const limiter = new RedisSlidingWindowLog({ client: fromNodeRedis(redis), limit: 5, windowMs: 1000 })
 * await limiter.allow("login:alice") //=> true
 */
export class RedisSlidingWindowLog extends RedisWindowLimiter {
  protected readonly where = WHERE;
  protected readonly script = SLIDING_WINDOW_LOG_SCRIPT;
  /** Entries kept at their exact time (`logExactEntries(limit)`), as in memory. */
  private readonly exactEntries: number;

  constructor(options: RedisSlidingWindowLogOptions) {
    super(WHERE, options, "sliding-window-log", OPTIONS);
    this.exactEntries = logExactEntries(this.limit);
  }

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
