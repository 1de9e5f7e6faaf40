/**
 * Naive reference models of the five algorithms with refunds, from docs/semantics.md#refunds
 * in the plainest form, for property tests: `decide(t, cost, take)` as the models of
 * models.ts, and `refund(t, cost)`. Costs, times and rates are meant to be integers (a
 * bucket's rate in units per millisecond), so comparisons are exact.
 * @module
 */

export interface RefundModel {
  decide(t: number, cost: number, take: boolean): { allowed: boolean; remaining: number };
  refund(t: number, cost: number): void;
}

function fitsIn(cost: number, available: number): boolean {
  return cost <= available + 1e-9 * Math.max(1, cost);
}

function whole(available: number, limit: number): number {
  return Math.min(Math.floor(limit), Math.max(0, Math.floor(available + 1e-9)));
}

/** A bucket (tokens, or a leaky bucket's free room) refilled at `perMs` units per ms. */
export function bucketRefundModel(capacity: number, perMs: number): RefundModel {
  let tokens = capacity;
  let at = 0;
  const now = (t: number) => {
    tokens = Math.min(capacity, tokens + (t - at) * perMs);
    at = t;
  };
  return {
    decide(t, cost, take) {
      now(t);
      const allowed = cost === 0 || fitsIn(cost, tokens);
      if (allowed && take) tokens -= cost;
      return { allowed, remaining: whole(allowed && !take ? tokens - cost : tokens, capacity) };
    },
    refund(t, cost) {
      now(t);
      tokens = Math.min(capacity, tokens + cost);
    },
  };
}

/** FixedWindow: a count per window index, a refund takes from the current one, never below 0. */
export function fixedWindowRefundModel(limit: number, windowMs: number): RefundModel {
  const counts = new Map<number, number>();
  return {
    decide(t, cost, take) {
      const k = Math.floor(t / windowMs);
      const used = counts.get(k) ?? 0;
      const allowed = cost === 0 || fitsIn(cost, limit - used);
      if (allowed && take) counts.set(k, used + cost);
      return { allowed, remaining: whole(limit - used - (allowed ? cost : 0), limit) };
    },
    refund(t, cost) {
      const k = Math.floor(t / windowMs);
      counts.set(k, Math.max(0, (counts.get(k) ?? 0) - cost));
    },
  };
}

/** SlidingWindowLog: every (time, cost); a refund cuts the newest live entries first. */
export function slidingLogRefundModel(limit: number, windowMs: number): RefundModel {
  let entries: { time: number; cost: number }[] = [];
  const live = (t: number) => {
    entries = entries.filter((e) => e.time > t - windowMs);
    return entries.reduce((s, e) => s + e.cost, 0);
  };
  return {
    decide(t, cost, take) {
      const sum = live(t);
      const allowed = cost === 0 || fitsIn(cost, limit - sum);
      if (allowed && take && cost > 0) entries.push({ time: t, cost });
      return { allowed, remaining: whole(limit - sum - (allowed ? cost : 0), limit) };
    },
    refund(t, cost) {
      live(t);
      let left = cost;
      while (left > 0 && entries.length > 0) {
        const newest = entries[entries.length - 1]!;
        if (newest.cost <= left) {
          entries.pop();
          left -= newest.cost;
        } else {
          newest.cost -= left;
          left = 0;
        }
      }
    },
  };
}

/** SlidingWindowCounter: counts per window; a refund takes from this window, then the previous. */
export function slidingCounterRefundModel(limit: number, windowMs: number): RefundModel {
  const counts = new Map<number, number>();
  const count = (k: number) => counts.get(k) ?? 0;
  return {
    decide(t, cost, take) {
      const k = Math.floor(t / windowMs);
      const e = t - k * windowMs;
      const estimate = (count(k - 1) * (windowMs - e)) / windowMs + count(k);
      const allowed = cost === 0 || fitsIn(cost, limit - estimate);
      if (allowed && take) counts.set(k, count(k) + cost);
      return { allowed, remaining: whole(limit - estimate - (allowed ? cost : 0), limit) };
    },
    refund(t, cost) {
      const k = Math.floor(t / windowMs);
      const fromCurr = Math.min(count(k), cost);
      counts.set(k, count(k) - fromCurr);
      counts.set(k - 1, Math.max(0, count(k - 1) - (cost - fromCurr)));
    },
  };
}
