import type { Decision } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import { logDecision, logLeaveAt } from "./window-math.js";

/** Entries a ring allocates at its first entry; it doubles from there as needed. */
export const INITIAL_ENTRIES = 4;
const EMPTY = new Float64Array(0);

/**
 * The log of a sliding window log: a ring buffer of `[leaveAtMs, runningTotal]` entries in
 * one `Float64Array` that grows by doubling (up to `2 * exactEntries + 1` entries) and
 * shrinks when mostly empty, with the decisions made on it. Shared by `SlidingWindowLog`
 * (one ring) and the keyed registry's log layout (one ring per key), so both decide bit for
 * bit alike; the options (`limit`, `windowMs`, `exactEntries` = `logExactEntries(limit)`)
 * are the caller's and passed to each call, so a ring holds only its entries.
 *
 * Entries leave from the head as they expire (O(1) amortized per call); the sum in the
 * window is the difference of two running totals, so it does not drift with float error.
 * Times are milliseconds on the caller's clock, `nowMs` a checked reading (at least every
 * earlier one). Memory: 16 bytes per entry slot (`slotCount`), none before the first entry.
 * @internal
 */
export class LogRing {
  /** Entry `i` is `[leaveAtMs, total]` at `2i, 2i + 1`: `total` is the running total of costs up to it. */
  slots: Float64Array = EMPTY;
  /** Entries the ring can hold (`slots.length / 2`). */
  slotCount = 0;
  /** False while the ring may not grow (the keyed registry is at `maxBytes`): appends merge. */
  growable = true;
  /** Ring position of the oldest entry. */
  head = 0;
  /** Entries in the ring. */
  size = 0;
  /** The running total before the oldest entry (the costs that have left). */
  base = 0;

  /** Ring position of the `i`-th oldest entry. */
  /** The log as plain numbers, for a snapshot: `[base, leaveAt, total, ...]`, oldest first; `[]` when empty. */
  save(): number[] {
    if (this.size === 0) return [];
    const out = [this.base];
    for (let i = 0; i < this.size; i++) {
      const p = 2 * this.at(i);
      out.push(this.slots[p]!, this.slots[p + 1]!);
    }
    return out;
  }

  /**
   * Holds the entries {@link save} returned (in a ring of their size, at least the initial one).
   * @throws {TypeError} For a list of another shape, changing nothing.
   */
  load(values: readonly number[]): void {
    if (values.length === 0) return;
    if (values.length % 2 !== 1) {
      throw new TypeError(
        `snapshot: a log's state is its base then (leave time, total) pairs, got ${values.length} numbers`,
      );
    }
    const size = (values.length - 1) / 2;
    // Finite, the totals never falling (each entry's cost is at least 0) and the leave
    // times in order: a total below the one before it would admit past the limit.
    let prevTotal = values[0]!;
    let prevLeave = Number.NEGATIVE_INFINITY;
    if (prevTotal - prevTotal !== 0) {
      throw new RangeError(`snapshot: a log's base must be a finite number, got ${prevTotal}`);
    }
    for (let i = 1; i < values.length; i += 2) {
      const leave = values[i]!;
      const total = values[i + 1]!;
      if (
        !(leave - leave === 0 && leave >= prevLeave && total - total === 0 && total >= prevTotal)
      ) {
        throw new RangeError(
          `snapshot: a log's entries must have finite leave times in order and running totals that never fall, entry ${(i - 1) / 2} is (${leave}, ${total})`,
        );
      }
      prevLeave = leave;
      prevTotal = total;
    }
    let count = INITIAL_ENTRIES;
    while (count < size) count *= 2;
    this.slots = new Float64Array(2 * count);
    for (let i = 1; i < values.length; i++) this.slots[i - 1] = values[i]!;
    this.slotCount = count;
    this.head = 0;
    this.size = size;
    this.base = values[0]!;
  }

  at(i: number): number {
    const p = this.head + i;
    return p < this.slotCount ? p : p - this.slotCount;
  }

  /** Running total up to and including the newest entry. */
  total(): number {
    return this.size === 0 ? this.base : this.slots[2 * this.at(this.size - 1) + 1]!;
  }

  /** Costs of the entries in the window. */
  sum(): number {
    return this.size === 0 ? 0 : this.total() - this.base;
  }

