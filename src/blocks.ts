/**
 * The one table of blocked keys (a ban after abuse) that every path of a limiter consults:
 * docs/semantics.md#blocks.
 * @module
 */

/** Accounted bytes of one entry beyond its key: its `Map` entry and its end time. */
export const BLOCK_ENTRY_BYTES = 64;

/** Accounted bytes of `key` in an entry: 2 per UTF-16 code unit and a 24-byte header. */
function keyBytesOf(key: string): number {
  return 2 * key.length + 24;
}

/** Counters of a {@link BlockTable} since it was made. */
export interface BlockTableStats {
  /** Keys blocked now (entries kept, ended ones not yet dropped included). */
  readonly blocked: number;
  /** Blocks set (a block that extends one in place counts too). */
  readonly set: number;
  /** Blocks lifted by `unblock` or `reset`. */
  readonly lifted: number;
  /** Blocks dropped once their time had come. */
  readonly expired: number;
  /** Blocks of new keys refused because the table was full. */
  readonly refused: number;
  /** Accounted bytes of the entries (keys and times). */
  readonly bytes: number;
}

/**
 * Blocked keys and when each block ends, on the owner's clock (ms): bounded (at most
 * `maxKeys` keys; a block of one more is refused and counted, never one in place dropped),
 * counted ({@link stats}), expiring (an ended block is dropped when next looked at, or by
 * {@link sweep}). A block is lifted only by {@link unblock} (which `reset` calls) or its end;
 * a later block of the same key extends it, an earlier one never shortens it.
 *
 * Shared by the paths of one limiter: a Redis limiter records a block here at once, so its
 * `'local'` fallback, its other failure policies and its healthy path all deny the key,
 * whatever the store remembers. Internal: not exported from the package.
 * @internal
 */
export class BlockTable {
  /** @internal */
  private readonly until = new Map<string, number>();
  /** @internal */
  private counts = { set: 0, lifted: 0, expired: 0, refused: 0, bytes: 0 };

  /** @param maxKeys Most keys blocked at once. */
  constructor(readonly maxKeys: number) {}

  /** Keys kept (ended blocks not yet dropped included). */
  get size(): number {
    return this.until.size;
  }

  /** Counters since the table was made. */
  get stats(): BlockTableStats {
    return { blocked: this.until.size, ...this.counts };
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
        this.counts.refused++;
        return false;
      }
      this.counts.bytes += keyBytesOf(key) + BLOCK_ENTRY_BYTES;
    }
    if (untilMs > had) this.until.set(key, untilMs);
    this.counts.set++;
    return true;
  }

  /** Lifts the block of `key`; true when it was blocked (its block had not ended at `nowMs`). */
  unblock(key: string, nowMs: number): boolean {
    const blocked = this.untilOf(key, nowMs) > nowMs;
    if (this.until.delete(key)) {
      this.counts.bytes -= keyBytesOf(key) + BLOCK_ENTRY_BYTES;
      if (blocked) this.counts.lifted++;
    }
    return blocked;
  }

  /** When the block of `key` ends (clock ms), `-Infinity` for none; an ended one is dropped. */
  untilOf(key: string, nowMs: number): number {
    if (this.until.size === 0) return Number.NEGATIVE_INFINITY;
    const until = this.until.get(key);
    if (until === undefined) return Number.NEGATIVE_INFINITY;
    if (until > nowMs) return until;
    this.drop(key);
    return Number.NEGATIVE_INFINITY;
  }

  /** Milliseconds from `nowMs` until the block of `key` ends; 0 when it is not blocked. */
  blockedMs(key: string, nowMs: number): number {
    const until = this.untilOf(key, nowMs);
    return until > nowMs ? until - nowMs : 0;
  }

  /** Drops every ended block; returns how many. */
  sweep(nowMs: number): number {
    let dropped = 0;
    for (const [key, until] of this.until) {
      if (until <= nowMs) {
        this.drop(key);
        dropped++;
      }
    }
    return dropped;
  }

  /** Lifts every block (`clear()` of the owner). */
  clear(): void {
    this.counts.lifted += this.until.size;
    this.until.clear();
    this.counts.bytes = 0;
  }

  /** @internal */
  private drop(key: string): void {
    this.until.delete(key);
    this.counts.bytes -= keyBytesOf(key) + BLOCK_ENTRY_BYTES;
    this.counts.expired++;
  }
}
