import { mustBe } from "../core/errors.js";
import type { Clock } from "../core/limiter.js";

/**
 * The `tollgate/testing` entry point: a clock for tests, so that a test of code that uses
 * a limiter decides at the times it says, not at the machine's speed. Loaded only when
 * imported; nothing of it reaches `tollgate`. @module
 */

/**
 * A {@link Clock} that moves only when told to: the time, in milliseconds, is what
 * `set` and `advance` made it. Pass it as a limiter's `clock`.
 */
export interface ManualClock extends Clock {
  /** The time now, in milliseconds: the same as calling the clock. */
  readonly nowMs: number;
  /**
   * Sets the time to `ms`. It may go back, to test how a limiter copes with a clock that
   * does (it treats one as standing still: docs/semantics.md#clocks-going-backwards).
   * @throws {TypeError} If `ms` is not a number; {RangeError} if it is not finite.
   */
  set(ms: number): void;
  /**
   * Moves the time by `ms` milliseconds (back, for a negative `ms`).
   * @throws {TypeError} If `ms` is not a number; {RangeError} if it is not finite.
   */
  advance(ms: number): void;
}

/**
 * A {@link ManualClock} starting at `startMs` milliseconds, as governor's `FakeRelativeClock`:
 * limiters read it, tests move it. Timers are not faked: a `wait` that has to wait ends on
 * a timer (with fake timers, move both; docs/waiting.md#testing-waits).
 * @example
 * import { TokenBucket } from "tollgate"
 * import { manualClock } from "tollgate/testing"
 * const clock = manualClock()
 * const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1, clock })
 * bucket.allow() //=> true
 * bucket.allow() //=> false
 * clock.advance(1000)
 * bucket.allow() //=> true
 * @throws {TypeError} If `startMs` is not a number; {RangeError} if it is not finite.
 */
export function manualClock(startMs = 0): ManualClock {
  let now = finite("manualClock", "startMs", startMs);
  const clock = (() => now) as Clock as ManualClock & { nowMs: number };
  Object.defineProperty(clock, "nowMs", { get: () => now, enumerable: true });
  clock.set = (ms: number) => {
    now = finite("ManualClock.set", "ms", ms);
  };
  clock.advance = (ms: number) => {
    const moved = now + finite("ManualClock.advance", "ms", ms);
    now = finite("ManualClock.advance", "the time", moved);
  };
  return clock;
}

/** Checks a time in milliseconds: a finite number. */
function finite(where: string, name: string, value: unknown): number {
  if (typeof value === "number" && Number.isFinite(value)) return value;
  throw mustBe(where, name, "a finite number of milliseconds", value);
}
