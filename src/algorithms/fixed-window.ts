import { checkClock, checkCost, checkOptionNames, checkOptions } from "../errors.js";
import type { Receipt } from "../limiter.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  systemClock,
  UnkeyedLimiterBase,
  type WaitOptions,
} from "../limiter.js";
import { fits } from "../numeric.js";
import { optionNames, windowHints, windowRequired } from "../option-names.js";
import { ChargeReceipt, checkReceipt, deniedReceipt } from "../receipt.js";
import { type ApplyReconfigure, checkReconfigureOptions } from "../reconfigure.js";
import { jittered, WaitQueue } from "../wait.js";
import {
  checkWindowClock,
  checkWindowResize,
  checkWindowSize,
  readClock,
  windowClockBoundMs,
} from "./time.js";
import { defineTimedPart } from "./timed-part.js";
import {
  fixedWindowDecision,
  fixedWindowEndAt,
  fixedWindowRefunded,
  fixedWindowRetunedEnd,
  fixedWindowUsed,
} from "./window-math.js";

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

/** Whether allOf's driver for this class is registered (by the first constructor). */
let timedPartDefined = false;
/** The option names of {@link FixedWindowOptions}, checked by the constructor; src/catalog.ts lists them. */
export const FIXED_WINDOW_OPTIONS = optionNames<FixedWindowOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const HINTS = /* @__PURE__ */ windowHints(WHERE);
const REQUIRED = /* @__PURE__ */ windowRequired(WHERE);

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
export class FixedWindow extends UnkeyedLimiterBase implements Limiter {
  /** Most units allowed per window. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;

  /**
   * @internal
   * End (ms) of the window `count` belongs to; `-Infinity` while unused. Time never goes
   * back, so a reading before it is in that window.
   */
  private endMs = Number.NEGATIVE_INFINITY;
  /** @internal Units taken in the window ending at `endMs`. */
  private count = 0;
  /** @internal Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  private clockBoundMs = Number.POSITIVE_INFINITY;
  /** @internal */
  private queue: WaitQueue | undefined;
  /** @internal Moved by `reset` and `reconfigure`: receipts from before give nothing back. */
  private receiptEpoch = 0;

  constructor(options: FixedWindowOptions) {
    super();
    const o = checkOptions<FixedWindowOptions>(WHERE, options);
    checkOptionNames(WHERE, o, FIXED_WINDOW_OPTIONS, HINTS, REQUIRED);
    ({ limit: this.limit, windowMs: this.windowMs } = checkWindowSize(WHERE, o));
    this.clockBoundMs = windowClockBoundMs(this.windowMs);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    if (!timedPartDefined) FixedWindow.defineTimedPart();
  }

  /**
   * @internal
   * Registers how allOf reads, checks and charges an exact FixedWindow at one clock
   * reading (see timed-part.ts). Called by the first constructor rather than from a
   * static block, so that a bundle that does not use this class can drop it.
   */
  private static defineTimedPart(): void {
    timedPartDefined = true;
    defineTimedPart(FixedWindow.prototype, {
      timeOf: (w) =>
        checkWindowClock(WHERE, readClock(WHERE, w.clock, w.seenMs), w.windowMs, w.clockBoundMs),
      fitsAt: (w, now, cost) =>
        cost === 0 || fits(cost, w.limit - fixedWindowUsed(w.count, w.endMs, now)),
      takeAt: (w, now, cost) => {
        if (now > w.seenMs) w.seenMs = now;
        if (cost === 0) return;
        const used = fixedWindowUsed(w.count, w.endMs, now);
        w.endMs = fixedWindowEndAt(w.endMs, now, w.windowMs);
        w.count = used + cost;
      },
      decideAt: (w, now, cost, take) => w.decide(cost, take, now),
      chargeAt: (w, now, cost) => w.chargeAt(now, cost),
      refundAt: (w, now, units, receipt) =>
        receipt === undefined ? 0 : w.refundAt(now, units, receipt),
      refundsWithoutReceipt: false,
    });
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

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const o = checkReconfigureOptions<FixedWindowOptions>(
      WHERE,
      options,
      FIXED_WINDOW_OPTIONS,
      HINTS,
    );
    const now = this.now();
    const next = checkWindowResize(WHERE, o, this, now);
    return () => {
      this.endMs = fixedWindowRetunedEnd(this.count, this.endMs, now, this.windowMs, next.windowMs);
      this.count = this.endMs === Number.NEGATIVE_INFINITY ? 0 : this.count;
      const self = this as { limit: number; windowMs: number };
      self.limit = next.limit;
      self.windowMs = next.windowMs;
      this.clockBoundMs = next.clockBoundMs;
      this.receiptEpoch++;
      this.queue?.replan();
    };
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    if (c === 0) return true;
    const used = fixedWindowUsed(this.count, this.endMs, now);
    if (!fits(c, this.limit - used)) return false;
    this.endMs = fixedWindowEndAt(this.endMs, now, this.windowMs);
    this.count = used + c;
    return true;
  }

