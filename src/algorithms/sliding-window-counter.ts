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
  windowIndex,
} from "./time.js";
import { defineTimedPart } from "./timed-part.js";
import {
  counterDecision,
  counterEstimate,
  counterRefundCurr,
  counterRefundPrev,
  counterRetuned,
  counterRolledPrev,
} from "./window-math.js";

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

/** Whether allOf's driver for this class is registered (by the first constructor). */
let timedPartDefined = false;
/** The option names of {@link SlidingWindowCounterOptions}, checked by the constructor; src/catalog.ts lists them. */
export const SLIDING_WINDOW_COUNTER_OPTIONS = optionNames<SlidingWindowCounterOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const HINTS = /* @__PURE__ */ windowHints(WHERE);
const REQUIRED = /* @__PURE__ */ windowRequired(WHERE);

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
export class SlidingWindowCounter extends UnkeyedLimiterBase implements Limiter {
  /** Most units allowed in a window, as estimated. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;

  /** @internal Index of the window `curr` counts; `-Infinity` while unused. Never moves back. */
  private index = Number.NEGATIVE_INFINITY;
  /** @internal End (ms) of window `index`: `(index + 1) * windowMs`. */
  private endMs = Number.NEGATIVE_INFINITY;
  /** @internal Units taken in window `index - 1`. */
  private prev = 0;
  /** @internal Units taken in window `index`. */
  private curr = 0;
  /** @internal Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  private clockBoundMs = Number.POSITIVE_INFINITY;
  /** @internal */
  private queue: WaitQueue | undefined;
  /** @internal Moved by `reset` and `reconfigure`: receipts from before give nothing back. */
  private receiptEpoch = 0;

  constructor(options: SlidingWindowCounterOptions) {
    super();
    const o = checkOptions<SlidingWindowCounterOptions>(WHERE, options);
    checkOptionNames(WHERE, o, SLIDING_WINDOW_COUNTER_OPTIONS, HINTS, REQUIRED);
    ({ limit: this.limit, windowMs: this.windowMs } = checkWindowSize(WHERE, o));
    this.clockBoundMs = windowClockBoundMs(this.windowMs);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    if (!timedPartDefined) SlidingWindowCounter.defineTimedPart();
  }

  /**
   * @internal
   * Registers how allOf reads, checks and charges an exact SlidingWindowCounter at one clock
   * reading (see timed-part.ts). Called by the first constructor rather than from a
   * static block, so that a bundle that does not use this class can drop it.
   */
  private static defineTimedPart(): void {
    timedPartDefined = true;
    defineTimedPart(SlidingWindowCounter.prototype, {
      timeOf: (w) =>
        checkWindowClock(WHERE, readClock(WHERE, w.clock, w.seenMs), w.windowMs, w.clockBoundMs),
      fitsAt: (w, now, cost) => {
        if (cost === 0) return true;
        // The estimate rolls the windows to now: keep the reading, as peek does.
        if (now > w.seenMs) w.seenMs = now;
        return fits(cost, w.limit - w.estimate(now));
      },
      takeAt: (w, now, cost) => {
        if (now > w.seenMs) w.seenMs = now;
        if (cost === 0) return;
        w.roll(now);
        w.curr += cost;
      },
      decideAt: (w, now, cost, take) => w.decide(cost, take, now),
      chargeAt: (w, now, cost) => w.chargeAt(now, cost),
      refundAt: (w, now, units, receipt) => w.refundAt(now, units, receipt),
      refundsWithoutReceipt: true,
    });
  }

