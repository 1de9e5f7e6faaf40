/**
 * Floating-point tolerance shared by every algorithm: a cost fits when
 * `cost <= available + TOLERANCE * max(1, cost)`, so a request at the exact instant
 * it fits is allowed even when float arithmetic lands one ulp short.
 * See docs/semantics.md#float-tolerance.
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
