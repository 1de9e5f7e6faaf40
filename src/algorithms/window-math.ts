import type { Decision } from "../core/limiter.js";
import { cleanMs, decisionMs, fits, retryNotEarly, wholeUnits } from "../core/numeric.js";
import { granuleEnd, windowEnd, windowIndex } from "./time.js";

/**
 * The decision arithmetic of the three window algorithms as free functions, shared by the in-memory
 * classes (`FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`) and their Redis twins, which
 * rebuild the decision from the state their Lua script returns. So the `Decision` of each algorithm
 * is built in one place, and both stores answer bit for bit alike (as `bucket-math.ts` does for the
 * buckets). Times are milliseconds on the limiter's clock; a state is read at `nowMs`, after the
 * caller has rolled or expired it to `nowMs`.
 * @module
 */

/**
 * `FixedWindow`'s units used at `nowMs`, from its state `count` taken in the window
 * ending at `endMs` (`-Infinity` when unused): `count` while `nowMs` is in that window,
 * else 0 (a new window).
 */
export function fixedWindowUsed(count: number, endMs: number, nowMs: number): number {
  return nowMs < endMs ? count : 0;
}

/**
 * The end of `FixedWindow`'s window holding `nowMs`, from the end `endMs` of the window
 * its count belongs to: `endMs` while `nowMs` is before it, else the end of the new
 * window ({@link windowEnd}). Where a taken cost is recorded.
 */
export function fixedWindowEndAt(endMs: number, nowMs: number, windowMs: number): number {
  return nowMs < endMs ? endMs : windowEnd(nowMs, windowMs);
}

/**
 * `FixedWindow`'s decision for `cost` with `used` units already taken in the window holding now,
 * which ends `endsInMs` ms from now (as `consume` answers: after the cost when it fits; the caller
 * takes it). A denied request retries when the window ends, or never for a cost above `limit`.
 */
export function fixedWindowDecision(
  cost: number,
  used: number,
  endsInMs: number,
  limit: number,
): Decision {
  const allowed = cost === 0 || fits(cost, limit - used);
  const after = allowed ? used + cost : used;
  return {
    allowed,
    limit,
    remaining: wholeUnits(limit - after, limit),
    retryAfterMs: allowed ? 0 : fits(cost, limit) ? decisionMs(endsInMs) : Number.POSITIVE_INFINITY,
    resetAfterMs: after > 0 ? decisionMs(endsInMs) : 0,
  };
}

/**
 * Entries a sliding log keeps at their exact time: `ceil(limit)`, at least 64, at most
 * 2^24. Beyond it new entries are stamped at the end of their granule of
 * `windowMs / logExactEntries(limit)` ms (see {@link logLeaveAt}).
 */
export function logExactEntries(limit: number): number {
  return Math.min(Math.max(64, Math.ceil(limit)), 2 ** 24);
}

/**
 * When an entry logged at `nowMs` leaves a sliding log that holds `size` entries: its stamp plus
 * `windowMs`, never earlier. The stamp is `nowMs` while `size < exactEntries`, else (fractional
 * costs only) `nowMs` rounded up to the end of its granule of `g = windowMs / exactEntries` ms:
 * at most `windowMs / g + 1` granules fit in a window, so the log holds at most
 * `2 * exactEntries + 1` entries, each counting at most `g` ms longer, never shorter.
 *
 * Where the float sum `stamp + windowMs` rounds down (7.2 + 2 is 9.2, below the exact
 * 9.2000000000000002; 2^53 - 1 + 2 is 2^53), the entry would leave before a full window
 * and a reading at the rounded sum could admit `limit` again: the sum is then moved up to
 * the next double (its rounding error comes from Knuth's TwoSum), so an entry counts at
 * least `windowMs`, and never a whole float step longer than the exact sum.
 */
export function logLeaveAt(
  nowMs: number,
  size: number,
  windowMs: number,
  exactEntries: number,
): number {
  const stamp = size < exactEntries ? nowMs : granuleEnd(nowMs, windowMs / exactEntries);
  const leave = stamp + windowMs;
  const windowPart = leave - stamp;
  const error = stamp - (leave - windowPart) + (windowMs - windowPart);
  return error > 0 ? leave + Math.abs(leave) * NEXT_UP : leave;
}

/**
 * `x + |x| * NEXT_UP` is the next double above a normal `x`: `2^-53 (1 + 2^-52)` times
 * `|x|` lies strictly between half a float step and one and a half (also for a power of
 * two, whose half step alone would tie back to `x`), so the sum rounds to the next double.
 */
export const NEXT_UP = 2 ** -53 + 2 ** -105;

