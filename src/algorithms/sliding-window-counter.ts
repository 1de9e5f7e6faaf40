import { checkCost } from "../core/errors.js";
import type { Clock, Limiter, Receipt } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { SlidingWindowCounterKernel } from "./sliding-window-counter-kernel.js";
import { WindowBase, windowSpec } from "./window-base.js";

/** Options of {@link SlidingWindowCounter}. */
export interface SlidingWindowCounterOptions {
  /** Most units allowed in any window of `windowMs`, as estimated (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0); longer than 2^31-1 ms is fine (no timers). */
  readonly windowMs: number;
  /**
   * Time source in milliseconds; windows are aligned to multiples of `windowMs` on it.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

/**
 * Options of {@link SlidingWindowCounter.reconfigure}: `limit` and/or `windowMs` (not the clock); an
 * option left out keeps its value.
 */
export type SlidingWindowCounterReconfigure = Partial<Omit<SlidingWindowCounterOptions, "clock">>;

const WHERE = "SlidingWindowCounter";

/** The option names of {@link SlidingWindowCounterOptions}, checked by the constructor; src/algorithms/catalog.ts lists them. */
export const SLIDING_WINDOW_COUNTER_OPTIONS = optionNames<SlidingWindowCounterOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const SPEC = /* @__PURE__ */ windowSpec(
  WHERE,
  "sliding-window-counter",
  SLIDING_WINDOW_COUNTER_OPTIONS,
  SlidingWindowCounterKernel,
);

/**
 * A sliding window counter: the counts of the current fixed window and the previous one,
 * blended into `estimate = prev * (W - e) / W + curr` (`W = windowMs`, `e` the time into
 * the current window, `prev` 0 when older); allowed when `estimate + cost <= limit`.
 * Cloudflare's approximation (even spread assumed); docs/semantics.md#the-algorithms.
 *
 * Good for: near-sliding accuracy in O(1) and three numbers, no boundary double burst.
 * Watch out: an estimate; a burst at the end of the previous window is under-weighted, so
 * the true count over `windowMs` can briefly exceed `limit` (by at most `limit`).
 * @example
 * new SlidingWindowCounter({ limit: 100, windowMs: 60_000 }).consume().remaining //=> 99
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0; from any method
 *   reading the clock past docs/semantics.md#the-float-step-bound.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class SlidingWindowCounter extends WindowBase implements Limiter {
  constructor(options: SlidingWindowCounterOptions) {
    super(SPEC, options);
  }

  /**
   * A new, unused counter with the same options (clock included); the state is not
   * copied. A keyed registry uses it to make one limiter per key.
   */
  clone(): SlidingWindowCounter {
    const { limit, windowMs, clock } = this;
    return new SlidingWindowCounter({ limit, windowMs, clock });
  }

  /**
   * Changes `limit` and/or `windowMs` live: the units counted so far carry over and are
   * judged against the new limit; for a new `windowMs`, the estimate at the change becomes the count of the new-length window holding now (it then weighs into the next window as any count does). Waiters are re-planned: one whose cost is now
   * above `limit` is rejected with the `RangeError` a fresh `wait` gets, and the others
   * are granted as soon as they fit. See docs/semantics.md#changing-limits-live.
   * @example
   * const window = new SlidingWindowCounter({ limit: 100, windowMs: 60_000 })
   * window.reconfigure({ limit: 200 })
   * @throws {TypeError} If `options` is not an object, names an unknown option or the
   *   clock, or an option is not a number; nothing changes.
   * @throws {RangeError} As the constructor, for an option out of range (or a window below
   *   the clock's resolution now); nothing changes.
   */
  reconfigure(options: SlidingWindowCounterReconfigure): void {
    this.planReconfigure(options)();
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    return this.kernel.allowAt(this.state, 0, 0, this.now(), c);
  }

  /**
   * Gives back units taken earlier and returns how many came back. Through the receipt of
   * a {@link charge}: `units` of what it took (default: all it still holds), from the count
   * of the window it charged, while that is the current or the previous window (nothing
   * later, or after a reset or reconfigure). Without one: `cost` units (default 1), from the
   * current window's count first, then from the previous window's, never below 0. Waiters
   * that then fit are granted first-in, first-out. See docs/semantics.md#refunds.
   * @throws {TypeError} If `cost` or `units` is not a number, or the receipt is another
   *   limiter's. {RangeError} If it is NaN, negative or infinite.
   */
  override refund(receipt: Receipt, units?: number): number;
  override refund(cost?: number): number;
  override refund(cost?: number | Receipt, units?: number): number {
    return this.refundOf(cost, units);
  }
}
