/**
 * Naive reference models of the window algorithms, written from docs/semantics.md in the
 * plainest form (arrays, maps, loops), for property tests. Each model is a function
 * `(t, cost, take) => ModelDecision`: the decision at clock reading `t` for `cost`,
 * taking the cost when `take` and allowed. Costs and times are meant to be integers in
 * the properties, so comparisons are exact. `limitOf` may be a function, read on every
 * call: the limit changed live (`reconfigure`) with the state kept.
 * @module
 */

export interface ModelDecision {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

export type Model = (t: number, cost: number, take: boolean) => ModelDecision;

/** The fit rule (docs/semantics.md#float-tolerance): `cost <= available + 1e-9 * max(1, cost)`. */
function fitsIn(cost: number, available: number): boolean {
  return cost <= available + 1e-9 * Math.max(1, cost);
}

/** `remaining` (docs/semantics.md#remaining): `max(0, floor(available + 1e-9))`, <= limit. */
function whole(available: number, limit: number): number {
  return Math.min(Math.floor(limit), Math.max(0, Math.floor(available + 1e-9)));
}

/** A clock that goes backwards stands still at the latest reading. */
function highWater(): (t: number) => number {
  let seen = Number.NEGATIVE_INFINITY;
  return (t) => {
    seen = Math.max(seen, t);
    return seen;
  };
}

/** FixedWindow: a count per window index `floor(t / windowMs)`. */
export function fixedWindowModel(limitOf: number | (() => number), windowMs: number): Model {
  const counts = new Map<number, number>();
  const latest = highWater();
  return (reading, cost, take) => {
    const limit = typeof limitOf === "function" ? limitOf() : limitOf;
    const t = latest(reading);
    const k = Math.floor(t / windowMs);
    const used = counts.get(k) ?? 0;
    const allowed = cost === 0 || fitsIn(cost, limit - used);
    if (allowed && take && cost > 0) counts.set(k, used + cost);
    const after = allowed ? used + cost : used;
    const endsInMs = (k + 1) * windowMs - t;
    return {
      allowed,
      remaining: whole(limit - after, limit),
      retryAfterMs: allowed ? 0 : cost > limit ? Number.POSITIVE_INFINITY : endsInMs,
      resetAfterMs: after > 0 ? endsInMs : 0,
    };
  };
}

/** SlidingWindowLog: a plain array of every allowed (time, cost), filtered on each call. */
export function slidingLogModel(limitOf: number | (() => number), windowMs: number): Model {
  const entries: { time: number; cost: number }[] = [];
  const latest = highWater();
  return (reading, cost, take) => {
    const limit = typeof limitOf === "function" ? limitOf() : limitOf;
    const t = latest(reading);
    const live = entries.filter((e) => e.time > t - windowMs);
    const sum = live.reduce((s, e) => s + e.cost, 0);
    const allowed = cost === 0 || fitsIn(cost, limit - sum);
    if (allowed && take && cost > 0) entries.push({ time: t, cost });
    let retryAfterMs = 0;
    if (!allowed && cost > limit) retryAfterMs = Number.POSITIVE_INFINITY;
    else if (!allowed) {
      let left = sum;
      for (const e of live) {
        left -= e.cost;
        if (fitsIn(cost, limit - left)) {
          retryAfterMs = e.time + windowMs - t;
          break;
        }
      }
    }
    const newest = allowed && cost > 0 ? t : live.length > 0 ? live[live.length - 1]!.time : null;
    return {
      allowed,
      remaining: whole(limit - (allowed ? sum + cost : sum), limit),
      retryAfterMs,
      resetAfterMs: newest === null ? 0 : newest + windowMs - t,
    };
  };
}

/**
 * SlidingWindowCounter: a count per window index and the formula of
 * docs/semantics.md#the-algorithms, `prev * (W - e) / W + curr`. `retryAfterMs` is found
 * window by window: in window `j` (this one, then the next, with no further traffic) the
 * estimate falls linearly from `prev + curr` to `curr`; the first window where
 * `curr + cost` fits gives the earliest `e` at which `prev * (W - e) / W` has fallen enough.
 */
export function slidingCounterModel(limitOf: number | (() => number), windowMs: number): Model {
  const counts = new Map<number, number>();
  const latest = highWater();
  const count = (k: number) => counts.get(k) ?? 0;
  return (reading, cost, take) => {
    const limit = typeof limitOf === "function" ? limitOf() : limitOf;
    const t = latest(reading);
    const W = windowMs;
    const k = Math.floor(t / W);
    const e = t - k * W;
    const estimate = (count(k - 1) * (W - e)) / W + count(k);
    const allowed = cost === 0 || fitsIn(cost, limit - estimate);
    if (allowed && take && cost > 0) counts.set(k, count(k) + cost);
    let retryAfterMs = 0;
    if (!allowed && cost > limit) retryAfterMs = Number.POSITIVE_INFINITY;
    else if (!allowed) {
      const windows = [
        { start: k * W, prev: count(k - 1), curr: count(k) },
        { start: (k + 1) * W, prev: count(k), curr: 0 },
        { start: (k + 2) * W, prev: 0, curr: 0 },
      ];
      for (const w of windows) {
        if (w.curr + cost > limit) continue;
        const eFit = w.prev === 0 ? 0 : Math.max(0, W - ((limit - cost - w.curr) * W) / w.prev);
        if (eFit >= W) continue;
        retryAfterMs = Math.max(t, w.start + eFit) - t;
        break;
      }
    }
    const after = allowed ? estimate + cost : estimate;
    const currAfter = count(k) + (allowed && !take ? cost : 0);
    const resetAfterMs = currAfter > 0 ? (k + 2) * W - t : count(k - 1) > 0 ? (k + 1) * W - t : 0;
    return { allowed, remaining: whole(limit - after, limit), retryAfterMs, resetAfterMs };
  };
}
