import { badClock } from "../errors.js";
import type { Clock } from "../limiter.js";

/**
 * Time helpers shared by the window algorithms: the clock high-water reading and the
 * window index.
 * @module
 */

/**
 * Reads `clock` and returns the latest time seen: `max(seenMs, reading)`, so a clock
 * that goes backwards stands still at its latest reading (as `TokenBucket` does).
 * @throws {TypeError} If the reading is not a number.
 * @throws {RangeError} If the reading is NaN or infinite.
 */
export function readClock(where: string, clock: Clock, seenMs: number): number {
  const t = clock();
  if (typeof t !== "number" || t - t !== 0) throw badClock(where, t);
  return t > seenMs ? t : seenMs;
}

/**
 * The index `k` of the window holding `nowMs`: `floor(nowMs / windowMs)`, corrected
 * so that `k * windowMs <= nowMs < (k + 1) * windowMs` holds for the products as
 * computed, even where the division rounds across a boundary. Windows are half-open:
 * the boundary instant belongs to the new window.
 */
export function windowIndex(nowMs: number, windowMs: number): number {
  const k = Math.floor(nowMs / windowMs);
  if (k * windowMs > nowMs) return k - 1;
  if ((k + 1) * windowMs <= nowMs) return k + 1;
  return k;
}

/** The end of the window holding `nowMs`: `(windowIndex(nowMs, windowMs) + 1) * windowMs`. */
export function windowEnd(nowMs: number, windowMs: number): number {
  return (windowIndex(nowMs, windowMs) + 1) * windowMs;
}

/**
 * The smallest multiple `k * granuleMs` (as computed) that is `>= nowMs`: `nowMs` rounded
 * up to the end of its granule, corrected where `ceil(nowMs / granuleMs)` rounds down
 * across a boundary (`ceil(27.3 / 0.7) * 0.7` is 27.299999999999997).
 */
export function granuleEnd(nowMs: number, granuleMs: number): number {
  const k = Math.ceil(nowMs / granuleMs);
  return k * granuleMs < nowMs ? (k + 1) * granuleMs : k * granuleMs;
}
