import type { Decision } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import type { LogArena } from "./log-arena.js";
import { logDecision, logLeaveAt, NEXT_UP } from "./window-math.js";

/** Entries a ring's block holds at its first entry; it doubles from there as needed. */
export const INITIAL_ENTRIES = 1;
/** Doubles of a ring in its owner's slot: head, size, base. */
export const RING_DOUBLES = 3;
/** Offsets of a ring's head, size and base in its owner's slot (`st[s + HEAD]` ...). */
export const HEAD = 0;
export const SIZE = 1;
export const BASE = 2;

/**
 * The log of a sliding window log and the decisions made on it: a ring of `[leaveAtMs,
 * runningTotal]` entries in a block of a {@link LogArena}, with its head, size and base in
 * {@link RING_DOUBLES} doubles of the owner's slot (`st[s ..]`). The block grows by doubling
 * (up to `2 * exactEntries + 1` entries) and shrinks when mostly empty. The one rule text of
 * every form (`SlidingWindowLog`, its `allOf` parts, the keyed registry's keys), so all
 * decide bit for bit alike; `limit`, `windowMs` and `exactEntries` are passed to each call.
 *
 * A cursor: {@link at} points it at one ring; each method reads that ring afresh (a block
 * allocated or freed meanwhile may have compacted the arena). Entries leave from the head as
 * they expire (O(1) amortized); the sum in the window is the difference of two running
 * totals, so it does not drift. Times are ms on the caller's clock, `nowMs` checked (at
 * least every earlier one). Memory: 16 bytes per entry of the block, none before the first.
 * @internal
 */
export class LogRing {
  /** False while the ring may not grow (the keyed registry is at `maxBytes`): appends merge. */
  growable = true;
  private arena!: LogArena;
  private owner = 0;
  private st!: Float64Array;
  private s = 0;

  /** Points the cursor at the ring of `owner` in `arena`, its head at `st[s]`; returns it. */
  at(arena: LogArena, owner: number, st: Float64Array, s: number): this {
    this.arena = arena;
    this.owner = owner;
    this.st = st;
    this.s = s;
    return this;
  }

  /** Entries the ring's block holds (0: no block). */
  get slotCount(): number {
    return this.arena.rows[2 * this.owner + 1]!;
  }
  /** Entries in the ring. */
  get size(): number {
    return this.st[this.s + SIZE]!;
  }
  /** The running total before the oldest entry (the costs that have left). */
  get base(): number {
    return this.st[this.s + BASE]!;
  }

  /** Offset in `arena.data` of the `i`-th oldest entry. */
  private o(i: number): number {
    const rows = this.arena.rows;
    const n = rows[2 * this.owner + 1]!;
    const p = this.st[this.s + HEAD]! + i;
    return rows[2 * this.owner]! + 2 * (p < n ? p : p - n);
  }

  /** Writes an empty ring without a block (the block, if any, the caller freed). */
  init(): void {
    const st = this.st;
    const s = this.s;
    st[s + HEAD] = 0;
    st[s + SIZE] = 0;
    st[s + BASE] = 0;
  }

  /** The log as plain numbers, for a snapshot: `[base, leaveAt, total, ...]`, oldest first; `[]` when empty. */
  save(): number[] {
    const size = this.size;
    if (size === 0) return [];
    const data = this.arena.data;
    const out = [this.base];
    for (let i = 0; i < size; i++) {
      const p = this.o(i);
      out.push(data[p]!, data[p + 1]!);
    }
    return out;
  }

