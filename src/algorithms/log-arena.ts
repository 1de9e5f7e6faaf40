const EMPTY = new Float64Array(0);

/**
 * One growable `Float64Array` of `[leaveAtMs, total]` pairs shared by the rings of many
 * sliding logs (every key of a keyed `SlidingWindowLog`, or a class's one log): no object or
 * array per ring. Owner `w` (a slot) has a row in `rows`: its block's offset and entry count
 * (0: no block); its ring's head, size and base are the caller's. A freed block goes on the
 * free list of its size (threaded through its first double) for the next block of that size.
 *
 * Compaction copies the live blocks, in owner order, to the start of a new array of `1.5 *`
 * the live doubles: when a block fits neither a free list nor the tail, and when frees leave
 * the array over twice its live doubles. So its length is at most `2 *` live: the slack is at
 * most the live blocks, and an owner that accounts each entry twice has `maxBytes` bound the
 * whole array. A rebuild copies O(live) doubles after at least a quarter of that was
 * allocated or freed: O(1) amortized per entry. @internal
 */
export class LogArena {
  /** The entries: owner `w`'s block starts at `rows[2w]`, entry `i` at `2i, 2i + 1` from it. */
  data: Float64Array = EMPTY;
  /** Per owner: `[offset, entries]`; `entries` 0 for an owner without a block. */
  rows: Float64Array = EMPTY;
  /** Doubles in use from the start of `data` (live and free blocks). */
  top = 0;
  /** Doubles in live blocks. */
  live = 0;
  /** Offset of the first free block of each entry count. */
  private readonly free = new Map<number, number>();

  /** Makes room for owners `0 .. owners - 1` (rows of new owners empty); fewer drops rows. */
  setOwners(owners: number): void {
    const n = 2 * owners;
    if (n === this.rows.length) return;
    const next = new Float64Array(n);
    next.set(n < this.rows.length ? this.rows.subarray(0, n) : this.rows);
    this.rows = next;
  }

  /**
   * Gives `owner` a block of `entries` (>= 1) entries holding its ring's `size` oldest
   * entries (from a block of `wrap` entries with its oldest at `head`), and returns where the
   * oldest is now: 0 in a new block (the old one, if any, is freed), or a place in the same
   * block when it ends the used part and grows where it is (a growing log's doubling: one
   * native copy of at most its oldest run, no compaction). Read `data` and the owner's offset
   * after it: a compaction may move every block.
   */
  move(owner: number, entries: number, head: number, size: number): number {
    const rows = this.rows;
    const r = 2 * owner;
    const wrap = rows[r + 1]!;
    if (entries > wrap && wrap !== 0) {
      const at = this.growInPlace(r, entries, head, size);
      if (at >= 0) return at;
    }
    const to = this.take(entries); // may rebuild `data` and move the owner's block
    const data = this.data;
    const from = rows[r]!;
    if (size > 0) {
      // The ring's two runs, oldest first: `[head, wrap)`, then `[0, size - first)`. (With no
      // entries, `head` may be stale: a released block leaves it as it was.)
      const first = size < wrap - head ? size : wrap - head;
      data.copyWithin(to, from + 2 * head, from + 2 * (head + first));
      if (size > first) data.copyWithin(to + 2 * first, from, from + 2 * (size - first));
    }
    if (wrap !== 0) this.give(from, wrap);
    rows[r] = to;
    rows[r + 1] = entries;
    this.maybeShrink();
    return 0;
  }

  /**
   * Grows the block at `rows[r]` to `entries` where it is when it ends the used part and the
   * array, grown if need be, stays within twice the live doubles; the ring's oldest run
   * (`[head, wrap)`, when the ring wraps) moves to the block's end, so the ring still wraps
   * there. Returns where the oldest entry is now, or -1 (not at the end, or too much slack).
   */
  private growInPlace(r: number, entries: number, head: number, size: number): number {
    const from = this.rows[r]!;
    const wrap = this.rows[r + 1]!;
    if (from + 2 * wrap !== this.top) return -1;
    const end = from + 2 * entries;
    const live = this.live + 2 * (entries - wrap);
    if (end > this.data.length) {
      if (end > 2 * live) return -1; // mostly free blocks before it: compact instead
      const next = new Float64Array(Math.max(end, Math.min(2 * live, Math.ceil(1.5 * live))));
      next.set(this.data.subarray(0, this.top));
      this.data = next;
    }
    this.live = live;
    this.top = end;
    this.rows[r + 1] = entries;
    if (size === 0) return 0;
    if (head + size <= wrap) return head; // one run: it stays
    const first = wrap - head;
    this.data.copyWithin(end - 2 * first, from + 2 * head, from + 2 * wrap);
    return entries - first;
  }

  /** Frees `owner`'s block (if any); returns the entries it had (0 for none). */
  release(owner: number): number {
    const rows = this.rows;
    const r = 2 * owner;
    const entries = rows[r + 1] ?? 0;
    if (entries === 0) return 0;
    this.give(rows[r]!, entries);
    rows[r] = 0;
    rows[r + 1] = 0;
    this.maybeShrink();
    return entries;
  }

  /** Frees every block and the array. */
  clear(): void {
    this.data = EMPTY;
    this.rows.fill(0);
    this.top = 0;
    this.live = 0;
    this.free.clear();
  }

  /** An offset for a block of `entries` entries: a free one, the tail, or after a rebuild. */
  private take(entries: number): number {
    const doubles = 2 * entries;
    this.live += doubles;
    const free = this.free.get(entries);
    if (free !== undefined) {
      const next = this.data[free]!;
      if (next < 0) this.free.delete(entries);
      else this.free.set(entries, next);
      return free;
    }
    if (this.top + doubles > this.data.length) this.rebuild(Math.ceil(1.5 * this.live));
    const at = this.top;
    this.top += doubles;
    return at;
  }

  /** Puts the block at `offset` of `entries` entries on its free list. */
  private give(offset: number, entries: number): void {
    this.data[offset] = this.free.get(entries) ?? -1;
    this.free.set(entries, offset);
    this.live -= 2 * entries;
  }

  /** Rebuilds at `1.5 *` live when the array is over twice its live doubles. */
  private maybeShrink(): void {
    if (this.data.length > 2 * this.live) this.rebuild(Math.ceil(1.5 * this.live));
  }

  /**
   * Copies the live blocks, in owner order, to the start of a new array of `length`
   * doubles (at least the live ones): free lists empty, the tail after the last block.
   */
  private rebuild(length: number): void {
    const old = this.data;
    const next = length === 0 ? EMPTY : new Float64Array(length);
    const rows = this.rows;
    let top = 0;
    for (let r = 0; r < rows.length; r += 2) {
      const entries = rows[r + 1]!;
      if (entries === 0) continue;
      const o = rows[r]!;
      next.set(old.subarray(o, o + 2 * entries), top);
      rows[r] = top;
      top += 2 * entries;
    }
    this.data = next;
    this.top = top;
    this.free.clear();
  }
}
