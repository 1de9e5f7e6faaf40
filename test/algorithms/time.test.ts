import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
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
import type { Clock, Limiter } from "../../src/core/limiter.js";
import { decisionMs } from "../../src/core/numeric.js";
import { fixedWindowModel, slidingCounterModel, slidingLogModel } from "../support/models.js";
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

  // Regression: with a granule below the float step at the time (limit 100, windowMs 1 at
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

/**
 * The magnitude property: for a clock origin from 0 to 2^53 ms and windowMs from 1e-3
 * to 1e12 ms, every call either throws the resolution RangeError, exactly when windowMs
 * is below the float step at the reading, or decides sanely: a denial retries after
 * > 0 ms (finite for a cost within the limit), resets are finite, and no span of
 * windowMs / 2 admits more than the algorithm allows (the defect admitted everything).
 * With a power-of-two windowMs the models' float arithmetic is exact, so the decisions
 * must also equal the naive models' (for the log only allowed and remaining: its leave
 * times are moved up where `t + windowMs` rounds down, see logLeaveAt).
 */
describe("window limiters over clock magnitudes (windowMs below the float step)", () => {
  type Make = (options: { limit: number; windowMs: number; clock: Clock }) => Limiter;
  const algorithms: {
    name: string;
    make: Make;
    model: typeof fixedWindowModel;
    /** Most units any span shorter than `span * windowMs` admits, per `limit`. */
    most: number;
    span: number;
    /** What must equal the model: the whole decision, or allowed and remaining only. */
    compare: "all" | "counts";
  }[] = [
    {
      name: "FixedWindow",
      make: (o) => new FixedWindow(o),
      model: fixedWindowModel,
      most: 2,
      span: 0.5,
      compare: "all",
    },
    {
      name: "SlidingWindowLog",
      make: (o) => new SlidingWindowLog(o),
      model: slidingLogModel,
      most: 1,
      span: 1,
      compare: "counts",
    },
    {
      name: "SlidingWindowCounter",
      make: (o) => new SlidingWindowCounter(o),
      model: slidingCounterModel,
      most: 2,
      span: 0.5,
      compare: "counts",
    },
  ];
  const origin = fc.oneof(
    fc.constantFrom(0, 2 ** 53 - 1, 2 ** 53, 1e16 / 2, 9e15),
    fc
      .tuple(fc.integer({ min: 0, max: 52 }), fc.double({ min: 0, max: 1, noNaN: true }))
      .map(([e, f]) => Math.min(2 ** e * (1 + f), 2 ** 53)),
  );
  const anyWindow = fc.double({ min: -3, max: 12, noNaN: true }).map((x) => 10 ** x);
  const powerOfTwoWindow = fc.integer({ min: -9, max: 39 }).map((j) => 2 ** j);
  const steps = fc.array(
    fc.record({
      advance: fc.constantFrom(0, 0.1, 0.25, 0.5, 0.9, 1, 1.5, 3),
      cost: fc.integer({ min: 0, max: 3 }),
      take: fc.boolean(),
    }),
    { minLength: 1, maxLength: 25 },
  );

  function run(
    algorithm: (typeof algorithms)[number],
    start: number,
    windowMs: number,
    limit: number,
    calls: readonly { advance: number; cost: number; take: boolean }[],
    compare: boolean,
  ): void {
    let t = start;
    const limiter = algorithm.make({ limit, windowMs, clock: () => t });
    const model = algorithm.model(limit, windowMs);
    let seen = Number.NEGATIVE_INFINITY;
    const admitted: { at: number; cost: number }[] = [];
    calls.forEach(({ advance, cost, take }, i) => {
      t += advance * windowMs;
      const now = Math.max(seen, t);
      const where = `call ${i}: ${take ? "consume" : "peek"}(${cost}) at ${now} ms, windowMs ${windowMs}`;
      const call = () => (take ? limiter.consume(cost) : limiter.peek(cost));
      if (bitStep(now) > windowMs) {
        expect(call, where).toThrow(resolutionMessage(algorithm.name, windowMs, now));
        return;
      }
      seen = now;
      const d = call();
      const m = model(now, cost, take);
      const slack = 2 * windowMs * (1 + 1e-9) + bitStep(now);
      if (d.allowed) {
        expect(d.retryAfterMs, where).toBe(0);
        if (take && cost > 0) {
          expect(d.resetAfterMs, where).toBeGreaterThan(0);
          admitted.push({ at: now, cost });
        }
      } else {
        expect(d.retryAfterMs, where).toBeGreaterThan(0);
        if (cost <= limit) expect(d.retryAfterMs, where).toBeLessThanOrEqual(slack);
        else expect(d.retryAfterMs, where).toBe(Number.POSITIVE_INFINITY);
      }
      expect(d.resetAfterMs, where).toBeGreaterThanOrEqual(0);
      expect(d.resetAfterMs, where).toBeLessThanOrEqual(slack);
      if (!compare) return;
      // The model's figures as a decision states them: noise short of a microsecond raised.
      const stated = {
        ...m,
        limit,
        retryAfterMs: decisionMs(m.retryAfterMs),
        resetAfterMs: decisionMs(m.resetAfterMs),
      };
      if (algorithm.compare === "all") expect(d, where).toEqual(stated);
      else expect([d.allowed, d.remaining], where).toEqual([m.allowed, m.remaining]);
    });
    // A float difference below the span means the exact one is below it too.
    const span = algorithm.span * windowMs;
    for (const first of admitted) {
      const within = admitted.filter((a) => a.at >= first.at && a.at - first.at < span);
      const sum = within.reduce((s, a) => s + a.cost, 0);
      expect(sum, `units admitted from ${first.at} ms on, within ${span} ms`).toBeLessThanOrEqual(
        algorithm.most * limit,
      );
    }
  }

  for (const algorithm of algorithms) {
    test(`${algorithm.name}: any windowMs from 1e-3 to 1e12 at any origin up to 2^53`, () => {
      fc.assert(
        fc.property(
          origin,
          anyWindow,
          fc.integer({ min: 1, max: 4 }),
          steps,
          (o, w, limit, calls) => run(algorithm, o, w, limit, calls, false),
        ),
        { numRuns: 300 },
      );
    });

    test(`${algorithm.name}: a power-of-two windowMs decides as the naive model at any origin`, () => {
      fc.assert(
        fc.property(
          origin,
          powerOfTwoWindow,
          fc.integer({ min: 1, max: 4 }),
          steps,
          (o, w, limit, calls) => run(algorithm, o, w, limit, calls, true),
        ),
        { numRuns: 300 },
      );
    });
  }
});

