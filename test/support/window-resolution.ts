import { describe, expect, test } from "vitest";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import { manualClock } from "./manual-clock.js";

/**
 * The float step (ulp) of `x` computed from its bits, independently of
 * `src/algorithms/time.ts`: the gap from `|x|` to the next double up.
 */
export function bitStep(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  view.setBigUint64(0, view.getBigUint64(0) + 1n);
  return view.getFloat64(0) - Math.abs(x);
}

/** The message a window limiter throws for a reading where `windowMs` is below the float step. */
export function resolutionMessage(where: string, windowMs: number, nowMs: number): string {
  return (
    `${where}: windowMs ${windowMs} is below the clock's resolution at ${nowMs} ms ` +
    `(a float step of ${bitStep(nowMs)} ms); use a larger windowMs or a clock with a smaller origin`
  );
}

/**
 * Regression tests for window limiters that broke when windowMs was smaller than the
 * clock's float step: every request was admitted (windows ended where they
 * started), or every request was denied with Infinity forever. Each case must now throw a
 * RangeError naming the class, windowMs and the reading, from every method reading the clock.
 */
export function describeClockResolution(
  where: string,
  make: (options: { limit: number; windowMs: number; clock: Clock }) => Limiter,
): void {
  describe(`${where} clock resolution (windowMs below the clock's float step)`, () => {
    test.each([
      { name: "1 ms at 1e16 ms admitted every request", windowMs: 1, nowMs: 1e16 },
      { name: "0.4 ms at 9e15 ms admitted every request", windowMs: 0.4, nowMs: 9e15 },
      { name: "0.01 ms at 1e15 ms admitted every request", windowMs: 0.01, nowMs: 1e15 },
      { name: "5e-324 ms at 1e6 ms locked out forever", windowMs: 5e-324, nowMs: 1e6 },
      { name: "1e-300 ms at 1e300 ms locked out forever", windowMs: 1e-300, nowMs: 1e300 },
      { name: "1 ms at exactly 2^53 ms (a step of 2 ms)", windowMs: 1, nowMs: 2 ** 53 },
      { name: "1 ms at -2^53 ms", windowMs: 1, nowMs: -(2 ** 53) },
    ])("$name: throws RangeError from every method", ({ windowMs, nowMs }) => {
      const limiter = make({ limit: 2, windowMs, clock: () => nowMs });
      const message = resolutionMessage(where, windowMs, nowMs);
      for (const call of [
        () => limiter.consume(),
        () => limiter.allow(),
        () => limiter.peek(),
        () => limiter.isIdle(),
      ]) {
        expect(call).toThrow(RangeError);
        expect(call).toThrow(message);
      }
    });

    test("the message for windowMs 1 at 1e16 ms reads as documented", () => {
      const limiter = make({ limit: 2, windowMs: 1, clock: () => 1e16 });
      expect(() => limiter.consume()).toThrow(
        `${where}: windowMs 1 is below the clock's resolution at 10000000000000000 ms ` +
          "(a float step of 2 ms); use a larger windowMs or a clock with a smaller origin",
      );
    });

    test("the last reading where the step is at most windowMs still limits", () => {
      // 2^53 - 1 has a step of 1: a 1 ms window is still representable there.
      const t = 2 ** 53 - 1;
      const limiter = make({ limit: 2, windowMs: 1, clock: () => t });
      expect(limiter.consume().allowed).toBe(true);
      expect(limiter.consume().allowed).toBe(true);
      const denied = limiter.consume();
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      expect(denied.retryAfterMs).toBeLessThan(Number.POSITIVE_INFINITY);
      expect(denied.resetAfterMs).toBeGreaterThan(0);
      expect(denied.resetAfterMs).toBeLessThan(Number.POSITIVE_INFINITY);
    });

    test("a rejected reading is not kept: once the clock is back in range it decides again", () => {
      const clock = manualClock(1000);
      const limiter = make({ limit: 1, windowMs: 1, clock });
      expect(limiter.consume().allowed).toBe(true);
      clock.set(1e16);
      expect(() => limiter.consume()).toThrow(RangeError);
      clock.set(1000.5);
      // Still the window (or log entry) of 1000: the bad reading moved nothing.
      expect(limiter.consume().allowed).toBe(false);
      clock.set(1002);
      expect(limiter.consume().allowed).toBe(true);
    });
  });
}