/**
 * `SlidingWindowLog`'s decision for `cost` with `available` units free in a log of
 * `size` entries (as `consume` answers: after the cost when it fits; the caller logs it
 * at {@link logLeaveAt}, which this uses for `resetAfterMs`: the new entry is the newest).
 * - `newestLeaveAtMs`: when the newest entry leaves; `-Infinity` for an empty log.
 * - `retryLeaveAtMs`: when the oldest entry leaves whose departure lets `cost` fit; read
 *   only when the cost is denied and is at most `limit`.
 */
export function logDecision(
  cost: number,
  available: number,
  nowMs: number,
  limit: number,
  windowMs: number,
  exactEntries: number,
  size: number,
  newestLeaveAtMs: number,
  retryLeaveAtMs: number,
): Decision {
  const allowed = cost === 0 || fits(cost, available);
  return {
    allowed,
    limit,
    remaining: wholeUnits(allowed ? available - cost : available, limit),
    retryAfterMs: allowed
      ? 0
      : fits(cost, limit)
        ? msUntil(retryLeaveAtMs, nowMs)
        : Number.POSITIVE_INFINITY,
    resetAfterMs: decisionMs(
      allowed && cost > 0
        ? logLeaveAt(nowMs, size, windowMs, exactEntries) - nowMs
        : newestLeaveAtMs === Number.NEGATIVE_INFINITY
          ? 0
          : newestLeaveAtMs - nowMs,
    ),
  };
}

/**
 * Milliseconds from `nowMs` until `atMs`, as a decision states them ({@link decisionMs}),
 * such that `nowMs + result` is not before `atMs`: the float sum can round below the
 * instant (18.397 + 100 is 118.39699999999999, before an entry leaving at 118.397), and a
 * client retrying then would be refused again.
 */
function msUntil(atMs: number, nowMs: number): number {
  let ms = decisionMs(atMs - nowMs);
  while (nowMs + ms < atMs)
    ms += ms * Number.EPSILON > Number.MIN_VALUE ? ms * Number.EPSILON : Number.MIN_VALUE;
  return ms;
}

/**
 * A sliding counter's previous count once rolled from window `index` (with `curr` units)
 * to window `k >= index`: `curr` when `k` is the next window, else 0.
 */
export function counterRolledPrev(index: number, curr: number, k: number): number {
  return k === index + 1 ? curr : 0;
}

/**
 * A sliding counter's current count after a refund of `cost`: taken from the current window
 * first (`max(0, curr - cost)`); {@link counterRefundPrev} gives what is left to the previous.
 */
export function counterRefundCurr(curr: number, cost: number): number {
  return curr > cost ? curr - cost : 0;
}

/** A sliding counter's previous count after a refund of `cost`: what the current window could not give back. */
export function counterRefundPrev(prev: number, curr: number, cost: number): number {
  if (curr >= cost) return prev;
  const left = prev - (cost - curr);
  return left > 0 ? left : 0;
}

/**
 * A sliding counter's estimate at `nowMs` in the window ending at `endMs`:
 * `prev * (endMs - nowMs) / windowMs + curr`, the previous window's count weighted by
 * the part of it still inside the last `windowMs`.
 */
export function counterEstimate(
  prev: number,
  curr: number,
  endMs: number,
  nowMs: number,
  windowMs: number,
): number {
  if (prev === 0) return curr;
  return prev * ((endMs - nowMs) / windowMs) + curr;
}

/**
 * A sliding counter's estimate at `atMs` (>= now) with no further traffic, from the
 * state of window `index` (`prev` and `curr`): in window `index + 1`, `curr` is the
 * weighted previous count; later, 0.
 */
export function counterEstimateAt(
  atMs: number,
  index: number,
  prev: number,
  curr: number,
  windowMs: number,
): number {
  const k = windowIndex(atMs, windowMs);
  if (k === index) return prev * (((index + 1) * windowMs - atMs) / windowMs) + curr;
  if (k === index + 1) return (curr * ((k + 1) * windowMs - atMs)) / windowMs;
  return 0;
}

/**
 * `SlidingWindowCounter`'s decision for `cost` at `nowMs` from its state rolled to
 * now's window `index` (`prev`, `curr` before the cost), as `consume` answers: after the
 * cost when it fits (the caller adds it to `curr`).
 */
export function counterDecision(
  cost: number,
  index: number,
  prev: number,
  curr: number,
  nowMs: number,
  limit: number,
  windowMs: number,
): Decision {
  const endMs = (index + 1) * windowMs;
  const available = limit - counterEstimate(prev, curr, endMs, nowMs, windowMs);
  const endsInMs = endMs - nowMs;
  const allowed = cost === 0 || fits(cost, available);
  const taken = allowed ? cost : 0;
  return {
    allowed,
    limit,
    remaining: wholeUnits(available - taken, limit),
    retryAfterMs: allowed
      ? 0
      : fits(cost, limit)
        ? decisionMs(counterRetryMs(cost, index, prev, curr, nowMs, limit, windowMs))
        : Number.POSITIVE_INFINITY,
    resetAfterMs: decisionMs(counterResetMs(endsInMs, prev, curr + taken, windowMs)),
  };
}