  /** When the newest entry leaves; `-Infinity` for an empty log. */
  newestLeaveAt(): number {
    return this.size === 0 ? Number.NEGATIVE_INFINITY : this.slots[2 * this.at(this.size - 1)]!;
  }

  /** Drops the entries whose leave time has come (`time <= now - windowMs`). */
  expire(nowMs: number, limit: number): void {
    const slots = this.slots;
    let dropped = false;
    while (this.size > 0 && slots[2 * this.head]! <= nowMs) {
      this.base = slots[2 * this.head + 1]!;
      this.head = this.head + 1 === this.slotCount ? 0 : this.head + 1;
      this.size--;
      dropped = true;
    }
    if (!dropped) return;
    if (this.size === 0) {
      this.head = 0;
      this.base = 0;
    } else if (this.base > 2 * limit) {
      this.rebase();
    }
    if (this.slotCount > INITIAL_ENTRIES && this.size <= this.slotCount >> 2) {
      this.resize(Math.max(INITIAL_ENTRIES, 2 * this.size));
    }
  }

  /**
   * @internal
   * Subtracts `base` from every running total, keeping them below `3 * limit` so their
   * differences stay exact. Every entry is rebased at most once (FIFO, and more than
   * `2 * limit` must leave in between), so this is O(1) amortized.
   */
  private rebase(): void {
    const base = this.base;
    for (let i = 0; i < this.size; i++) this.slots[2 * this.at(i) + 1]! -= base;
    this.base = 0;
  }

  /** @internal Copies the entries, oldest first, into a ring of `entries` slots. */
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
   * Logs `cost` (> 0) at `nowMs`, leaving at {@link logLeaveAt}. Entries at the same stamp
   * share one. While the log holds fewer than `exactEntries` entries the stamp is `nowMs`;
   * beyond that (only fractional costs get there) it is `nowMs` rounded up to the end of
   * its granule of `g = windowMs / exactEntries`: at most `windowMs / g + 1` granules fit
   * in a window, so the log never holds more than `2 * exactEntries + 1` entries, and each
   * such entry counts at most `g` ms longer than it should, never shorter.
   */
  append(nowMs: number, cost: number, windowMs: number, exactEntries: number): void {
    const leaveAtMs = logLeaveAt(nowMs, this.size, windowMs, exactEntries);
    const maxEntries = 2 * exactEntries + 1;
    if (this.size > 0) {
      const newest = 2 * this.at(this.size - 1);
      // The second test is a safety net the granules make unreachable: merge, later. The
      // third is the keyed registry's memory bound: a full ring it may not grow merges too,
      // so the newest entry counts a little longer (conservative), never shorter.
      if (
        this.slots[newest] === leaveAtMs ||
        this.size >= maxEntries ||
        (this.size === this.slotCount && !this.growable)
      ) {
        this.slots[newest] = leaveAtMs;
        this.slots[newest + 1]! += cost;
        return;
      }
    }
    if (this.size === this.slotCount) {
      const cap = this.slotCount < exactEntries ? exactEntries : maxEntries;
      this.resize(Math.min(Math.max(INITIAL_ENTRIES, 2 * this.slotCount), cap));
    }
    const total = this.total();
    const p = 2 * this.at(this.size);
    this.slots[p] = leaveAtMs;
    this.slots[p + 1] = total + cost;
    this.size++;
  }

  /**
   * Replaces every entry by one of `cost` units leaving at `leaveAtMs`, in a ring of
   * {@link INITIAL_ENTRIES} slots (the keyed registry's conservative states).
   */
  replace(leaveAtMs: number, cost: number): void {
    if (this.slotCount !== INITIAL_ENTRIES) {
      this.slots = new Float64Array(2 * INITIAL_ENTRIES);
      this.slotCount = INITIAL_ENTRIES;
    }
    this.head = 0;
    this.size = 1;
    this.base = 0;
    this.slots[0] = leaveAtMs;
    this.slots[1] = cost;
  }

  /**
   * Moves every entry's leave time `deltaMs` (> 0) later: the log's window grew by it
   * (`reconfigure`), so each entry counts for the new length from its stamp.
   */
  extend(deltaMs: number): void {
    for (let i = 0; i < this.size; i++) this.slots[2 * this.at(i)]! += deltaMs;
  }

