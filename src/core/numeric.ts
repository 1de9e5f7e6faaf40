/**
 * Floating-point tolerance shared by every algorithm: a cost fits when
 * `cost <= available + TOLERANCE * max(1, cost)`, so a request at the exact instant it fits is
 * allowed even when float arithmetic lands one ulp short. See docs/semantics.md#float-tolerance.
 */
export const TOLERANCE = 1e-9;

/** True when `cost` fits into `available` units, with the shared tolerance. */
export function fits(cost: number, available: number): boolean {
  return cost <= available + TOLERANCE * (cost > 1 ? cost : 1);
}

/** Whole units left: `max(0, floor(available + 1e-9))`, capped at `limit`. */
export function wholeUnits(available: number, limit: number): number {
  const whole = Math.floor(available + TOLERANCE);
  return whole <= 0 ? 0 : whole >= limit ? Math.floor(limit + TOLERANCE) : whole;
}

/**
 * A duration in ms computed by float arithmetic, snapped to the nearest integer when
 * within a relative 1e-9 of it (so 1000.0000000000002 reads 1000), and never negative.
 * Snapping moves the time by at most `1e-9 * ms`, which the cost tolerance absorbs,
 * so the request is still allowed at exactly `now + result`.
 */
export function cleanMs(ms: number): number {
  if (!(ms > 0)) return 0;
  const rounded = Math.round(ms);
  return Math.abs(ms - rounded) <= TOLERANCE * (ms > 1 ? ms : 1) && rounded > 0 ? rounded : ms;
}

/**
 * A duration as a decision states it (`retryAfterMs`, `resetAfterMs`), without the float noise that
 * falls short of a whole microsecond: a value below a whole microsecond by at most a relative 1e-9
 * is raised to it (`99.99999999999999` reads `100`, `51.59899999999999` reads `51.599`). Never
 * lowered, so a client waiting that long is never early: a value just above a microsecond is kept
 * (a sliding log's entry that leaves at the double after 9.2 says `2.000000000000001` from 7.2; at
 * 9.2 it still counts), as is any other (`1000 / 3` stays `333.3333333333333`; a window or a refill
 * below a microsecond keeps its figure). 0, negatives (as 0) and `Infinity` are as they are.
 * docs/semantics.md#milliseconds.
 */
export function decisionMs(ms: number): number {
  if (!(ms > 0)) return ms <= 0 ? 0 : ms;
  const us = ms * 1000;
  const nearest = Math.round(us);
  // Not just below a whole microsecond (or past the float range): as computed.
  if (!(nearest >= us && nearest - us <= TOLERANCE * us)) return ms;
  const snapped = nearest / 1000;
  return snapped >= ms ? snapped : ms;
}

/**
 * A denial's `retryAfterMs` (`ms`, from `nowMs`) raised by float steps until the request
 * passes at the instant a client computes, `nowMs + ms`: at a clock reading far from 0 (an
 * epoch clock reads about 1.7e12, whose float step is 2.4e-4 ms) that sum can round below
 * the exact time the units are back, and the request would be refused again. `passesAt`
 * decides the request at a time, as the limiter would then. 0 and `Infinity` are as they are.
 */
export function retryNotEarly(
  ms: number,
  nowMs: number,
  passesAt: (atMs: number) => boolean,
): number {
  if (!(ms > 0 && ms < Number.POSITIVE_INFINITY)) return ms;
  for (let i = 0; i < 64 && !passesAt(nowMs + ms); i++) {
    // One float step of the sum, so that it moves to the next double and no further.
    const at = Math.abs(nowMs + ms);
    const step = at > 0 ? 2 ** (Math.floor(Math.log2(at)) - 52) : 0;
    ms += step > Number.MIN_VALUE ? step : Number.MIN_VALUE;
  }
  return ms;
}
