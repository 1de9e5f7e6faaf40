import { checkNumber } from "./errors.js";
import type { Decision, Receipt } from "./limiter.js";

/**
 * Charge the most a request can cost up front, settle the difference when the real cost is
 * known: docs/semantics.md#charge-up-front-settle-after. @module
 */

/** What {@link settle} did. */
export interface Settlement {
  /** Units given back through the receipt (what the request did not use, as far as they still count). */
  readonly refunded: number;
  /**
   * The decision of taking what the request cost beyond its receipt, when it cost more;
   * `undefined` when it did not. When denied, nothing more was taken (a limiter never goes
   * over its limit): the estimate was too low.
   */
  readonly excess: Decision | undefined;
}

/** A limiter `settle` works with: an unkeyed one, a `KeyedLimiter` or a Redis limiter. */
export interface Settleable {
  refund(receipt: Receipt, units?: number): number | PromiseLike<number>;
  consume(keyOrCost?: string | number, cost?: number): Decision | PromiseLike<Decision>;
}

/**
 * Settles a charge made for the most a request could cost, once its real cost is known:
 * gives back `receipt.units - actualUnits` through the receipt (nothing once its units no
 * longer count: docs/semantics.md#refunds), or takes the excess (`consume`, denied and
 * taking nothing when it does not fit). A denied receipt settles nothing.
 * @example
 * const receipt = perUser.charge(user, 4000) // an LLM answer costs at most 4000 tokens
 * if (!receipt.allowed) return tooManyRequests()
 * const answer = await llm(prompt, { maxTokens: 4000 })
 * settle(perUser, receipt, answer.usage.totalTokens) // gives back what it did not use
 * @throws {TypeError} If `actualUnits` is not a number, the receipt is another limiter's, or
 *   it was settled already (settle once: a second settle would take the excess again).
 * @throws {RangeError} If `actualUnits` is NaN, negative or infinite.
 */
export function settle(limiter: Settleable, receipt: Receipt, actualUnits: number): Settlement;
export function settle(
  limiter: Settleable,
  receipt: Receipt,
  actualUnits: number,
): Settlement | Promise<Settlement>;
export function settle(
  limiter: Settleable,
  receipt: Receipt,
  actualUnits: number,
): Settlement | Promise<Settlement> {
  const actual = checkNumber("settle", "actualUnits", actualUnits, 0, true);
  // Settled twice, a request that cost more would be charged its excess twice.
  if (settled.has(receipt)) {
    throw new TypeError(
      "settle: this receipt was settled already: settle each charge once, with the request's whole cost",
    );
  }
  if (!receipt.allowed) return { refunded: 0, excess: undefined }; // denied: nothing was done
  settled.add(receipt);
  const held = receipt.units;
  if (actual <= held) {
    const given = held - actual > 0 ? limiter.refund(receipt, held - actual) : 0;
    if (typeof given === "number") return { refunded: given, excess: undefined };
    return Promise.resolve(given).then((refunded) => ({ refunded, excess: undefined }));
  }
  const excess = actual - held;
  const decision =
    receipt.key === undefined ? limiter.consume(excess) : limiter.consume(receipt.key, excess);
  if (isDecision(decision)) return { refunded: 0, excess: decision };
  return Promise.resolve(decision).then((d) => ({ refunded: 0, excess: d }));
}

/** Receipts {@link settle} has settled (a second settle is refused). */
const settled = new WeakSet<object>();

function isDecision(value: Decision | PromiseLike<Decision>): value is Decision {
  return typeof (value as Decision).allowed === "boolean";
}
