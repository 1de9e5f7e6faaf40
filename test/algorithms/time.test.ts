import { describe, expect, test } from "vitest";
import {
  checkWindowClock,
  exponentOf,
  floatStep,
  granuleEnd,
  readClock,
  windowClockBoundMs,
  windowEnd,
  windowIndex,
} from "../../src/algorithms/time.js";
import { bitStep, resolutionMessage } from "../support/window-resolution.js";

describe("windowIndex", () => {
  test.each([
    { name: "start of window 0", t: 0, w: 1000, k: 0 },
    { name: "last ms of window 0", t: 999, w: 1000, k: 0 },
    { name: "boundary belongs to the new window", t: 1000, w: 1000, k: 1 },
    { name: "negative time", t: -1, w: 1000, k: -1 },
    { name: "negative boundary", t: -1000, w: 1000, k: -1 },
    { name: "window longer than a timer can wait", t: 2 ** 33, w: 2 ** 32, k: 2 },
    { name: "just before a 2^32 ms boundary", t: 2 ** 33 - 1, w: 2 ** 32, k: 1 },
    // floor(t / w) is 88056 here, but 88057 * w === t: the boundary instant is window 88057.
    {
      name: "division rounding below a boundary",
      t: 318254.6718251185,
      w: 3.6141893526365707,
      k: 88057,
    },
    // floor(t / w) is 80225 here, but t < 80225 * w: still window 80224.
    {
      name: "division rounding above a boundary",
      t: 346503.91549296654,
      w: 4.3191513305449245,
      k: 80224,
    },
  ])("$name", ({ t, w, k }) => {
    const index = windowIndex(t, w);
    expect(index).toBe(k);
    expect(index * w).toBeLessThanOrEqual(t);
    expect((index + 1) * w).toBeGreaterThan(t);
  });

  test("the rounding cases really are ones a plain floor gets wrong", () => {
    expect(88057 * 3.6141893526365707).toBe(318254.6718251185);
    expect(Math.floor(318254.6718251185 / 3.6141893526365707)).toBe(88056);
    expect(80225 * 4.3191513305449245).toBeGreaterThan(346503.91549296654);
    expect(Math.floor(346503.91549296654 / 4.3191513305449245)).toBe(80225);
  });
});

describe("windowEnd", () => {
  test("is the end of the window holding the time; a boundary starts the next", () => {
    expect(windowEnd(999, 1000)).toBe(1000);
    expect(windowEnd(1000, 1000)).toBe(2000);
    expect(windowEnd(-1, 1000)).toBe(0);
    expect(windowEnd(318254.6718251185, 3.6141893526365707)).toBe(88058 * 3.6141893526365707);
  });
});

describe("granuleEnd", () => {
  test.each([
    { name: "inside a granule", t: 5, g: 2, end: 6 },
    { name: "on a boundary", t: 6, g: 2, end: 6 },
    { name: "zero", t: 0, g: 2, end: 0 },
    { name: "negative time", t: -3, g: 2, end: -2 },
    // ceil(27.3 / 0.7) * 0.7 is 27.299999999999997, below 27.3: one granule more.
    { name: "ceil rounding below the time", t: 27.3, g: 0.7, end: 40 * 0.7 },
  ])("$name", ({ t, g, end }) => {
    expect(granuleEnd(t, g)).toBe(end);
    expect(granuleEnd(t, g)).toBeGreaterThanOrEqual(t);
  });

  test("the rounding case really is one a plain ceil gets wrong", () => {
    expect(Math.ceil(27.3 / 0.7) * 0.7).toBeLessThan(27.3);
  });

  // QA: with a granule below the float step at the time (limit 100, windowMs 1 at
  // 1e15 ms: granules of 0.01 ms, steps of 0.125 ms) the end rounded below the time, so
  // a sliding log entry stamped there counted for less than windowMs.
  test("a granule below the float step never ends before the time", () => {
    const t = 1e15 + 0.25;
    const k = Math.ceil(t / 0.01);
    // Both k and k + 1 granules end below t: the one-step correction cannot reach t.
    expect(k * 0.01).toBeLessThan(t);
    expect((k + 1) * 0.01).toBeLessThan(t);
    expect(granuleEnd(t, 0.01)).toBe(t);
  });
});

