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
import { LogRing } from "./log-ring.js";
import {
  checkWindowClock,
  checkWindowResize,
  checkWindowSize,
  readClock,
  windowClockBoundMs,
} from "./time.js";
import { defineTimedPart } from "./timed-part.js";
import { logExactEntries } from "./window-math.js";

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

/** Whether allOf's driver for this class is registered (by the first constructor). */
let timedPartDefined = false;
/** The option names of {@link SlidingWindowLogOptions}, checked by the constructor; src/catalog.ts lists them. */
export const SLIDING_WINDOW_LOG_OPTIONS = optionNames<SlidingWindowLogOptions>()([
  "limit",
  "windowMs",
  "clock",
]);
const HINTS = /* @__PURE__ */ windowHints(WHERE);
const REQUIRED = /* @__PURE__ */ windowRequired(WHERE);

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
export class SlidingWindowLog extends UnkeyedLimiterBase implements Limiter {
  /** Most units allowed in any window. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;

  /**
   * @internal
   * Entries kept at their exact time: `ceil(limit)`, at least 64, at most 2^24. Beyond
   * it new entries are stamped at the end of their granule of `windowMs / exactEntries`.
   */
  private exactEntries: number;
  /** @internal The log: `[leaveAtMs, runningTotal]` entries (`leaveAtMs` = time + `windowMs`). */
  private readonly ring = new LogRing();
  /** @internal Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  private clockBoundMs = Number.POSITIVE_INFINITY;
  /** @internal */
  private queue: WaitQueue | undefined;
  /** @internal Moved by `reset` and `reconfigure`: receipts from before give nothing back. */
  private receiptEpoch = 0;

  // `size`, `slotCount` and `base` are the ring's, read as the log's own by white-box tests
  // of its bounds (test/algorithms/sliding-window-log.test.ts); the class reads only `size`.
  /** @internal Entries in the log. */
  private get size(): number {
    return this.ring.size;
  }
  /** @internal Entries the ring can hold. */
  // @ts-expect-error TS6133: read by white-box tests only
  private get slotCount(): number {
    return this.ring.slotCount;
  }
  /** @internal The running total before the oldest entry. */
  // @ts-expect-error TS6133: read by white-box tests only
  private get base(): number {
    return this.ring.base;
  }

  constructor(options: SlidingWindowLogOptions) {
    super();
    const o = checkOptions<SlidingWindowLogOptions>(WHERE, options);
    checkOptionNames(WHERE, o, SLIDING_WINDOW_LOG_OPTIONS, HINTS, REQUIRED);
    ({ limit: this.limit, windowMs: this.windowMs } = checkWindowSize(WHERE, o));
    this.clockBoundMs = windowClockBoundMs(this.windowMs);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.exactEntries = logExactEntries(this.limit);
    if (!timedPartDefined) SlidingWindowLog.defineTimedPart();
  }

  /**
   * @internal
   * Registers how allOf reads, checks and charges an exact SlidingWindowLog at one clock
   * reading (see timed-part.ts). Called by the first constructor rather than from a
   * static block, so that a bundle that does not use this class can drop it.
   */
  private static defineTimedPart(): void {
    timedPartDefined = true;
    defineTimedPart(SlidingWindowLog.prototype, {
      timeOf: (w) =>
        checkWindowClock(WHERE, readClock(WHERE, w.clock, w.seenMs), w.windowMs, w.clockBoundMs),
      fitsAt: (w, now, cost) => {
        // Expiring drops entries up to now: keep the reading, as peek does.
        if (now > w.seenMs) w.seenMs = now;
        w.ring.expire(now, w.limit);
        return cost === 0 || fits(cost, w.limit - w.ring.sum());
      },
      takeAt: (w, now, cost) => {
        if (now > w.seenMs) w.seenMs = now;
        if (cost === 0) return;
        w.ring.expire(now, w.limit);
        w.ring.append(now, cost, w.windowMs, w.exactEntries);
      },
      decideAt: (w, now, cost, take) => w.decide(cost, take, now),
      chargeAt: (w, now, cost) => w.chargeAt(now, cost),
      refundAt: (w, now, units, receipt) => w.refundAt(now, units, receipt),
      refundsWithoutReceipt: true,
    });
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

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const o = checkReconfigureOptions<SlidingWindowLogOptions>(
      WHERE,
      options,
      SLIDING_WINDOW_LOG_OPTIONS,
      HINTS,
    );
    const now = this.now();
    const next = checkWindowResize(WHERE, o, this, now);
    return () => {
      this.ring.expire(now, this.limit);
      if (next.windowMs > this.windowMs) this.ring.extend(next.windowMs - this.windowMs);
      const self = this as { limit: number; windowMs: number };
      self.limit = next.limit;
      self.windowMs = next.windowMs;
      this.clockBoundMs = next.clockBoundMs;
      this.exactEntries = logExactEntries(next.limit);
      this.receiptEpoch++;
      this.queue?.replan();
    };
  }

  /** `consume(cost).allowed`, without allocating (except when the ring grows). */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    // The ring's steps written out here, not behind one more call: V8 inlines them (20% faster).
    const ring = this.ring;
    ring.expire(now, this.limit);
    if (c === 0) return true;
    if (!fits(c, this.limit - ring.sum())) return false;
    ring.append(now, c, this.windowMs, this.exactEntries);
    return true;
  }

  /** Logs `cost` when it fits and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true, this.now());
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false, this.now());
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and the log entry charged (when it
   * leaves is the receipt's `refundableUntilMs`), for a refund through it later.
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    return this.chargeAt(this.now(), cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost));
  }

  /** Forgets every entry and frees the ring: back to the fresh state. Waiters keep waiting. */
  reset(): void {
    this.ring.clear();
    this.receiptEpoch++;
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
    const leaveAt = this.ring.newestLeaveAt();
    const epoch = this.receiptEpoch;
    return new ChargeReceipt(
      decision,
      undefined,
      cost,
      now,
      leaveAt,
      this,
      epoch,
      leaveAt,
      0,
      undefined,
    );
  }

  /**
   * @internal A refund at `now` of checked `units`: through `receipt` (at most what it still
   * holds), or without one, from the newest entries. Returns the units given back.
   */
  private refundAt(now: number, units: number, receipt: ChargeReceipt | undefined): number {
    if (now > this.seenMs) this.seenMs = now;
    if (!(units > 0)) return 0;
    const ring = this.ring;
    ring.expire(now, this.limit);
    let given: number;
    if (receipt === undefined) {
      given = ring.refund(units);
    } else {
      if (receipt.epoch !== this.receiptEpoch || !(receipt.a > now)) return 0;
      given = ring.refundEntry(receipt.a, units);
      receipt.refunded += given;
    }
    if (given > 0) this.queue?.wake();
    return given;
  }

  /** True when no entry is in the window and nobody waits. */
  isIdle(): boolean {
    this.ring.expire(this.now(), this.limit);
    return this.size === 0 && (this.queue === undefined || this.queue.size === 0);
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

  /** @internal `consume` (`take` true) or `peek` of a checked `cost` at `now` (a checked reading). */
  private decide(cost: number, take: boolean, now: number): Decision {
    if (now > this.seenMs) this.seenMs = now;
    return this.ring.decide(now, cost, take, this.limit, this.windowMs, this.exactEntries);
  }
}