  /**
   * A new, unused counter with the same options (clock included); the state is not
   * copied. A keyed registry uses it to make one limiter per key.
   */
  clone(): SlidingWindowCounter {
    return new SlidingWindowCounter({
      limit: this.limit,
      windowMs: this.windowMs,
      clock: this.clock,
    });
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

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const o = checkReconfigureOptions<SlidingWindowCounterOptions>(
      WHERE,
      options,
      SLIDING_WINDOW_COUNTER_OPTIONS,
      HINTS,
    );
    const now = this.now();
    const next = checkWindowResize(WHERE, o, this, now);
    return () => {
      this.roll(now);
      const [prev, curr, index] = counterRetuned(
        this.prev,
        this.curr,
        this.index,
        now,
        this.windowMs,
        next.windowMs,
      );
      this.prev = prev;
      this.curr = curr;
      this.index = index;
      this.endMs = (index + 1) * next.windowMs;
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
    if (!fits(c, this.limit - this.estimate(now))) return false;
    this.curr += c;
    return true;
  }

  /** Counts `cost` units when they fit and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true, this.now());
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false, this.now());
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and the window charged, for a
   * refund through it later (until the end of the next window, its `refundableUntilMs`,
   * while that count still weighs in the estimate).
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    return this.chargeAt(this.now(), cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost));
  }

  /** Forgets both windows: back to the fresh state. Pending waiters keep waiting. */
  reset(): void {
    this.index = Number.NEGATIVE_INFINITY;
    this.endMs = Number.NEGATIVE_INFINITY;
    this.prev = 0;
    this.curr = 0;
    this.receiptEpoch++;
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
  refund(receipt: Receipt, units?: number): number;
  refund(cost?: number): number;
  refund(cost?: number | Receipt, units?: number): number {
    const where = `${WHERE}.refund`;
    if (typeof cost === "object" && cost !== null) {
      const r = checkReceipt(where, cost, this, units);
      return this.refundAt(this.now(), r.units, r.receipt);
    }
    const c = cost === undefined ? 1 : checkCost(where, cost);
    return this.refundAt(this.now(), c, undefined);
  }

  /** @internal `charge` of a checked `cost` at `now` (a checked reading). */
  private chargeAt(now: number, cost: number): ChargeReceipt {
    const decision = this.decide(cost, true, now);
    if (!decision.allowed || cost === 0) return deniedReceipt(decision, undefined, now, this);
    const until = this.endMs + this.windowMs;
    const epoch = this.receiptEpoch;
    return new ChargeReceipt(
      decision,
      undefined,
      cost,
      now,
      until,
      this,
      epoch,
      this.index,
      0,
      undefined,
    );
  }

  /**
   * @internal A refund at `now` of checked `units`: through `receipt` (from the count of the
   * window it charged, while current or previous), or without one (current, then previous).
   */
  private refundAt(now: number, units: number, receipt: ChargeReceipt | undefined): number {
    if (now > this.seenMs) this.seenMs = now;
    if (!(units > 0)) return 0;
    this.roll(now);
    let given: number;
    if (receipt === undefined) {
      const before = this.prev + this.curr;
      this.prev = counterRefundPrev(this.prev, this.curr, units);
      this.curr = counterRefundCurr(this.curr, units);
      given = before - (this.prev + this.curr);
    } else {
      if (receipt.epoch !== this.receiptEpoch) return 0;
      if (receipt.a === this.index) {
        given = units < this.curr ? units : this.curr;
        this.curr -= given;
      } else if (receipt.a + 1 === this.index) {
        given = units < this.prev ? units : this.prev;
        this.prev -= given;
      } else return 0;
      receipt.refunded += given;
    }
    if (given > 0) this.queue?.wake();
    return given;
  }

  /** True when the estimate is 0 and nobody waits. */
  isIdle(): boolean {
    this.roll(this.now());
    return (
      this.prev === 0 && this.curr === 0 && (this.queue === undefined || this.queue.size === 0)
    );
  }

  /**
   * Waits until `cost` fits, first-in, first-out behind earlier waiters, and resolves
   * with the granting decision. See {@link Limiter.wait}. A plain `consume` does not
   * queue: it may take free units while others wait.
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

  /** @internal Rolls the state to `now` (see `roll`) and returns the estimate at `now`. */
  private estimate(now: number): number {
    this.roll(now);
    return counterEstimate(this.prev, this.curr, this.endMs, now, this.windowMs);
  }

  /**
   * @internal
   * Moves the state to the window holding `now`: curr becomes prev when it is the next
   * one; both clear when later. Moving forward changes no decision, so peek and denied
   * requests may do it.
   */
  private roll(now: number): void {
    if (now < this.endMs) return;
    const k = windowIndex(now, this.windowMs);
    this.prev = counterRolledPrev(this.index, this.curr, k);
    this.curr = 0;
    this.index = k;
    this.endMs = (k + 1) * this.windowMs;
  }

  /** @internal `consume` (`take` true) or `peek` of a checked `cost` at `now` (a checked reading). */
  private decide(cost: number, take: boolean, now: number): Decision {
    if (now > this.seenMs) this.seenMs = now;
    this.roll(now);
    const decision = counterDecision(
      cost,
      this.index,
      this.prev,
      this.curr,
      now,
      this.limit,
      this.windowMs,
    );
    if (take && cost > 0 && decision.allowed) this.curr += cost;
    return decision;
  }
}