  /**
   * Holds the entries {@link save} returned (checked by {@link checkSavedLog}), in a block of
   * their count doubled up from {@link INITIAL_ENTRIES} (at most `maxEntries` when they fit
   * it), replacing what the ring held.
   */
  load(values: readonly number[], maxEntries: number): void {
    const size = (values.length - 1) / 2;
    this.st[this.s + SIZE] = 0;
    if (values.length === 0) {
      this.arena.release(this.owner);
      this.init();
      return;
    }
    let count = INITIAL_ENTRIES;
    while (count < size) count *= 2;
    if (count > maxEntries && size <= maxEntries) count = maxEntries;
    if (count !== this.slotCount) this.arena.move(this.owner, count, 0, 0);
    const data = this.arena.data;
    const o = this.arena.rows[2 * this.owner]!;
    for (let i = 1; i < values.length; i++) data[o + i - 1] = values[i]!;
    const st = this.st;
    st[this.s + HEAD] = 0;
    st[this.s + SIZE] = size;
    st[this.s + BASE] = values[0]!;
  }

  /** Running total up to and including the newest entry. */
  total(): number {
    const size = this.st[this.s + SIZE]!;
    return size === 0 ? this.st[this.s + BASE]! : this.arena.data[this.o(size - 1) + 1]!;
  }

  /** Costs of the entries in the window. */
  sum(): number {
    // Addressed in place, not through o(): a decision's inlining budget must hold it.
    const st = this.st;
    const s = this.s;
    const size = st[s + SIZE]!;
    if (size === 0) return 0;
    const rows = this.arena.rows;
    const n = rows[2 * this.owner + 1]!;
    const p = st[s + HEAD]! + size - 1;
    return this.arena.data[rows[2 * this.owner]! + 2 * (p < n ? p : p - n) + 1]! - st[s + BASE]!;
  }

  /** When the newest entry leaves (a tombstone too); `-Infinity` for an empty log. */
  newestLeaveAt(): number {
    const size = this.st[this.s + SIZE]!;
    return size === 0 ? Number.NEGATIVE_INFINITY : this.arena.data[this.o(size - 1)]!;
  }

  /**
   * When the newest entry holding units leaves, as a decision states it: a tombstone at the
   * tail (see {@link refund}) holds none, so the entry before it; `-Infinity` for none.
   */
  newestLiveLeaveAt(): number {
    const size = this.st[this.s + SIZE]!;
    if (size === 0) return Number.NEGATIVE_INFINITY;
    const data = this.arena.data;
    const p = this.o(size - 1);
    const before = size === 1 ? this.st[this.s + BASE]! : data[this.o(size - 2) + 1]!;
    if (data[p + 1] !== before) return data[p]!;
    return size === 1 ? Number.NEGATIVE_INFINITY : data[this.o(size - 2)]!;
  }

  /** Drops the entries whose leave time has come (`time <= now - windowMs`). */
  expire(nowMs: number, limit: number): void {
    // Most calls find nothing to drop: this test alone stays small enough for V8 to inline
    // into every decision; the dropping is a call of its own.
    const st = this.st;
    const s = this.s;
    if (st[s + SIZE] === 0) return;
    if (this.arena.data[this.arena.rows[2 * this.owner]! + 2 * st[s + HEAD]!]! > nowMs) return;
    this.drop(nowMs, limit);
  }

  /** {@link expire} of a ring whose oldest entry has left. */
  private drop(nowMs: number, limit: number): void {
    const st = this.st;
    const s = this.s;
    let size = st[s + SIZE]!;
    const rows = this.arena.rows;
    const data = this.arena.data;
    const off = rows[2 * this.owner]!;
    let head = st[s + HEAD]!;
    const n = rows[2 * this.owner + 1]!;
    let base = 0;
    do {
      base = data[off + 2 * head + 1]!;
      head = head + 1 === n ? 0 : head + 1;
      size--;
    } while (size > 0 && data[off + 2 * head]! <= nowMs);
    st[s + SIZE] = size;
    if (size === 0) {
      st[s + HEAD] = 0;
      st[s + BASE] = 0;
    } else {
      st[s + HEAD] = head;
      st[s + BASE] = base;
      if (base > 2 * limit) this.rebase();
    }
    if (n > INITIAL_ENTRIES && size <= n >> 2) this.resize(Math.max(INITIAL_ENTRIES, 2 * size));
  }

