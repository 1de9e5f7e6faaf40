import { checkCost } from "../core/errors.js";
import type { Clock, Limiter, Receipt } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { SlidingWindowLogKernel } from "./sliding-window-log-kernel.js";
import { WindowBase, windowSpec } from "./window-base.js";

/** Options of {@link SlidingWindowLog}. */
export interface SlidingWindowLogOptions {
  /** Most units allowed in any window of `windowMs` (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0); longer than 2^31-1 ms is fine (no timers). */
  readonly windowMs: number;
  /**
   * Time source in milliseconds.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

/**
 * Options of {@link SlidingWindowLog.reconfigure}: `limit` and/or `windowMs` (not the clock); an
 * option left out keeps its value.
 */
export type SlidingWindowLogReconfigure = Partial<Omit<SlidingWindowLogOptions, "clock">>;

const WHERE = "SlidingWindowLog";

/** The option names of {@link SlidingWindowLogOptions}, checked by the constructor; src/algorithms/catalog.ts lists them. */
export const SLIDING_WINDOW_LOG_OPTIONS = optionNames<SlidingWindowLogOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const SPEC = /* @__PURE__ */ windowSpec(
  WHERE,
  "sliding-window-log",
  SLIDING_WINDOW_LOG_OPTIONS,
  SlidingWindowLogKernel,
);

/**
 * A sliding window log: the time and cost of every allowed request; allowed when the costs
 * still in the window (`time > t - windowMs`) plus `cost` are at most `limit`. Exact over
 * every window, O(1) amortized, no timers. Shared rules: docs/semantics.md#the-algorithms.
 *
 * Good for: exact rolling limits with no boundary burst (logins, "N per rolling hour").
 * Watch out: 16 bytes per entry, up to `max(64, ceil(limit))` exact entries (about 1.9 kB a
 * full key at limit 100); beyond, fractional costs share time slices and may deny slightly
 * early (docs/semantics.md#float-tolerance). Large limits or many keys: `SlidingWindowCounter`.
 * @example
 * new SlidingWindowLog({ limit: 5, windowMs: 60_000 }).consume(6).retryAfterMs //=> Infinity
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0; from any method
 *   reading the clock past docs/semantics.md#the-float-step-bound.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class SlidingWindowLog extends WindowBase implements Limiter {
  constructor(options: SlidingWindowLogOptions) {
    super(SPEC, options);
  }

  /**
   * A new, empty log with the same options (clock included); the entries are not
   * copied. A keyed registry uses it to make one log per key.
   */
  clone(): SlidingWindowLog {
    return new SlidingWindowLog({ limit: this.limit, windowMs: this.windowMs, clock: this.clock });
  }

  /**
   * Changes `limit` and/or `windowMs` live: the units counted so far carry over and are
   * judged against the new limit; a longer `windowMs` makes every logged entry count for the new length from its time, a shorter one lets logged entries leave when they would have (never sooner) and applies to entries logged from now on. Waiters are re-planned: one whose cost is now
   * above `limit` is rejected with the `RangeError` a fresh `wait` gets, and the others
   * are granted as soon as they fit. See docs/semantics.md#changing-limits-live.
   * @example
   * const window = new SlidingWindowLog({ limit: 100, windowMs: 60_000 })
   * window.reconfigure({ limit: 200 })
   * @throws {TypeError} If `options` is not an object, names an unknown option or the
   *   clock, or an option is not a number; nothing changes.
   * @throws {RangeError} As the constructor, for an option out of range (or a window below
   *   the clock's resolution now); nothing changes.
   */
  reconfigure(options: SlidingWindowLogReconfigure): void {
    this.planReconfigure(options)();
  }

  /** `consume(cost).allowed`, without allocating (except when the log grows). */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    return this.kernel.allowAt(this.state, 0, 0, this.now(), c);
  }

  /**
   * Gives back units taken earlier and returns how many came back. Through the receipt of
   * a {@link charge}: `units` of what it took (default: all it still holds), out of the
   * entry it logged, while that entry is in the window (nothing once it has left, or after a
   * reset or reconfigure). Without one: `cost` units (default 1), from the most recent
   * entries first (an entry wholly given back leaves the log), never below an empty log.
   * Waiters that then fit are granted first-in, first-out. See docs/semantics.md#refunds.
   * @throws {TypeError} If `cost` or `units` is not a number, or the receipt is another
   *   limiter's. {RangeError} If it is NaN, negative or infinite.
   */
  override refund(receipt: Receipt, units?: number): number;
  override refund(cost?: number): number;
  override refund(cost?: number | Receipt, units?: number): number {
    return this.refundOf(cost, units);
  }
}
