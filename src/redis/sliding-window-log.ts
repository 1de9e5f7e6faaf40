import { SlidingWindowLog } from "../algorithms/sliding-window-log.js";
import { logDecision, logExactEntries } from "../algorithms/window-math.js";
import type { Decision } from "../core/limiter.js";
import { markCharge } from "../store/limiter.js";
import { blockedDecision } from "./limiter.js";
import {
  SLIDING_WINDOW_LOG_BLOCK_SCRIPT,
  SLIDING_WINDOW_LOG_REFUND_SCRIPT,
  SLIDING_WINDOW_LOG_SCRIPT,
} from "./lua/sliding-window-log.js";
import type { RedisLimiterOptions } from "./options.js";
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
const SCRIPTS = [
  SLIDING_WINDOW_LOG_SCRIPT,
  SLIDING_WINDOW_LOG_REFUND_SCRIPT,
  SLIDING_WINDOW_LOG_BLOCK_SCRIPT,
] as const;

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
  /** @internal Entries kept at their exact time (`logExactEntries(limit)`), as in memory. */
  private exactEntries: number;

  constructor(options: RedisSlidingWindowLogOptions) {
    super(WHERE, options, "sliding-window-log", SlidingWindowLog, SCRIPTS);
    this.exactEntries = logExactEntries(this.limit);
  }

  /**
   * Changes `limit` and/or `windowMs` live, from the next call (see the window limiters'
   * `reconfigure`): logged entries are kept and judged against the new `limit`; each keeps
   * the leave time it was logged with, so a longer `windowMs` applies to entries logged from
   * the change on (in memory, logged entries move out too: docs/redis.md#changing-limits-live).
   * @throws {TypeError} For an unknown option. {RangeError} As the constructor.
   */
  override reconfigure(
    options: Partial<Pick<RedisSlidingWindowLogOptions, "limit" | "windowMs">>,
  ): void {
    super.reconfigure(options);
    this.exactEntries = logExactEntries(this.limit);
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    const [allowed, available, newestLeave, now, retryLeave, size, left] = replyArray(reply, 6);
    const t = replyNumber(now);
    const a = replyNumber(available);
    const n = replyNumber(size);
    const newest = replyNumber(newestLeave);
    const retry = replyNumber(retryLeave);
    const decide = (c: number) =>
      logDecision(c, a, t, this.limit, this.windowMs, this.exactEntries, n, newest, retry);
    if (replyNumber(allowed) === 2) return blockedDecision(decide, cost, replyNumber(left));
    // A receipt's mark: the leave time of the entry the charge went into, as the script
    // stamped it (just after a tombstone's, or an entry's it merged into).
    return markCharge(checkAgreement(decide(cost), allowed), newest, t, newest);
  }
}
