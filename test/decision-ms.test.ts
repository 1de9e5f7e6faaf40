import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import type { Clock, Limiter } from "../src/core/limiter.js";
import { decisionMs } from "../src/core/numeric.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import { runSteps } from "./support/steps.js";

// docs/semantics.md#milliseconds: a figure short of a whole microsecond by float noise reads
// that microsecond; nothing is ever lowered.

describe("decision figures carry no float noise short of a microsecond", () => {
  // Each table: the clock at a decimal reading (82.501 is the double just above it), so the
  // figures were 17.498999999999995 and 15.897999999999996 before.
  test("regression: a fixed window's retry read 17.498999999999995 ms for 17.499", () => {
    runSteps(
      (clock) => new FixedWindow({ limit: 1, windowMs: 100, clock }),
      [
        [82.501, 1, true, 0, 0, 17.499],
        [82.501, 1, false, 0, 17.499, 17.499],
      ],
    );
  });

  test("regression: a sliding log's retry read 15.897999999999996 ms for 15.898", () => {
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 100, clock }),
      [
        [0.1, 1, true, 0, 0],
        [84.20200000000001, 1, false, 0, 15.898, 15.898],
      ],
    );
  });

  test("regression: a sliding log's retry landed one float step before the entry left", () => {
    let now = 18.397;
    const log = new SlidingWindowLog({ limit: 3, windowMs: 100, clock: () => now });
    log.consume(2);
    const d = log.peek(2);
    expect(d.allowed).toBe(false);
    now += d.retryAfterMs; // 18.397 + 100 rounds to 118.39699999999999, before 118.397
    expect(log.peek(2).allowed, `peek(2) at ${now}`).toBe(true);
  });

  test("a figure just above a microsecond is kept: lowered, the client would come early", () => {
    // The entry of 7.2 leaves at the double after 9.2; at 9.2 it still counts.
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 2, clock }),
      [
        [7.2, 1, true, 0, 0, 9.200000000000001 - 7.2],
        [9.2, 1, false, 0, 9.200000000000001 - 9.2],
        [9.200000000000001, 1, true, 0, 0],
      ],
    );
  });
});

describe("decisionMs", () => {
  test.each([
    { name: "noise below a whole ms", ms: 99.99999999999999, stated: 100 },
    { name: "noise below a whole µs", ms: 51.59899999999999, stated: 51.599 },
    { name: "noise above is kept", ms: 100.00000000000001, stated: 100.00000000000001 },
    { name: "a third of a second", ms: 1000 / 3, stated: 1000 / 3 },
    { name: "below a microsecond", ms: 2.220446049250313e-15, stated: 2.220446049250313e-15 },
    { name: "zero", ms: 0, stated: 0 },
    { name: "a negative", ms: -1e-12, stated: 0 },
    { name: "Infinity", ms: Number.POSITIVE_INFINITY, stated: Number.POSITIVE_INFINITY },
    { name: "past the float range in µs", ms: 1e306, stated: 1e306 },
  ])("$name", ({ ms, stated }) => {
    expect(decisionMs(ms)).toBe(stated);
  });

  test("property: never lower, at most a relative 1e-9 higher, and stable", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e15, noNaN: true }), (ms) => {
        const stated = decisionMs(ms);
        expect(stated).toBeGreaterThanOrEqual(ms);
        expect(stated - ms).toBeLessThanOrEqual(1e-9 * ms);
        expect(decisionMs(stated)).toBe(stated);
      }),
      { seed: 20261202, numRuns: 2000 },
    );
  });

  test("property: a whole number of microseconds plus or minus noise reads as it, or above", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1e12 }),
        fc.integer({ min: -4, max: 4 }),
        (us, ulps) => {
          const exact = us / 1000;
          let ms = exact;
          const step = ulps < 0 ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
          for (let i = 0; i < Math.abs(ulps); i++) ms = nextDouble(ms, step);
          expect(decisionMs(ms)).toBe(ms < exact ? exact : ms);
        },
      ),
      { seed: 20261203, numRuns: 2000 },
    );
  });
});

/** The double next to `x` toward `to`. */
function nextDouble(x: number, to: number): number {
  const f = new Float64Array([x]);
  const bits = new BigInt64Array(f.buffer);
  bits[0] = bits[0]! + (to > x ? 1n : -1n);
  return f[0]!;
}