/**
 * A sliding counter's `resetAfterMs`, until the estimate is 0: `curr` weighs until the
 * next window ends, `prev` until this one does (which ends in `endsInMs`).
 */
function counterResetMs(endsInMs: number, prev: number, curr: number, windowMs: number): number {
  if (curr > 0) return endsInMs + windowMs;
  return prev > 0 ? endsInMs : 0;
}

/**
 * Milliseconds from `nowMs` until `cost` (<= limit) fits with no further traffic. In
 * this window the estimate `prev * (W - e) / W + curr` falls until `e = W`; it fits
 * once `prev * (W - e) / W <= limit - cost - curr`. Failing that, in the next window
 * `curr` becomes the previous count: it fits once `curr * (W - e) / W <= limit - cost`.
 */
function counterRetryMs(
  cost: number,
  index: number,
  prev: number,
  curr: number,
  nowMs: number,
  limit: number,
  windowMs: number,
): number {
  const w = windowMs;
  const endsInMs = (index + 1) * w - nowMs;
  const room = limit - cost - curr;
  let ms: number;
  if (room > 0 && prev > room) {
    ms = endsInMs - (room * w) / prev;
  } else {
    const roomNext = limit - cost;
    ms = curr > roomNext ? endsInMs + w - (roomNext * w) / curr : endsInMs;
  }
  // Float noise (1000.0000000000001) is snapped when the snapped instant still fits.
  const snapped = cleanMs(ms);
  const retryMs =
    snapped !== ms &&
    snapped > 0 &&
    fits(cost, limit - counterEstimateAt(nowMs + snapped, index, prev, curr, w))
      ? snapped
      : ms > 0
        ? ms
        : Number.MIN_VALUE;
  // Never early: the request passes at the instant the client computes, nowMs + retryMs.
  return retryNotEarly(retryMs, nowMs, (at) =>
    fits(cost, limit - counterEstimateFrom(at, index, prev, curr, w)),
  );
}

/**
 * A sliding counter's estimate at `atMs` (>= now) with no further traffic, computed as
 * {@link counterDecision} computes it then, after rolling from window `index`.
 */
function counterEstimateFrom(
  atMs: number,
  index: number,
  prev: number,
  curr: number,
  windowMs: number,
): number {
  const k = windowIndex(atMs, windowMs);
  if (k === index) return counterEstimate(prev, curr, (index + 1) * windowMs, atMs, windowMs);
  if (k === index + 1) return counterEstimate(curr, 0, (k + 1) * windowMs, atMs, windowMs);
  return 0;
}

/**
 * The end of a `FixedWindow`'s current window after its length changes from `windowMs` to
 * `nextWindowMs` at `nowMs`, from its state `count` in the window ending at `endMs`:
 * `-Infinity` (fresh) when nothing is counted at `nowMs`; the same end for the same
 * length; else the later of the old end and the end of the new-length window holding
 * `nowMs` (aligned to multiples of `nextWindowMs`), so the count carries over and is never
 * forgotten sooner than it would have been. The count is kept as it is.
 */
export function fixedWindowRetunedEnd(
  count: number,
  endMs: number,
  nowMs: number,
  windowMs: number,
  nextWindowMs: number,
): number {
  if (fixedWindowUsed(count, endMs, nowMs) === 0) return Number.NEGATIVE_INFINITY;
  if (nextWindowMs === windowMs) return endMs;
  const end = windowEnd(nowMs, nextWindowMs);
  return end > endMs ? end : endMs;
}

/**
 * A sliding counter's state after its length changes from `windowMs` to `nextWindowMs` at
 * `nowMs`, from its state rolled to now's window `index` (`prev`, `curr`): the same state
 * for the same length; else the estimate at `nowMs` becomes the count of the new-length
 * window holding `nowMs` (`[0, estimate, index']`), which then weighs into the next window
 * as any count does. `[0, 0, -Infinity]` (fresh) when the estimate is 0.
 */
export function counterRetuned(
  prev: number,
  curr: number,
  index: number,
  nowMs: number,
  windowMs: number,
  nextWindowMs: number,
): [prev: number, curr: number, index: number] {
  const estimate = counterEstimate(prev, curr, (index + 1) * windowMs, nowMs, windowMs);
  if (!(estimate > 0)) return [0, 0, Number.NEGATIVE_INFINITY];
  if (nextWindowMs === windowMs) return [prev, curr, index];
  return [0, estimate, windowIndex(nowMs, nextWindowMs)];
}