  /**
   * Subtracts `base` from every running total, keeping them below `3 * limit` so their
   * differences stay exact. Every entry is rebased at most once (FIFO, and more than
   * `2 * limit` must leave in between), so this is O(1) amortized.
   */
  private rebase(): void {
    const base = this.base;
    const data = this.arena.data;
    for (let i = 0; i < this.size; i++) data[this.o(i) + 1]! -= base;
    this.st[this.s + BASE] = 0;
  }

  /** Moves the entries, oldest first, into a block of `entries` entries. */
  private resize(entries: number): void {
    const s = this.s;
    this.st[s + HEAD] = this.arena.move(this.owner, entries, this.st[s + HEAD]!, this.size);
  }

  /**
   * Logs `cost` (> 0) at `nowMs`, leaving at {@link logLeaveAt} (whose stamps bound the log to
   * `2 * exactEntries + 1` entries). Entries at the same stamp share one.
   */
  append(nowMs: number, cost: number, windowMs: number, exactEntries: number): void {
    // The common case, a new newest entry in a block with room, written out small enough
    // for V8 to inline into every decision; anything else is a call of its own.
    const st = this.st;
    const s = this.s;
    const size = st[s + SIZE]!;
    const rows = this.arena.rows;
    const r = 2 * this.owner;
    const n = rows[r + 1]!;
    if (size !== 0 && size < n && size < 2 * exactEntries + 1) {
      const leaveAtMs = logLeaveAt(nowMs, size, windowMs, exactEntries);
      const data = this.arena.data;
      const off = rows[r]!;
      const p = st[s + HEAD]! + size - 1;
      const q = p < n ? p : p - n;
      const newest = off + 2 * q;
      if (data[newest]! < leaveAtMs) {
        const o = q + 1 === n ? off : newest + 2;
        data[o] = leaveAtMs;
        data[o + 1] = data[newest + 1]! + cost;
        st[s + SIZE] = size + 1;
        return;
      }
    }
    this.appendAny(nowMs, cost, windowMs, exactEntries);
  }

  /** {@link append} in every case: merges, a tombstone at the tail, a block to grow. */
  private appendAny(nowMs: number, cost: number, windowMs: number, exactEntries: number): void {
    const st = this.st;
    const s = this.s;
    const r = 2 * this.owner;
    const size = st[s + SIZE]!;
    let leaveAtMs = logLeaveAt(nowMs, size, windowMs, exactEntries);
    let n = this.arena.rows[r + 1]!;
    let total = st[s + BASE]!;
    if (size > 0) {
      const data = this.arena.data;
      const p = st[s + HEAD]! + size - 1;
      const newest = this.arena.rows[r]! + 2 * (p < n ? p : p - n);
      const at = data[newest]!;
      total = data[newest + 1]!;
      if (at >= leaveAtMs) {
        if (total !== (size === 1 ? st[s + BASE]! : data[this.o(size - 2) + 1]!)) {
          // The same stamp (or the one just after a tombstone's): one entry. So too a
          // newest entry leaving later than this one would (logged before `reconfigure`
          // shortened the window, or stamped at a granule's end while the log was longer):
          // the charge counts until it leaves (a little longer, never shorter), and leave
          // times stay in order, as expiry and snapshots need.
          data[newest + 1] = total + cost;
          return;
        } else {
          // A tombstone (no units: see refund) takes no charge, and the new entry leaves
          // just after it, so that a receipt of the tombstone's entries finds it first and
          // the new charge's receipt its own entry.
          leaveAtMs = at + Math.abs(at) * NEXT_UP;
        }
      }
      // A safety net the granules make unreachable: merge, later. And the keyed registry's
      // memory bound: a full ring it may not grow merges too, so the newest entry counts a
      // little longer (conservative), never shorter.
      if (size >= 2 * exactEntries + 1 || (size === n && !this.growable)) {
        if (leaveAtMs > at) data[newest] = leaveAtMs;
        data[newest + 1] = total + cost;
        return;
      }
    }
    if (size === n) {
      const cap = n < exactEntries ? exactEntries : 2 * exactEntries + 1;
      this.resize(Math.min(Math.max(INITIAL_ENTRIES, 2 * n), cap));
      n = this.arena.rows[r + 1]!;
    }
    const p = st[s + HEAD]! + size;
    const o = this.arena.rows[r]! + 2 * (p < n ? p : p - n);
    const data = this.arena.data;
    data[o] = leaveAtMs;
    data[o + 1] = total + cost;
    st[s + SIZE] = size + 1;
  }

