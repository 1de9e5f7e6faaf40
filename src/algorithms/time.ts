import { badClock, checkNumber, mustBe } from "../core/errors.js";
import type { Clock } from "../core/limiter.js";

/**
 * Time helpers shared by the window algorithms: their size options, the clock high-water
 * reading and the window index.
 * @module
 */

/**
 * Checks the size options every window algorithm has, in their documented order (the in-memory
 * classes and their Redis twins alike): `limit` then `windowMs`, each a finite number > 0.
 * @throws {TypeError} If either is not a number.
 * @throws {RangeError} If either is NaN, infinite or not above 0.
 */
export function checkWindowSize(
  where: string,
  options: { readonly limit?: unknown; readonly windowMs?: unknown },
): { limit: number; windowMs: number } {
  const limit = checkNumber(where, "limit", options.limit, 0, false);
  return { limit, windowMs: checkNumber(where, "windowMs", options.windowMs, 0, false) };
}

/**
 * Reads `clock` and returns the latest time seen: `max(seenMs, reading)`, so a clock
 * that goes backwards stands still at its latest reading. See docs/semantics.md#clocks.
 * @throws {TypeError} If the reading is not a number.
 * @throws {RangeError} If the reading is NaN or infinite.
 */
export function readClock(where: string, clock: Clock, seenMs: number): number {
  const t = clock();
  if (typeof t !== "number" || t - t !== 0) throw badClock(where, t);
  return t > seenMs ? t : seenMs;
}

/**
 * Checks an explicit time (`allowAt(timeMs)` and the other `…At` forms): a finite number
 * of milliseconds on the limiter's clock. Returns it as given; the caller takes the later
 * of it and the latest time seen (docs/semantics.md#explicit-time).
 * @throws {TypeError} If it is not a number. {RangeError} If it is NaN or infinite.
 */
export function checkTimeMs(where: string, timeMs: unknown): number {
  if (typeof timeMs === "number" && timeMs - timeMs === 0) return timeMs;
  throw mustBe(where, "timeMs", "a finite number of milliseconds", timeMs);
}

/**
 * `floor(log2(x))` for a finite `x > 0`, exactly (`Math.log2` can round across a power
 * of two): the exponent `e` with `2^e <= x < 2^(e + 1)`, from -1074 to 1023.
 */
export function exponentOf(x: number): number {
  let e = Math.floor(Math.log2(x));
  if (2 ** e > x) e--;
  else if (2 ** (e + 1) <= x) e++;
  return e;
}

/**
 * The float step (ulp) of a double at `x`: the gap to the next double away from 0,
 * `2^(exponentOf(|x|) - 52)`, and `2^-1074` for 0 and the subnormals.
 */
export function floatStep(x: number): number {
  const a = Math.abs(x);
  return a < 2 ** -1022 ? 2 ** -1074 : 2 ** (exponentOf(a) - 52);
}

/**
 * The clock readings a window of `windowMs` can be told apart at: a window limiter
 * needs `windowMs` to be at least the clock's float step, and the step at `t` is at most
 * `windowMs` exactly while `|t| < 2^(53 + exponentOf(windowMs))` (returned; Infinity when
 * that overflows, as for every window of 2^971 ms and more). Below it the window index
 * `t / windowMs` is an exact integer under 2^53, and `t + windowMs > t`. Computed once
 * per limiter, so each reading costs one comparison ({@link checkWindowClock}).
 */
export function windowClockBoundMs(windowMs: number): number {
  return 2 ** (53 + exponentOf(windowMs));
}

/**
 * Checks that a window of `windowMs` is representable at the clock reading `nowMs`
 * (`|nowMs| < boundMs`, from {@link windowClockBoundMs}) and returns `nowMs`.
 * @throws {RangeError} `FixedWindow: windowMs 1 is below the clock's resolution at
 *   1e16 ms (a float step of 2 ms); use a larger windowMs or a clock with a smaller
 *   origin`, because beyond it windows would end where they start (every request
 *   admitted) or never end (every request denied forever).
 */
export function checkWindowClock(
  where: string,
  nowMs: number,
  windowMs: number,
  boundMs: number,
): number {
  if (nowMs < boundMs && nowMs > -boundMs) return nowMs;
  throw windowClockError(where, nowMs, windowMs);
}

/** The error of {@link checkWindowClock}, apart: every decision inlines the check, not this. */
export function windowClockError(where: string, nowMs: number, windowMs: number): RangeError {
  return new RangeError(
    `${where}: windowMs ${windowMs} is below the clock's resolution at ${nowMs} ms ` +
      `(a float step of ${floatStep(nowMs)} ms); use a larger windowMs or a clock with a smaller origin`,
  );
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
 * across a boundary (`ceil(27.3 / 0.7) * 0.7` is 27.299999999999997). Never below
 * `nowMs`, even where `granuleMs` is below the float step at `nowMs`.
 */
export function granuleEnd(nowMs: number, granuleMs: number): number {
  const k = Math.ceil(nowMs / granuleMs);
  const end = k * granuleMs < nowMs ? (k + 1) * granuleMs : k * granuleMs;
  // A granule below the float step at nowMs (a large limit at a large clock) can round
  // the end below nowMs: an entry stamped there would count for less than windowMs.
  return end < nowMs ? nowMs : end;
}

/**
 * The window size after `reconfigure(o)`: each of `limit` and `windowMs` checked as the constructor
 * checks it when given, else the current one; with the new window's clock bound
 * ({@link windowClockBoundMs}), which `nowMs` (the reading the change applies at) must be within.
 * @throws {TypeError} If a given option is not a number.
 * @throws {RangeError} If one is out of range, or `nowMs` is past the new window's bound.
 */
export function checkWindowResize(
  where: string,
  o: { readonly limit?: unknown; readonly windowMs?: unknown },
  current: { readonly limit: number; readonly windowMs: number },
  nowMs: number,
): { limit: number; windowMs: number; clockBoundMs: number } {
  const { limit, windowMs } = checkWindowSize(where, {
    limit: o.limit === undefined ? current.limit : o.limit,
    windowMs: o.windowMs === undefined ? current.windowMs : o.windowMs,
  });
  const clockBoundMs = windowClockBoundMs(windowMs);
  checkWindowClock(where, nowMs, windowMs, clockBoundMs);
  return { limit, windowMs, clockBoundMs };
}