describe("readClock", () => {
  test("keeps the latest reading when the clock goes backwards", () => {
    expect(readClock("X", () => 5, Number.NEGATIVE_INFINITY)).toBe(5);
    expect(readClock("X", () => 3, 5)).toBe(5);
    expect(readClock("X", () => 8, 5)).toBe(8);
  });

  test.each([
    { name: "NaN", reading: Number.NaN, error: RangeError, got: "NaN" },
    { name: "-Infinity", reading: Number.NEGATIVE_INFINITY, error: RangeError, got: "-Infinity" },
    { name: "a string", reading: "1", error: TypeError, got: '"1" (string)' },
  ])("rejects $name", ({ reading, error, got }) => {
    const read = () => readClock("X", () => reading as number, 0);
    expect(read).toThrow(error);
    expect(read).toThrow(`X: clock must return a finite number of milliseconds, got ${got}`);
  });
});

describe("exponentOf and floatStep", () => {
  test.each([
    { name: "1", x: 1, e: 0 },
    { name: "just below 2", x: 2 - 2 ** -52, e: 0 },
    { name: "2", x: 2, e: 1 },
    { name: "0.001", x: 0.001, e: -10 },
    { name: "the smallest subnormal", x: 5e-324, e: -1074 },
    { name: "1e308", x: 1e308, e: 1023 },
    // Math.log2 rounds up to exactly 48 here; the exponent is 47.
    { name: "just below 2^48", x: 2 ** 48 - 2 ** -5, e: 47 },
  ])("exponentOf($name) = $e, and floatStep matches the bits", ({ x, e }) => {
    expect(exponentOf(x)).toBe(e);
    expect(2 ** e).toBeLessThanOrEqual(x);
    expect(2 ** (e + 1)).toBeGreaterThan(x);
    expect(floatStep(x)).toBe(bitStep(x));
    expect(floatStep(-x)).toBe(bitStep(x));
  });

  test("floatStep of 0 and the subnormals is 2^-1074", () => {
    expect(floatStep(0)).toBe(5e-324);
    expect(floatStep(1e-310)).toBe(5e-324);
  });
});

describe("windowClockBoundMs and checkWindowClock", () => {
  test.each([
    { name: "1 ms", w: 1, bound: 2 ** 53 },
    { name: "1.5 ms (between powers of two)", w: 1.5, bound: 2 ** 53 },
    { name: "0.001 ms", w: 0.001, bound: 2 ** 43 },
    { name: "2^971 ms and more: no bound", w: 2 ** 971, bound: Number.POSITIVE_INFINITY },
  ])("$name: readings below $bound pass, the bound itself throws", ({ w, bound }) => {
    expect(windowClockBoundMs(w)).toBe(bound);
    if (bound === Number.POSITIVE_INFINITY) return;
    const below = bound - bitStep(bound) / 2; // the double just below the bound
    expect(bitStep(below)).toBeLessThanOrEqual(w);
    expect(bitStep(bound)).toBeGreaterThan(w);
    expect(checkWindowClock("X", below, w, bound)).toBe(below);
    expect(checkWindowClock("X", -below, w, bound)).toBe(-below);
    expect(() => checkWindowClock("X", bound, w, bound)).toThrow(resolutionMessage("X", w, bound));
    expect(() => checkWindowClock("X", -bound, w, bound)).toThrow(RangeError);
  });

  test("a reading 0 is fine for any window, even 5e-324 ms", () => {
    expect(checkWindowClock("X", 0, 5e-324, windowClockBoundMs(5e-324))).toBe(0);
  });
});
