import { checkClock, checkCost, checkOptionNames, checkOptions } from "../errors.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  systemClock,
  UnkeyedLimiterBase,
  type WaitOptions,
} from "../limiter.js";
import { fits } from "../numeric.js";
import { optionNames, windowHints } from "../option-names.js";
import { WaitQueue } from "../wait.js";
import { checkWindowClock, checkWindowSize, readClock, windowClockBoundMs } from "./time.js";
import { defineTimedPart } from "./timed-part.js";
import { logDecision, logExactEntries, logLeaveAt } from "./window-math.js";

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
/** Entries a log allocates at its first use; it doubles from there as needed. */
const INITIAL_ENTRIES = 4;
const EMPTY = new Float64Array(0);

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
   * Entries kept at their exact time: `ceil(limit)`, at least 64, at most 2^24. Beyond
   * it new entries are stamped at the end of their granule of `windowMs / exactEntries`.
   */
  private readonly exactEntries: number;
  /** Most entries the log can hold: `2 * exactEntries + 1` (see `append`). */
  private readonly maxEntries: number;
  /**
   * The ring: entry `i` is `[leaveAtMs, total]` at `2i, 2i + 1`; `leaveAtMs` is
   * `time + windowMs`, and `total` the running total of costs up to this entry.
   */
  private slots: Float64Array = EMPTY;
  /** Entries the ring can hold (`slots.length / 2`). */
  private slotCount = 0;
  /** Ring position of the oldest entry. */
  private head = 0;
  /** Entries in the ring. */
  private size = 0;
  /** The running total before the oldest entry (the costs that have left). */
  private base = 0;
  /** Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  private readonly clockBoundMs = Number.POSITIVE_INFINITY;
  private queue: WaitQueue | undefined;

  constructor(options: SlidingWindowLogOptions) {
    super();
    const o = checkOptions<SlidingWindowLogOptions>(WHERE, options);
    checkOptionNames(WHERE, o, SLIDING_WINDOW_LOG_OPTIONS, HINTS);
    ({ limit: this.limit, windowMs: this.windowMs } = checkWindowSize(WHERE, o));
    this.clockBoundMs = windowClockBoundMs(this.windowMs);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.exactEntries = logExactEntries(this.limit);
    this.maxEntries = 2 * this.exactEntries + 1;
    if (!timedPartDefined) SlidingWindowLog.defineTimedPart();
  }

  /**
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
        w.expire(now);
        return cost === 0 || fits(cost, w.limit - w.sum());
      },
      takeAt: (w, now, cost) => {
        if (now > w.seenMs) w.seenMs = now;
        if (cost === 0) return;
        w.expire(now);
        w.append(now, cost);
      },
      decideAt: (w, now, cost, take) => w.decide(cost, take, now),
    });
  }

  /**
   * A new, empty log with the same options (clock included); the entries are not
   * copied. A keyed registry uses it to make one log per key.
   */
  clone(): SlidingWindowLog {
    return new SlidingWindowLog({ limit: this.limit, windowMs: this.windowMs, clock: this.clock });
  }

  /** `consume(cost).allowed`, without allocating (except when the ring grows). */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    this.expire(now);
    if (c === 0) return true;
    if (!fits(c, this.limit - this.sum())) return false;
    this.append(now, c);
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

  /** Forgets every entry and frees the ring: back to the fresh state. Waiters keep waiting. */
  reset(): void {
    this.slots = EMPTY;
    this.slotCount = 0;
    this.head = 0;
    this.size = 0;
    this.base = 0;
  }

  /** True when no entry is in the window and nobody waits. */
  isIdle(): boolean {
    this.expire(this.now());
    return this.size === 0 && (this.queue === undefined || this.queue.size === 0);
  }

  /**
   * Waits until `cost` fits, first-in, first-out behind earlier waiters, and resolves
   * with the granting decision. See {@link Limiter.wait}. A plain `consume` does not
   * queue: it may take free units while others wait.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    this.queue ??= new WaitQueue(WHERE, this);
    return this.queue.wait(cost, options);
  }

  /**
   * Reads the clock; a reading behind the latest one counts as the latest one. A
   * reading where `windowMs` is below the clock's float step throws and is not kept.
   */
  private now(): number {
    const t = readClock(WHERE, this.clock, this.seenMs);
    this.seenMs = checkWindowClock(WHERE, t, this.windowMs, this.clockBoundMs);
    return this.seenMs;
  }

  /** Ring position of the `i`-th oldest entry. */
  private at(i: number): number {
    const p = this.head + i;
    return p < this.slotCount ? p : p - this.slotCount;
  }

  /** Running total up to and including the newest entry. */
  private total(): number {
    return this.size === 0 ? this.base : this.slots[2 * this.at(this.size - 1) + 1]!;
  }

  /** Costs of the entries in the window. */
  private sum(): number {
    return this.size === 0 ? 0 : this.total() - this.base;
  }

  /** Drops the entries whose leave time has come (`time <= now - windowMs`). */
  private expire(now: number): void {
    const slots = this.slots;
    let dropped = false;
    while (this.size > 0 && slots[2 * this.head]! <= now) {
      this.base = slots[2 * this.head + 1]!;
      this.head = this.head + 1 === this.slotCount ? 0 : this.head + 1;
      this.size--;
      dropped = true;
    }
    if (!dropped) return;
    if (this.size === 0) {
      this.head = 0;
      this.base = 0;
    } else if (this.base > 2 * this.limit) {
      this.rebase();
    }
    if (this.slotCount > INITIAL_ENTRIES && this.size <= this.slotCount >> 2) {
      this.resize(Math.max(INITIAL_ENTRIES, 2 * this.size));
    }
  }

  /**
   * Subtracts `base` from every running total, keeping them below `3 * limit` so their
   * differences stay exact. Every entry is rebased at most once (FIFO, and more than
   * `2 * limit` must leave in between), so this is O(1) amortized.
   */
  private rebase(): void {
    const base = this.base;
    for (let i = 0; i < this.size; i++) this.slots[2 * this.at(i) + 1]! -= base;
    this.base = 0;
  }

  /** Copies the entries, oldest first, into a ring of `entries` slots. */
  private resize(entries: number): void {
    const next = new Float64Array(2 * entries);
    for (let i = 0; i < this.size; i++) {
      const p = 2 * this.at(i);
      next[2 * i] = this.slots[p]!;
      next[2 * i + 1] = this.slots[p + 1]!;
    }
    this.slots = next;
    this.slotCount = entries;
    this.head = 0;
  }

  /**
   * Logs `cost` (> 0) at `now`. Entries at the same stamp share one. While the log holds
   * fewer than `exactEntries` entries the stamp is `now`. Beyond that (only fractional
   * costs get there) the stamp is `now` rounded up to the end of its granule of
   * `g = windowMs / exactEntries`: at most `windowMs / g + 1` granules fit in a window,
   * so the log never holds more than `2 * exactEntries + 1` entries, and each such
   * entry counts at most `g` ms longer than it should, never shorter.
   */
  private append(now: number, cost: number): void {
    const leaveAtMs = this.leaveAt(now);
    if (this.size > 0) {
      const newest = 2 * this.at(this.size - 1);
      // The second test is a safety net the granules make unreachable: merge, later.
      if (this.slots[newest] === leaveAtMs || this.size >= this.maxEntries) {
        this.slots[newest] = leaveAtMs;
        this.slots[newest + 1]! += cost;
        return;
      }
    }
    if (this.size === this.slotCount) {
      const cap = this.slotCount < this.exactEntries ? this.exactEntries : this.maxEntries;
      this.resize(Math.min(Math.max(INITIAL_ENTRIES, 2 * this.slotCount), cap));
    }
    const total = this.total();
    const p = 2 * this.at(this.size);
    this.slots[p] = leaveAtMs;
    this.slots[p + 1] = total + cost;
    this.size++;
  }

  /** When an entry logged at `now` would leave: its stamp (see `append`) + `windowMs`. */
  private leaveAt(now: number): number {
    return logLeaveAt(now, this.size, this.windowMs, this.exactEntries);
  }

  /** `consume` (`take` true) or `peek` of a checked `cost` at `now` (a checked reading). */
  private decide(cost: number, take: boolean, now: number): Decision {
    if (now > this.seenMs) this.seenMs = now;
    this.expire(now);
    const limit = this.limit;
    const available = limit - this.sum();
    const allowed = cost === 0 || fits(cost, available);
    // The binary search runs only where logDecision reads its result: denied, cost <= limit.
    const decision = logDecision(
      cost,
      available,
      now,
      limit,
      this.windowMs,
      this.exactEntries,
      this.size,
      this.size === 0 ? Number.NEGATIVE_INFINITY : this.slots[2 * this.at(this.size - 1)]!,
      allowed || !fits(cost, limit) ? Number.NaN : this.retryLeaveAt(cost),
    );
    if (take && cost > 0 && allowed) this.append(now, cost);
    return decision;
  }

  /**
   * When enough of the oldest entries have left for `cost` (<= limit, denied now) to
   * fit: the leave time of the first entry `j` such that the entries after it, plus
   * `cost`, fit. Binary search over the running totals (they only grow).
   */
  private retryLeaveAt(cost: number): number {
    const slots = this.slots;
    const total = this.total();
    let lo = 0;
    let hi = this.size - 1; // the newest always works: nothing is left after it
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (fits(cost, this.limit - (total - slots[2 * this.at(mid) + 1]!))) hi = mid;
      else lo = mid + 1;
    }
    return slots[2 * this.at(lo)]!;
  }
}
