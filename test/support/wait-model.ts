/**
 * Naive reference models of the buckets' reservations (Go's `x/time/rate` debt, and the
 * leaky bucket as a queue with a constant outflow): one number and an anchor each, no
 * ledger. Use integer times and rates of 1000, 500 or 250 per second (1, 1/2, 1/4 unit
 * per ms) so that every value is exact in binary floating point and `===` is stable.
 */

/** A reservation as the models answer it. */
export interface ModelReservation {
  ok: boolean;
  delayMs: number;
}

/** Token bucket with debt: tokens may go below 0; a request acts once its debt is repaid. */
export function tokenBucketModel(capacity: number, ratePerSecond: number) {
  let tokens = capacity;
  let anchorMs = Number.NEGATIVE_INFINITY;
  return (atMs: number, cost: number): ModelReservation => {
    if (anchorMs !== Number.NEGATIVE_INFINITY) {
      tokens = Math.min(capacity, tokens + ((atMs - anchorMs) * ratePerSecond) / 1000);
    }
    anchorMs = atMs;
    if (cost > capacity) return { ok: false, delayMs: Number.POSITIVE_INFINITY };
    const delayMs = tokens >= cost ? 0 : ((cost - tokens) * 1000) / ratePerSecond;
    tokens -= cost;
    return { ok: true, delayMs };
  };
}

/** Leaky bucket as a shaper: a request waits for the level ahead of it; full means refused. */
export function leakyBucketModel(capacity: number, ratePerSecond: number) {
  let level = 0;
  let anchorMs = Number.NEGATIVE_INFINITY;
  return (atMs: number, cost: number): ModelReservation => {
    if (anchorMs !== Number.NEGATIVE_INFINITY) {
      level = Math.max(0, level - ((atMs - anchorMs) * ratePerSecond) / 1000);
    }
    anchorMs = atMs;
    if (level + cost > capacity) return { ok: false, delayMs: Number.POSITIVE_INFINITY };
    const delayMs = (level * 1000) / ratePerSecond;
    level += cost;
    return { ok: true, delayMs };
  };
}