  /** Takes `cost` units of this window when they fit and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true, this.now());
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false, this.now());
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and the window charged (its end is
   * the receipt's `refundableUntilMs`), for a refund through it later.
   * @example
   * const receipt = window.charge(5) // the most the request can cost
   * window.refund(receipt, 3) // it cost 2: 3 back, if its window has not ended
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    return this.chargeAt(this.now(), cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost));
  }

  /** @internal `charge` of a checked `cost` at `now` (a checked reading). */
  private chargeAt(now: number, cost: number): ChargeReceipt {
    const decision = this.decide(cost, true, now);
    if (!decision.allowed || cost === 0) return deniedReceipt(decision, undefined, now, this);
    const end = this.endMs;
    const epoch = this.receiptEpoch;
    return new ChargeReceipt(decision, undefined, cost, now, end, this, epoch, end, 0, undefined);
  }

  /**
   * @internal A refund through `receipt` at `now` of checked `units` (at most what it still
   * holds): from the count, while the window it charged is the current one.
   */
  private refundAt(now: number, units: number, receipt: ChargeReceipt): number {
    if (now > this.seenMs) this.seenMs = now;
    const end = receipt.a;
    if (!(units > 0) || receipt.epoch !== this.receiptEpoch || end !== this.endMs) return 0;
    const used = fixedWindowUsed(this.count, this.endMs, now);
    const give = units < used ? units : used;
    if (!(give > 0)) return 0;
    const count = fixedWindowRefunded(this.count, this.endMs, now, give);
    if (count === 0) {
      this.endMs = Number.NEGATIVE_INFINITY;
      this.count = 0;
    } else this.count = count;
    receipt.refunded += give;
    this.queue?.wake();
    return give;
  }

  /** Forgets the count: back to the fresh state. Pending waiters keep waiting. */
  reset(): void {
    this.endMs = Number.NEGATIVE_INFINITY;
    this.count = 0;
    this.receiptEpoch++;
  }

  /**
   * Gives back, through the receipt of a {@link charge}, `units` of what it took (default:
   * all it still holds), and returns how many came back: the window's count falls by them,
   * but only while the window charged is the current one (units of a window that has
   * ended are gone), never below 0. Waiters that then fit are granted first-in, first-out.
   * See docs/semantics.md#refunds.
   *
   * Without a receipt it refuses: a fixed window cannot tell which window units were
   * charged in, and giving back in the current window what an earlier one took would let
   * more than `limit` pass in it.
   * @throws {TypeError} Without a receipt, for another limiter's receipt, or a non-number
   *   `units`. {RangeError} If `units` is NaN, negative or infinite.
   */
  refund(receipt: Receipt, units?: number): number;
  /** @deprecated A fixed window refunds only through a receipt: this throws a `TypeError`. */
  refund(cost?: number): number;
  refund(receipt?: number | Receipt, units?: number): number {
    if (typeof receipt !== "object" || receipt === null) {
      if (receipt !== undefined) checkCost(`${WHERE}.refund`, receipt);
      throw new TypeError(
        `${WHERE}.refund: give the receipt of the charge (refund(receipt, units)): a fixed window cannot tell which window the units were charged in, and units of a window that has ended are gone`,
      );
    }
    const r = checkReceipt(`${WHERE}.refund`, receipt, this, units);
    return this.refundAt(this.now(), r.units, r.receipt);
  }

  /** True when the current window has no count and nobody waits. */
  isIdle(): boolean {
    const used = fixedWindowUsed(this.count, this.endMs, this.now());
    return used === 0 && (this.queue === undefined || this.queue.size === 0);
  }

  /**
   * Waits until `cost` fits, first-in, first-out behind earlier waiters, and resolves
   * with the granting decision. See {@link Limiter.wait}. A plain `consume` does not
   * queue: it may take free units of the window while others wait.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    const queue = (this.queue ??= new WaitQueue(WHERE, this));
    return jittered(
      options,
      () => queue.wait(cost, options),
      () => this.refund(cost),
    );
  }

  /**
   * @internal
   * Reads the clock; a reading behind the latest one counts as the latest one. A
   * reading where `windowMs` is below the clock's float step throws and is not kept.
   */
  private now(): number {
    const t = readClock(WHERE, this.clock, this.seenMs);
    this.seenMs = checkWindowClock(WHERE, t, this.windowMs, this.clockBoundMs);
    return this.seenMs;
  }

  /** @internal `consume` (`take` true) or `peek` of a checked `cost` at `now` (a checked reading). */
  private decide(cost: number, take: boolean, now: number): Decision {
    if (now > this.seenMs) this.seenMs = now;
    const used = fixedWindowUsed(this.count, this.endMs, now);
    const endMs = fixedWindowEndAt(this.endMs, now, this.windowMs);
    const decision = fixedWindowDecision(cost, used, endMs - now, this.limit);
    if (take && cost > 0 && decision.allowed) {
      this.endMs = endMs;
      this.count = used + cost;
    }
    return decision;
  }
}
