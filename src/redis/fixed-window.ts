import { FixedWindow } from "../algorithms/fixed-window.js";
import { fixedWindowDecision } from "../algorithms/window-math.js";
import type { Decision } from "../core/limiter.js";
import { markCharge } from "../store/limiter.js";
import { blockedDecision } from "./limiter.js";
import { FIXED_WINDOW_BLOCK_SCRIPT } from "./lua/block.js";
import { FIXED_WINDOW_SCRIPT } from "./lua/fixed-window.js";
import { FIXED_WINDOW_REFUND_SCRIPT } from "./lua/refund.js";
import type { RedisLimiterOptions } from "./options.js";
import { checkAgreement, replyArray, replyFloat, replyNumber } from "./reply.js";
import { RedisWindowLimiter } from "./window.js";

/** Options of {@link RedisFixedWindow}: those of `FixedWindow` (no `clock`) plus the Redis ones. */
export interface RedisFixedWindowOptions extends RedisLimiterOptions {
  /** Most units allowed per window and key (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0); windows are aligned to multiples of it on Redis's clock (Unix epoch). */
  readonly windowMs: number;
}

const WHERE = "RedisFixedWindow";
const SCRIPTS = [
  FIXED_WINDOW_SCRIPT,
  FIXED_WINDOW_REFUND_SCRIPT,
  FIXED_WINDOW_BLOCK_SCRIPT,
] as const;

/**
 * A `FixedWindow` per key, shared through Redis: at most `limit` units per key in each
 * window `[k * windowMs, (k + 1) * windowMs)` of Redis's clock (Unix epoch ms: 60 000 ms is
 * a calendar minute). Decides as the in-memory class does, atomically, in one Lua script;
 * the key expires at its window's end (count and expiry written together).
 *
 * Good for: the cheapest shared quota per period. Watch out: up to `2 * limit` can pass
 * within `windowMs` around a boundary.
 * @example
 * const limiter = new RedisFixedWindow({ client: fromNodeRedis(redis), limit: 100, windowMs: 60_000 })
 * await limiter.allow("ip:203.0.113.7") //=> true
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0 (>= 0.001 without a
 *   `clock`; with one, past the float step a call rejects) or a Redis option is out of range.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class RedisFixedWindow extends RedisWindowLimiter {
  /** @internal A fixed window refunds only through receipts. */
  protected override readonly refundsWithoutReceipt = false;

  constructor(options: RedisFixedWindowOptions) {
    super(WHERE, options, "fixed-window", FixedWindow, SCRIPTS);
  }

  /** @internal */
  protected decode(reply: unknown, cost: number): Decision {
    // {allowed, used, end, now, [ledger id,] serverNowMs}, or {2, used, ms until the end,
    // the block's ms left, serverNowMs}: each float in two integers (luaFloats).
    const items = replyArray(reply, 8);
    const allowed = items[0];
    const u = replyFloat(items, 1);
    if (replyNumber(allowed) === 2) {
      const endsIn = replyFloat(items, 3);
      const decide = (c: number) => fixedWindowDecision(c, u, endsIn, this.limit);
      return blockedDecision(decide, cost, replyFloat(items, 5));
    }
    // The same subtraction as the script's: the ms until the window ends.
    const endAt = replyFloat(items, 3);
    const now = replyFloat(items, 5);
    const endsInMs = endAt - now;
    const decision = checkAgreement(fixedWindowDecision(cost, u, endsInMs, this.limit), allowed);
    // A receipt's mark: the end of the window charged; a charge's reply has the ledger's id
    // too, which the refund checks (a reset since gives nothing back).
    const ledger = items.length > 8 ? String(replyFloat(items, 7)) : "";
    return markCharge(decision, endAt, now, endAt, ledger);
  }
}