describe("property: every limiter's figures at decimal clock readings", () => {
  const limiters: readonly { name: string; make: (clock: Clock) => Limiter }[] = [
    {
      name: "TokenBucket",
      make: (clock) => new TokenBucket({ capacity: 3, refillPerSecond: 7, clock }),
    },
    {
      name: "LeakyBucket",
      make: (clock) => new LeakyBucket({ capacity: 3, leakPerSecond: 7, clock }),
    },
    { name: "FixedWindow", make: (clock) => new FixedWindow({ limit: 3, windowMs: 100, clock }) },
    {
      name: "SlidingWindowLog",
      make: (clock) => new SlidingWindowLog({ limit: 3, windowMs: 100, clock }),
    },
    {
      name: "SlidingWindowCounter",
      make: (clock) => new SlidingWindowCounter({ limit: 3, windowMs: 100, clock }),
    },
    {
      name: "allOf",
      make: (clock) =>
        allOf(
          new TokenBucket({ capacity: 3, refillPerSecond: 7, clock }),
          new FixedWindow({ limit: 4, windowMs: 100, clock }),
        ),
    },
  ];

  test.each(limiters)(
    "$name: no figure is noise short of a microsecond, and a request at now + retryAfterMs passes",
    ({ make }) => {
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              // decimal steps in µs, as a clock reads them: 0.001 ms to 60 ms
              stepUs: fc.integer({ min: 1, max: 60_000 }),
              cost: fc.integer({ min: 1, max: 3 }),
            }),
            { minLength: 1, maxLength: 40 },
          ),
          (calls) => {
            let now = 0;
            const clock = () => now;
            const limiter = make(clock);
            const keyed = new KeyedLimiter(make(clock) as never);
            for (const { stepUs, cost } of calls) {
              now += stepUs / 1000;
              for (const d of [limiter.consume(cost), keyed.consume("k", cost)]) {
                for (const ms of [d.retryAfterMs, d.resetAfterMs]) {
                  expect(decisionMs(ms), `${ms} at ${now}`).toBe(ms);
                }
              }
              const d = limiter.peek(cost);
              if (!d.allowed && d.retryAfterMs < Number.POSITIVE_INFINITY) {
                now += d.retryAfterMs; // the clock moves on from there: it never goes back
                expect(limiter.peek(cost).allowed, `peek(${cost}) at ${now}`).toBe(true);
              }
            }
          },
        ),
        { seed: 20261204, numRuns: 150 },
      );
    },
  );
});

describe("a retry at an epoch clock reading is not early", () => {
  // An epoch clock (Date.now, or timeOrigin + performance.now()) reads about 1.7e12 ms, whose
  // float step is 2.4e-4 ms: now + retryAfterMs can round below the instant the units are
  // back, and the client retrying then was refused again.
  const limiters: readonly { name: string; make: (clock: Clock) => Limiter }[] = [
    {
      name: "TokenBucket",
      make: (clock) => new TokenBucket({ capacity: 3, refillPerSecond: 7, clock }),
    },
    {
      name: "LeakyBucket",
      make: (clock) => new LeakyBucket({ capacity: 3, leakPerSecond: 7, clock }),
    },
    { name: "FixedWindow", make: (clock) => new FixedWindow({ limit: 3, windowMs: 100, clock }) },
    {
      name: "SlidingWindowLog",
      make: (clock) => new SlidingWindowLog({ limit: 3, windowMs: 100, clock }),
    },
    {
      name: "SlidingWindowCounter",
      make: (clock) => new SlidingWindowCounter({ limit: 3, windowMs: 100, clock }),
    },
    {
      name: "allOf",
      make: (clock) =>
        allOf(
          new TokenBucket({ capacity: 3, refillPerSecond: 7, clock }),
          new SlidingWindowCounter({ limit: 4, windowMs: 100, clock }),
        ),
    },
  ];

  test("regression: a token bucket at 1e12 ms said 285.714 ms, and then refused", () => {
    let now = 1e12;
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 7, clock: () => now });
    bucket.consume(3);
    const d = bucket.peek(2);
    expect(d.allowed).toBe(false);
    now += d.retryAfterMs;
    expect(bucket.peek(2).allowed, `at 1e12 + ${d.retryAfterMs}`).toBe(true);
  });

  test.each(limiters)(
    "$name, plain and keyed: the request passes at now + retryAfterMs",
    ({ make }) => {
      fc.assert(
        fc.property(
          fc.double({ min: 1e12, max: 2e12, noNaN: true }),
          fc.array(
            fc.record({
              stepMs: fc.double({ min: 0, max: 50, noNaN: true }),
              cost: fc.integer({ min: 1, max: 3 }),
            }),
            { minLength: 1, maxLength: 20 },
          ),
          (start, calls) => {
            let now = start;
            const clock = () => now;
            const limiter = make(clock);
            const keyed = new KeyedLimiter(make(clock) as never);
            const peeks = [(c: number) => limiter.peek(c), (c: number) => keyed.peek("k", c)];
            for (const { stepMs, cost } of calls) {
              now += stepMs;
              limiter.consume(cost);
              keyed.consume("k", cost);
              for (const peek of peeks) {
                const d = peek(cost);
                if (d.allowed || d.retryAfterMs === Number.POSITIVE_INFINITY) continue;
                const from = now;
                now += d.retryAfterMs; // the clock moves on from there: it never goes back
                expect(peek(cost).allowed, `peek(${cost}) at ${from} + ${d.retryAfterMs}`).toBe(
                  true,
                );
              }
            }
          },
        ),
        { seed: 20261205, numRuns: 100 },
      );
    },
  );
});