  /**
   * Replaces every entry by one of `cost` units leaving at `leaveAtMs`, in a block of
   * {@link INITIAL_ENTRIES} entries (the keyed registry's conservative states).
   */
  replace(leaveAtMs: number, cost: number): void {
    const st = this.st;
    const s = this.s;
    st[s + SIZE] = 0;
    if (this.slotCount !== INITIAL_ENTRIES) this.resize(INITIAL_ENTRIES);
    st[s + HEAD] = 0;
    st[s + SIZE] = 1;
    st[s + BASE] = 0;
    const p = this.arena.rows[2 * this.owner]!;
    this.arena.data[p] = leaveAtMs;
    this.arena.data[p + 1] = cost;
  }

  /**
   * Moves every entry's leave time `deltaMs` (> 0) later: the log's window grew by it
   * (`reconfigure`), so each entry counts for the new length from its stamp.
   */
  extend(deltaMs: number): void {
    const data = this.arena.data;
    for (let i = 0; i < this.size; i++) data[this.o(i)]! += deltaMs;
  }

  /**
   * Gives back `cost` (> 0) units, from the newest entries first (a refund): an entry whose
   * cost is at most what is left to give back goes, the next one is cut by the rest. Never
   * below an empty log; the ring keeps its block (an expiry shrinks it later). Returns the
   * units given back (`cost` less what found no entry, as the Redis script counts it).
   *
   * The entries that went leave one **tombstone** at the tail: an entry of no units leaving
   * when the latest of them left, so that a receipt of one of them (found by its leave
   * time, {@link refundEntry}) finds it empty rather than a later charge's entry. A log
   * holds at most one tombstone at its tail (a later refund takes it with the entries it
   * takes); it leaves as any entry, and decisions read past it ({@link newestLiveLeaveAt}).
   */
  refund(cost: number): number {
    const data = this.arena.data;
    const st = this.st;
    const s = this.s;
    let left = cost;
    let gone = Number.NEGATIVE_INFINITY;
    while (st[s + SIZE]! > 0) {
      const size = st[s + SIZE]!;
      const p = this.o(size - 1) + 1;
      const before = size === 1 ? st[s + BASE]! : data[this.o(size - 2) + 1]!;
      const own = data[p]! - before;
      if (own !== 0 && !(left > 0)) break;
      // An empty entry (a tombstone, or one a receipt emptied) goes with the rest.
      if (own === 0 || fits(own, left)) {
        if (data[p - 1]! > gone) gone = data[p - 1]!;
        st[s + SIZE] = size - 1;
        left -= own;
      } else {
        data[p] = data[p]! - left;
        left = 0;
      }
    }
    if (gone !== Number.NEGATIVE_INFINITY) this.pushTombstone(gone);
    return cost - left;
  }

  /**
   * The empty entries at the tail (a tombstone, entries receipts emptied) become one
   * tombstone leaving when the latest of them leaves: amortized O(1), each entry goes once.
   */
  private collapseTail(): void {
    const data = this.arena.data;
    let size = this.size;
    let gone = Number.NEGATIVE_INFINITY;
    while (size > 0) {
      const p = this.o(size - 1);
      const before = size === 1 ? this.base : data[this.o(size - 2) + 1]!;
      if (data[p + 1] !== before) break;
      if (data[p]! > gone) gone = data[p]!;
      size--;
    }
    if (gone === Number.NEGATIVE_INFINITY) return;
    this.st[this.s + SIZE] = size;
    this.pushTombstone(gone);
  }