  /**
   * Gives back `cost` (> 0) units, from the newest entries first (a refund): an entry whose
   * cost is at most what is left to give back goes, the next one is cut by the rest. Never
   * below an empty log; the ring keeps its slots (an expiry shrinks it later). Returns the
   * units given back (`cost` less what found no entry, as the Redis script counts it).
   */
  refund(cost: number): number {
    let left = cost;
    while (left > 0 && this.size > 0) {
      const p = 2 * this.at(this.size - 1) + 1;
      const before = this.size === 1 ? this.base : this.slots[2 * this.at(this.size - 2) + 1]!;
      const own = this.slots[p]! - before;
      if (fits(own, left)) {
        this.size--;
        left -= own;
      } else {
        this.slots[p] = this.slots[p]! - left;
        left = 0;
      }
    }
    if (this.size === 0) {
      this.head = 0;
      this.base = 0;
    }
    return cost - left;
  }

  /**
   * Gives back up to `cost` (> 0) units of the entry a charge at `leaveAtMs` went into (a
   * refund through a receipt): the first entry leaving at or after it (an entry may have
   * been stamped later since, when later charges merged into it, never earlier). Takes at
   * most that entry's own units; an entry wholly given back leaves the log. Returns the
   * units given back: 0 when the entry has left.
   */
  refundEntry(leaveAtMs: number, cost: number): number {
    let i = 0;
    while (i < this.size && this.slots[2 * this.at(i)]! < leaveAtMs) i++;
    if (i === this.size) return 0;
    const p = 2 * this.at(i) + 1;
    const before = i === 0 ? this.base : this.slots[2 * this.at(i - 1) + 1]!;
    const own = this.slots[p]! - before;
    const give = own < cost ? own : cost;
    if (!(give > 0)) return 0;
    if (give === own) {
      // The entry leaves: the newer ones move down one place, each total less its units.
      for (let j = i; j + 1 < this.size; j++) {
        const to = 2 * this.at(j);
        const from = 2 * this.at(j + 1);
        this.slots[to] = this.slots[from]!;
        this.slots[to + 1] = this.slots[from + 1]! - give;
      }
      this.size--;
      if (this.size === 0) {
        this.head = 0;
        this.base = 0;
      }
    } else {
      for (let j = i; j < this.size; j++) this.slots[2 * this.at(j) + 1]! -= give;
    }
    return give;
  }

  /** Forgets every entry and frees the ring. */
  clear(): void {
    this.slots = EMPTY;
    this.slotCount = 0;
    this.head = 0;
    this.size = 0;
    this.base = 0;
  }

  /**
   * `consume` (`take` true) or `peek` of a checked `cost` at `nowMs`, built by
   * {@link logDecision}; a consumed cost that fits is logged.
   */
  decide(
    nowMs: number,
    cost: number,
    take: boolean,
    limit: number,
    windowMs: number,
    exactEntries: number,
  ): Decision {
    this.expire(nowMs, limit);
    const available = limit - this.sum();
    const allowed = cost === 0 || fits(cost, available);
    // The binary search runs only where logDecision reads its result: denied, cost <= limit.
    const decision = logDecision(
      cost,
      available,
      nowMs,
      limit,
      windowMs,
      exactEntries,
      this.size,
      this.newestLeaveAt(),
      allowed || !fits(cost, limit) ? Number.NaN : this.retryLeaveAt(cost, limit),
    );
    if (take && cost > 0 && allowed) this.append(nowMs, cost, windowMs, exactEntries);
    return decision;
  }

  /**
   * When enough of the oldest entries have left for `cost` (<= limit, denied now) to
   * fit: the leave time of the first entry `j` such that the entries after it, plus
   * `cost`, fit. Binary search over the running totals (they only grow).
   */
  retryLeaveAt(cost: number, limit: number): number {
    const slots = this.slots;
    const total = this.total();
    let lo = 0;
    let hi = this.size - 1; // the newest always works: nothing is left after it
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (fits(cost, limit - (total - slots[2 * this.at(mid) + 1]!))) hi = mid;
      else lo = mid + 1;
    }
    return slots[2 * this.at(lo)]!;
  }
}
