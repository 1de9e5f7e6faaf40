/**
 * The reference row of the keyed benchmarks: the token bucket anyone would write in ten
 * lines, a `Map<string, { tokens, last }>` with one object per key and `performance.now()`
 * as its clock (the same clock tollgate reads by default). Every keyed ratio in the report
 * is measured against it in the same run.
 * @module
 */

/** The per-key state of {@link NaiveTokenBuckets}. */
interface NaiveState {
  tokens: number;
  last: number;
}

/** A naive keyed token bucket: no validation, no eviction, no clock high-water mark. */
export class NaiveTokenBuckets {
  readonly map = new Map<string, NaiveState>();

  constructor(
    readonly capacity: number,
    readonly refillPerSecond: number,
  ) {}

  /** Takes `cost` tokens from `key`'s bucket when it has them. */
  allow(key: string, cost = 1): boolean {
    const now = performance.now();
    let state = this.map.get(key);
    if (state === undefined) {
      state = { tokens: this.capacity, last: now };
      this.map.set(key, state);
    }
    const tokens = Math.min(
      this.capacity,
      state.tokens + ((now - state.last) * this.refillPerSecond) / 1000,
    );
    state.last = now;
    if (tokens < cost) {
      state.tokens = tokens;
      return false;
    }
    state.tokens = tokens - cost;
    return true;
  }
}