  /** Appends an entry of no units leaving at `leaveAtMs` (a slot a refund just freed). */
  private pushTombstone(leaveAtMs: number): void {
    const size = this.size;
    const total = this.total();
    const p = this.o(size);
    const data = this.arena.data;
    data[p] = leaveAtMs;
    data[p + 1] = total;
    this.st[this.s + SIZE] = size + 1;
  }

  /**
   * Gives back up to `cost` (> 0) units of the entry a charge at `leaveAtMs` went into (a refund
   * through a receipt): the first entry leaving at or after it (an entry may have been stamped
   * later since, when later charges merged into it, never earlier). Takes at most what that entry
   * still holds: other refunds (through receipts of charges merged into it, or {@link refund},
   * which leaves a tombstone where whole entries went) took theirs first, so a receipt never gives
   * back a later charge's units. An entry wholly given back stays, empty, until it leaves (its
   * other receipts find it so); the newest becomes the tail's one tombstone. Returns the units
   * given back: 0 when the entry has left or holds nothing.
   */
  refundEntry(leaveAtMs: number, cost: number): number {
    const data = this.arena.data;
    const size = this.size;
    let i = 0;
    while (i < size && data[this.o(i)]! < leaveAtMs) i++;
    if (i === size) return 0;
    const p = this.o(i) + 1;
    const before = i === 0 ? this.base : data[this.o(i - 1) + 1]!;
    const own = data[p]! - before;
    const give = own < cost ? own : cost;
    if (!(give > 0)) return 0;
    // The entry keeps its place, emptied or cut; the newer ones' totals drop by its units.
    data[p] = give === own ? before : data[p]! - give;
    for (let j = i + 1; j < size; j++) data[this.o(j) + 1]! -= give;
    // Emptied, it may end the log's units: the empty entries at the tail become one tombstone.
    if (give === own) this.collapseTail();
    return give;
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
      this.newestLiveLeaveAt(),
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
    const data = this.arena.data;
    const total = this.total();
    let lo = 0;
    let hi = this.size - 1; // the newest always works: nothing is left after it
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (fits(cost, limit - (total - data[this.o(mid) + 1]!))) hi = mid;
      else lo = mid + 1;
    }
    return data[this.o(lo)]!;
  }
}

/**
 * Throws unless `values` is a log's state as {@link LogRing.save} writes it: `[]`, or a
 * finite base then `(leaveAt, total)` pairs with finite leave times in order and running
 * totals that never fall below the one before (each entry's cost at least 0): a total
 * below the one before it would admit past the limit. Changes nothing.
 * @throws {TypeError} For a list of another shape.
 * @throws {RangeError} For a number out of order or not finite.
 * @internal
 */
export function checkSavedLog(values: readonly number[]): void {
  if (values.length === 0) return;
  if (values.length % 2 !== 1) {
    throw new TypeError(
      `snapshot.state holds a log: its base then (leave time, total) pairs, got ${values.length} numbers`,
    );
  }
  let prevTotal = values[0]!;
  let prevLeave = Number.NEGATIVE_INFINITY;
  if (prevTotal - prevTotal !== 0) {
    throw new RangeError(
      `snapshot.state holds a log, whose base must be a finite number, got ${prevTotal}`,
    );
  }
  for (let i = 1; i < values.length; i += 2) {
    const leave = values[i]!;
    const total = values[i + 1]!;
    if (!(leave - leave === 0 && leave >= prevLeave && total - total === 0 && total >= prevTotal)) {
      throw new RangeError(
        `snapshot.state holds a log, whose entries must have finite leave times in order and running totals that never fall, entry ${(i - 1) / 2} is (${leave}, ${total})`,
      );
    }
    prevLeave = leave;
    prevTotal = total;
  }
}
