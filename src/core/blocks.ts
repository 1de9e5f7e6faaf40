/**
 * The one table of blocked keys (a ban after abuse) that every path of a limiter consults:
 * docs/semantics.md#blocks. @module
 */
import type { Decision } from "./limiter.js";
import { TimeHeap } from "./time-heap.js";

/**
 * The denial of a key blocked `leftMs` more, on every path that keeps blocks (keyed, store,
 * Redis): nothing remaining, and `retryAfterMs` and `resetAfterMs` at least `leftMs`, or what
 * the key's state alone says (`retryMs`, `resetMs`: its usage without the cost) when longer.
 */
export function blockedDenial(
  limit: number,
  retryMs: number,
  resetMs: number,
  leftMs: number,
): Decision {
  return {
    allowed: false,
    limit,
    remaining: 0,
    retryAfterMs: retryMs > leftMs ? retryMs : leftMs,
    resetAfterMs: resetMs > leftMs ? resetMs : leftMs,
  };
}

/**
 * Blocked keys and when each block ends, on the owner's clock (ms): bounded (at most
 * `maxKeys` keys; a block of one more is refused and counted, never one in place dropped),
 * counted ({@link stats}), expiring (an ended block is dropped when next looked at, or when
 * room is needed). A block is lifted only by {@link unblock} (which `reset` calls) or its
 * end; a later block of the same key extends it, an earlier one never shortens it.
 *
 * O(1) per look-up; a block costs O(log n) amortised: a min-heap of the ends (stale nodes
 * skipped, rebuilt at twice the entries) says which blocks ended without a pass over them,
 * so a full table refuses one more in O(1) while its earliest block has not ended.
 *
 * Shared by the paths of one limiter (a Redis limiter records a block here at once, so its
 * fallbacks and its healthy path all deny the key, whatever the store remembers). @internal
 */
export class BlockTable {
  /** @internal */
  private readonly until = new Map<string, number>();
  /** @internal The ends, a key per node (stale once the key's end moved or it was lifted). */
  private readonly ends = new TimeHeap<string>();
  /** @internal */
  private refused = 0;

  /** @param maxKeys Most keys blocked at once. */
  constructor(readonly maxKeys: number) {}

  /** Keys kept (ended blocks not yet dropped included). */
  get size(): number {
    return this.until.size;
  }

  /** Blocks of new keys refused because the table was full, since it was made. */
  get stats(): { readonly refused: number } {
    return { refused: this.refused };
  }

  /**
   * Blocks `key` until `untilMs` (a later end extends a block in place, an earlier one never
   * shortens it). False when the table is full of blocks still in force (after dropping the
   * ended ones): refused, counted, nothing changed.
   */
  block(key: string, untilMs: number, nowMs: number): boolean {
    const had = this.untilOf(key, nowMs);
    if (had === Number.NEGATIVE_INFINITY) {
      if (this.until.size >= this.maxKeys) this.sweep(nowMs);
      if (this.until.size >= this.maxKeys) {
        this.refused++;
        return false;
      }
    }
    if (untilMs > had) {
      this.until.set(key, untilMs);
      this.push(key, untilMs);
    }
    return true;
  }

  /** Lifts the block of `key`; true when it was blocked (its block had not ended at `nowMs`). */
  unblock(key: string, nowMs: number): boolean {
    const blocked = this.untilOf(key, nowMs) > nowMs;
    this.until.delete(key);
    return blocked;
  }

  /** When the block of `key` ends (clock ms), `-Infinity` for none; an ended one is dropped. */
  untilOf(key: string, nowMs: number): number {
    if (this.until.size === 0) return Number.NEGATIVE_INFINITY;
    const until = this.until.get(key);
    if (until === undefined) return Number.NEGATIVE_INFINITY;
    if (until > nowMs) return until;
    this.until.delete(key);
    return Number.NEGATIVE_INFINITY;
  }

  /** Milliseconds from `nowMs` until the block of `key` ends; 0 when it is not blocked. */
  blockedMs(key: string, nowMs: number): number {
    const until = this.untilOf(key, nowMs);
    return until > nowMs ? until - nowMs : 0;
  }

  /**
   * Drops every ended block. O(1) when the earliest block has not ended, else O(log n) per
   * block dropped (or stale node passed).
   */
  sweep(nowMs: number): void {
    const ends = this.ends;
    while (ends.size > 0 && ends.firstMs <= nowMs) {
      const end = ends.firstMs;
      const key = ends.pop();
      // A stale node (the key was lifted, or its block extended): its entry is not this one.
      if (this.until.get(key) === end) this.until.delete(key);
    }
  }

  /** @internal Adds a node for `key` ending at `end`; rebuilds the heap once stale nodes are half of it. */
  private push(key: string, end: number): void {
    if (this.ends.size < 2 * this.until.size + 32) {
      this.ends.push(end, key);
      return;
    }
    // One node per entry (O(n log n), once per as many pushes); the entry as it is now.
    this.ends.clear();
    for (const [k, e] of [...this.until].sort((a, b) => a[1] - b[1])) this.ends.push(e, k);
  }
}
