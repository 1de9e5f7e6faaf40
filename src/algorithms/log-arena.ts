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
 * allocated or freed: O(1) amortized per entry.
 * @internal
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

  /** Bytes the arena's arrays hold now: its entries and its rows. */
  heldBytes(): number {
    return 8 * (this.data.length + this.rows.length);
  }

  /**
   * Gives `owner` a block of `entries` (>= 1) entries, its `size` oldest entries of its ring
   * (a block of `wrap` entries with its oldest at `head`) copied to its start, oldest first;
   * the old block (if any) is freed. Read `data` and the owner's offset after it: a
   * compaction may move every block.
   */
  move(owner: number, entries: number, head: number, size: number): void {
    const rows = this.rows;
    const r = 2 * owner;
    const wrap = rows[r + 1]!;
    const to = this.take(entries); // may rebuild `data` and move the owner's block
    const data = this.data;
    const from = rows[r]!;
    for (let i = 0; i < size; i++) {
      const p = 2 * (head + i < wrap ? head + i : head + i - wrap);
      data[to + 2 * i] = data[from + p]!;
      data[to + 2 * i + 1] = data[from + p + 1]!;
    }
    if (wrap !== 0) this.give(from, wrap);
    rows[r] = to;
    rows[r + 1] = entries;
    this.maybeShrink();
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