describe("window limiters call their clock unbound", () => {
  // As `readClock` calls it: a clock is a function, never a method of the limiter. Called
  // as one, `performance.now` passed bare failed with "Received an instance of
  // SlidingWindowLog", and a clock reading `this` saw the limiter.
  const seen = (): { clock: Clock; thisValues: unknown[] } => {
    const thisValues: unknown[] = [];
    const clock = function (this: unknown): number {
      thisValues.push(this);
      return 5;
    };
    return { clock, thisValues };
  };
  test.each([
    ["FixedWindow", (clock: Clock) => new FixedWindow({ limit: 2, windowMs: 10, clock })],
    ["SlidingWindowLog", (clock: Clock) => new SlidingWindowLog({ limit: 2, windowMs: 10, clock })],
    [
      "SlidingWindowCounter",
      (clock: Clock) => new SlidingWindowCounter({ limit: 2, windowMs: 10, clock }),
    ],
  ])("%s: allow, consume and peek read the clock with no this", (_name, make) => {
    const { clock, thisValues } = seen();
    const limiter = make(clock) as Limiter & { allow(): boolean };
    expect(limiter.allow()).toBe(true);
    expect(limiter.consume().allowed).toBe(true);
    expect(limiter.peek().allowed).toBe(false);
    expect(thisValues.length).toBeGreaterThanOrEqual(3);
    expect(thisValues.every((t) => t === undefined)).toBe(true);
  });
});
