import { SlidingWindowCounter } from "../algorithms/sliding-window-counter.js";
import { counterDecision } from "../algorithms/window-math.js";
import type { Decision } from "../core/limiter.js";
import { markCharge } from "../store/limiter.js";
import { blockedDecision } from "./limiter.js";
import { SLIDING_WINDOW_COUNTER_BLOCK_SCRIPT } from "./lua/block.js";
import { SLIDING_WINDOW_COUNTER_REFUND_SCRIPT } from "./lua/refund.js";
import { SLIDING_WINDOW_COUNTER_SCRIPT } from "./lua/sliding-window-counter.js";
import type { RedisLimiterOptions } from "./options.js";
import { checkAgreement, replyArray, replyFloat, replyNumber } from "./reply.js";
import { RedisWindowLimiter } from "./window.js";

/**
 * Options of {@link RedisSlidingWindowCounter}: those of `SlidingWindowCounter` (no
 * `clock`) plus the Redis ones.
 */
export interface RedisSlidingWindowCounterOptions extends RedisLimiterOptions {
  /** Most units in the weighted estimate of the last `windowMs`, per key (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0), aligned to multiples of it on Redis's clock (Unix epoch). */
  readonly windowMs: number;
}

const WHERE = "RedisSlidingWindowCounter";
const SCRIPTS = [
  SLIDING_WINDOW_COUNTER_SCRIPT,
  SLIDING_WINDOW_COUNTER_REFUND_SCRIPT,
  SLIDING_WINDOW_COUNTER_BLOCK_SCRIPT,
] as const;

/**
 * A `SlidingWindowCounter` per key, shared through Redis: allowed when
 * `prev * (windowMs - e) / windowMs + curr + cost <= limit` (Cloudflare's approximation, as
 * in memory). Decides as the in-memory class does for the same timeline, atomically, in
 * one Lua script on Redis's clock.
 *
 * Good for: a smooth shared limit in O(1) memory per key (one small hash, expiring when the
 * estimate reaches 0). Watch out: it assumes the previous window's traffic was even.
 * @example
 * const limiter = new RedisSlidingWindowCounter({ client: fromIoredis(redis), limit: 100, windowMs: 60_000 })
 * await limiter.consume("user:42") //=> { allowed: true, remaining: 99, … }
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0 (>= 0.001 without a
 *   `clock`; with one, past the float step a call rejects) or a Redis option is out of range.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class RedisSlidingWindowCounter extends RedisWindowLimiter {
  constructor(options: RedisSlidingWindowCounterOptions) {
    super(WHERE, options, "sliding-window-counter", SlidingWindowCounter, SCRIPTS);
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    // {allowed, index, prev, curr, now, (the block's ms left or the ledger's id,)
    // serverNowMs}: each float in two integers (luaFloats).
    const items = replyArray(reply, 10);
    const allowed = items[0];
    const i = replyFloat(items, 1);
    const p = replyFloat(items, 3);
    const c0 = replyFloat(items, 5);
    const t = replyFloat(items, 7);
    const decide = (c: number) => counterDecision(c, i, p, c0, t, this.limit, this.windowMs);
    if (replyNumber(allowed) === 2) return blockedDecision(decide, cost, replyFloat(items, 9));
    // A receipt's mark: the index of the window charged, counting until the next one ends; a
    // charge's reply has the ledger's id too, which the refund checks (nothing after a reset).
    const ledger = items.length > 10 ? String(replyFloat(items, 9)) : "";
    const decision = checkAgreement(decide(cost), allowed);
    return markCharge(decision, i, t, (i + 2) * this.windowMs, ledger);
  }
}
