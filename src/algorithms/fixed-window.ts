import { checkCost } from "../core/errors.js";
import type { Clock, Limiter, Receipt } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { FixedWindowKernel } from "./fixed-window-kernel.js";
import { WindowBase, windowSpec } from "./window-base.js";

/** Options of {@link FixedWindow}. */
export interface FixedWindowOptions {
  /** Most units allowed per window (> 0, fractions allowed). */
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
 * Options of {@link FixedWindow.reconfigure}: `limit` and/or `windowMs` (not the clock); an
 * option left out keeps its value.
 */
export type FixedWindowReconfigure = Partial<Omit<FixedWindowOptions, "clock">>;

const WHERE = "FixedWindow";

/** The option names of {@link FixedWindowOptions}, checked by the constructor; src/algorithms/catalog.ts lists them. */
export const FIXED_WINDOW_OPTIONS = optionNames<FixedWindowOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const SPEC = /* @__PURE__ */ windowSpec(
  WHERE,
  "fixed-window",
  FIXED_WINDOW_OPTIONS,
  FixedWindowKernel,
);

/**
 * A fixed-window counter: at most `limit` units per window `[k * windowMs, (k + 1) *
 * windowMs)`, `k = floor(t / windowMs)` on the clock; the boundary instant belongs to the
 * new window. The classic `INCR` + `EXPIRE` counter, kept lazily: two numbers, no timers.
 * A denial says retry when the window ends. Shared rules: docs/semantics.md#the-algorithms.
 *
 * Good for: the cheapest check and smallest state; quotas per period (with `clock:
 * Date.now` for calendar-aligned windows, docs/semantics.md#clocks). Watch out: up to
 * `2 * limit` pass within `windowMs` around a boundary.
 * @example
 * new FixedWindow({ limit: 100, windowMs: 60_000 }).consume().remaining //=> 99
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0; from any method
 *   reading the clock past docs/semantics.md#the-float-step-bound.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class FixedWindow extends WindowBase implements Limiter {
  constructor(options: FixedWindowOptions) {
    super(SPEC, options);
  }

  /**
   * A new, unused window with the same options (clock included); the state is not
   * copied. A keyed registry uses it to make one limiter per key.
   */
  clone(): FixedWindow {
    return new FixedWindow({ limit: this.limit, windowMs: this.windowMs, clock: this.clock });
  }

  /**
   * Changes `limit` and/or `windowMs` live: the units counted so far carry over and are
   * judged against the new limit; a new `windowMs` applies to the window holding now (its count is kept until the later of the old end and the end of the new-length window holding now, so it is never forgotten sooner) and to every window after it, aligned to multiples of it. Waiters are re-planned: one whose cost is now
   * above `limit` is rejected with the `RangeError` a fresh `wait` gets, and the others
   * are granted as soon as they fit. See docs/semantics.md#changing-limits-live.
   * @example
   * const window = new FixedWindow({ limit: 100, windowMs: 60_000 })
   * window.reconfigure({ limit: 200 })
   * @throws {TypeError} If `options` is not an object, names an unknown option or the
   *   clock, or an option is not a number; nothing changes.
   * @throws {RangeError} As the constructor, for an option out of range (or a window below
   *   the clock's resolution now); nothing changes.
   */
  reconfigure(options: FixedWindowReconfigure): void {
    this.planReconfigure(options)();
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    return this.kernel.allowAt(this.state, 0, 0, this.now(), c);
  }

  /**
   * Gives back, through the receipt of a {@link charge}, `units` of what it took (default: all it
   * still holds), and returns how many came back: the window's count falls by them, but only while
   * the window charged is the current one (units of a window that has ended are gone), never
   * below 0. Waiters that then fit are granted first-in, first-out. See docs/semantics.md#refunds.
   *
   * Without a receipt it refuses: a fixed window cannot tell which window units were charged in,
   * and giving back in the current window what an earlier one took would let more than `limit` pass
   * in it.
   * @throws {TypeError} Without a receipt, for another limiter's receipt, or a non-number `units`.
   *   {RangeError} If `units` is NaN, negative or infinite.
   */
  override refund(receipt: Receipt, units?: number): number;
  /** @deprecated A fixed window refunds only through a receipt: this throws a `TypeError`. */
  override refund(cost?: number): number;
  override refund(receipt?: number | Receipt, units?: number): number {
    return this.refundOf(receipt, units);
  }

  /** @internal */
  protected override receiptOnly(where: string): TypeError {
    return new TypeError(
      `${where}: give the receipt of the charge (refund(receipt, units)): a fixed window cannot tell which window the units were charged in, and units of a window that has ended are gone`,
    );
  }
}
