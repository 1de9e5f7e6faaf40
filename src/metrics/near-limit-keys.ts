/**
 * The keys seen near their limit most often, at most N of them (the Space-Saving
 * algorithm of Metwally, Agrawal and El Abbadi, 2005): a bounded top-N, so a client that
 * sends a new key per request cannot grow the table or the metrics' series. @module
 */

/** One kept key and its near-limit hits (an overestimate by at most `error`). */
export interface NearLimitKey {
  readonly key: string;
  /** Near-limit decisions counted for it (Space-Saving: at most `error` too many). */
  readonly hits: number;
  /** How many of `hits` may belong to keys it replaced. */
  readonly error: number;
}

/** At most `capacity` keys with their near-limit hits. @internal */
export class NearLimitKeys {
  /** @internal */
  private readonly entries: { key: string; hits: number; error: number }[] = [];
  /** @internal */
  private readonly index = new Map<string, { key: string; hits: number; error: number }>();

  constructor(readonly capacity: number) {}

  /** Counts one near-limit decision of `key`: O(1) for a kept key, O(capacity) otherwise. */
  hit(key: string): void {
    const kept = this.index.get(key);
    if (kept !== undefined) {
      kept.hits++;
      return;
    }
    if (this.entries.length < this.capacity) {
      const entry = { key, hits: 1, error: 0 };
      this.entries.push(entry);
      this.index.set(key, entry);
      return;
    }
    let min = this.entries[0];
    if (min === undefined) return; // capacity 0
    for (const e of this.entries) if (e.hits < min.hits) min = e;
    this.index.delete(min.key);
    min.error = min.hits;
    min.hits++;
    min.key = key;
    this.index.set(key, min);
  }

  /** The kept keys, most hits first (ties by key). */
  top(): NearLimitKey[] {
    return this.entries
      .map(({ key, hits, error }) => ({ key, hits, error }))
      .sort((a, b) => b.hits - a.hits || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }
}
