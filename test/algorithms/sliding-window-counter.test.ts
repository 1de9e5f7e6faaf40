import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { RateLimitError } from "../../src/core/errors.js";
import { describeSharedValidation, windowOptionCases } from "../support/limiter-checks.js";
import { manualClock } from "../support/manual-clock.js";
import { slidingCounterModel } from "../support/models.js";
import { runSteps } from "../support/steps.js";
import {
  expectDenialChangesNothing,
  expectPeekPredictsConsume,
  expectSameAsModel,
  timeline,
  windowParams,
} from "../support/timeline.js";
import { describeClockResolution } from "../support/window-resolution.js";

const INF = Number.POSITIVE_INFINITY;

describe("SlidingWindowCounter step tables", () => {
  // Each row: atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs (estimate 0).
  test("previous-window weighting at e = 0, W/2 and W-1", () => {
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 100, windowMs: 1000, clock }),
      [
        [0, 100, true, 0, 0, 2000],
        [1000, 1, false, 0, 10, 1000], // e = 0: prev weighs 1; at e = 10 it weighs 0.99
        [1500, 50, true, 0, 0, 1500], // e = W/2: prev weighs 0.5, so 50 fit
        [1500, 1, false, 0, 10, 1500], // 100 * (W - e)/W must fall to 49: e = 510
        [1999, 0, true, 49, 0, 1001], // e = W-1: 100 * 1/1000 + 50 = 50.1
        [1999, 49, true, 0, 0, 1001], // 99.1: the request that takes the last slot
        [1999, 1, false, 0, 1, 1001], // at 2000, 99 becomes prev at full weight: 99 + 1 fits
        [2000, 1, true, 0, 0, 2000],
        [2000, 1, false, 0, 1000 - 98_000 / 99, 2000], // 99 * (W - e)/W must fall to 98
      ],
    );
  });

  test("the retry is solved in the next window when this one cannot fit it", () => {
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 10, windowMs: 1000, clock }),
      [
        [0, 4, true, 6, 0, 2000],
        [999, 6, true, 0, 0, 1001],
        [999, 1, false, 0, 101, 1001], // at 1100, 10 * 0.9 + 1 fits
        [1099, 1, false, 0, 1, 901],
        [1100, 1, true, 0, 0, 1900],
        [1100, 10, false, 0, 1900, 1900], // all of 1 (now prev) must fade: the end of window 2
      ],
    );
  });

  test("a previous window older than one window counts 0", () => {
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 10, windowMs: 1000, clock }),
      [
        [0, 10, true, 0, 0, 2000],
        [1999, 10, false, 9, 1, 1], // 10 * 1/1000 is still there
        [2000, 10, true, 0, 0, 2000], // window 0 is two windows back: it counts nothing
        [5000, 0, true, 10, 0, 0],
      ],
    );
  });

  test("a cost above the limit is denied with Infinity and takes nothing", () => {
    const { limiter } = runSteps(
      (clock) => new SlidingWindowCounter({ limit: 3, windowMs: 1000, clock }),
      [
        [0, 4, false, 3, INF, 0],
        [0, 3.0000001, false, 3, INF, 0],
        [0, 3, true, 0, 0, 2000],
        [0, 0, true, 0, 0, 2000], // cost 0: a free probe, always allowed
      ],
    );
    expect(limiter.peek(100).retryAfterMs).toBe(INF);
  });

  test("a clock going backwards never moves a window back or ends one early", () => {
    const { limiter, clock } = runSteps(
      (clock) => new SlidingWindowCounter({ limit: 2, windowMs: 1000, clock }),
      [
        [1500, 2, true, 0, 0, 1500],
        [900, 1, false, 0, 1000, 1500], // time stands still at 1500
        [0, 1, false, 0, 1000, 1500],
        [2000, 1, false, 0, 500, 1000], // prev 2 at weight 1: half of it must fade
        [1700, 1, false, 0, 500, 1000], // still counted from 2000, the latest reading
        [2500, 1, true, 0, 0, 1500],
      ],
    );
    clock.set(-1e9);
    expect(limiter.peek(0)).toMatchObject({ remaining: 0, resetAfterMs: 1500 });
  });

  test("fractional costs", () => {
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 1, windowMs: 1000, clock }),
      [
        [0, 0.25, true, 0, 0, 2000],
        [0, 0.75, true, 0, 0, 2000],
        [0, 0.5, false, 0, 1500, 2000], // 1 as prev must fall to 0.5: at 1500
        [1500, 0.5, true, 0, 0, 1500],
      ],
    );
  });

  test("retry is exactly 100 ms where float math gives 100.00000000000003", () => {
    // 0.3 - 0.2 - 0.1 is -2.8e-17, not 0: the raw solution lands a hair past 100 ms.
    const { limiter, clock } = runSteps(
      (clock) => new SlidingWindowCounter({ limit: 0.3, windowMs: 100, clock }),
      [
        [0, 0.1, true, 0, 0, 200],
        [100, 0.1, true, 0, 0, 200],
        [100, 0.2, false, 0, 100, 200],
      ],
    );
    clock.set(200);
    expect(limiter.allow(0.2)).toBe(true);
  });

  test("windows longer than 2^31-1 ms", () => {
    const w = 2 ** 32;
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 2, windowMs: w, clock }),
      [
        [0, 2, true, 0, 0, 2 * w],
        [w, 1, false, 0, w / 2, w],
        [w + w / 2, 1, true, 0, 0, w + w / 2],
      ],
    );
  });

  test("the doc example", () => {
    const counter = new SlidingWindowCounter({
      limit: 100,
      windowMs: 60_000,
      clock: manualClock(),
    });
    expect(counter.consume().remaining).toBe(99);
  });

  test("huge values: limit 1e15, a window of a year, a clock at 1e13 ms", () => {
    const year = 31_536_000_000; // window 317 of a year ends at 10_028_448_000_000
    runSteps(
      (clock) => new SlidingWindowCounter({ limit: 1e15, windowMs: year, clock }),
      [
        [1e13, 1e15, true, 0, 0, 59_984_000_000],
        [10_028_448_000_000, 1e15, false, 0, year, year], // prev at full weight
        [10_028_448_000_000 + year / 2, 5e14, true, 0, 0, year / 2 + year],
        [10_028_448_000_000 + year / 2, 1e12, false, 0, year / 1000, year / 2 + year],
      ],
    );
  });

  test("peek changes nothing; reset, isIdle and clone", () => {
    const clock = manualClock(100);
    const counter = new SlidingWindowCounter({ limit: 2, windowMs: 1000, clock });
    expect(counter.isIdle()).toBe(true);
    expect(counter.peek(2)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1900 });
    expect(counter.peek(0)).toMatchObject({ allowed: true, remaining: 2, resetAfterMs: 0 });
    expect(counter.isIdle()).toBe(true);
    expect(counter.allow()).toBe(true);
    expect(counter.isIdle()).toBe(false);
    const copy = counter.clone();
    expect(copy).toMatchObject({ limit: 2, windowMs: 1000, clock });
    expect(copy.isIdle()).toBe(true);
    clock.set(1999);
    expect(counter.isIdle()).toBe(false);
    clock.set(2000);
    expect(counter.isIdle()).toBe(true);
    counter.consume(2);
    counter.reset();
    expect(counter.isIdle()).toBe(true);
    expect(counter.consume(2)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("allow and consume agree", () => {
    const clock = manualClock();
    const a = new SlidingWindowCounter({ limit: 3, windowMs: 700, clock });
    const b = new SlidingWindowCounter({ limit: 3, windowMs: 700, clock });
    for (let t = 0; t < 5000; t += 65) {
      clock.set(t);
      expect(a.allow(0.75), `at ${t}`).toBe(b.consume(0.75).allowed);
    }
  });
});

describe("SlidingWindowCounter wait", () => {
  test("resolves when the estimate has fallen enough; rejects a cost above the limit", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      vi.setSystemTime(0);
      const counter = new SlidingWindowCounter({
        limit: 4,
        windowMs: 1000,
        clock: () => Date.now(),
      });
      counter.consume(4);
      await expect(counter.wait(5)).rejects.toThrow(
        new RangeError("SlidingWindowCounter.wait: cost 5 exceeds limit 4"),
      );
      await expect(counter.wait(1, { maxWaitMs: 1249 })).rejects.toBeInstanceOf(RateLimitError);
      const granted = counter.wait(1); // at 1250, 4 * 0.75 + 1 fits
      await vi.advanceTimersByTimeAsync(1249);
      expect(counter.peek().allowed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await expect(granted).resolves.toMatchObject({ allowed: true, remaining: 0 });
      // A pending waiter keeps the limiter busy even when its state is reset to fresh.
      counter.consume(4);
      const pending = counter.wait(1);
      counter.reset();
      expect(counter.isIdle()).toBe(false);
      await vi.advanceTimersByTimeAsync(10_000);
      await expect(pending).resolves.toMatchObject({ allowed: true });
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("SlidingWindowCounter validation", () => {
  test.each(windowOptionCases("SlidingWindowCounter"))("$name", ({ options, error, message }) => {
    const make = () => new SlidingWindowCounter(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });
});

describeSharedValidation(
  "SlidingWindowCounter",
  (clock) => new SlidingWindowCounter({ limit: 1, windowMs: 1000, clock }),
);

describe("SlidingWindowCounter properties", () => {
  test("decides as the formula per floor(t / windowMs) for any timeline", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectSameAsModel(
          (clock) => new SlidingWindowCounter({ limit, windowMs, clock }),
          slidingCounterModel(limit, windowMs),
          calls,
          true,
        );
      }),
    );
  });

  test("retryAfterMs is the earliest time the cost fits: allowed then, denied 0.001 ms before", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        const clock = manualClock();
        const counter = new SlidingWindowCounter({ limit, windowMs, clock });
        let now = Number.NEGATIVE_INFINITY; // the latest reading: the counter's "now"
        for (const { dt, cost } of calls) {
          clock.advance(dt);
          now = Math.max(now, clock());
          const d = counter.consume(cost);
          if (d.allowed || d.retryAfterMs === INF) continue;
          // The first denial is checked; the probes below move the counter's clock on.
          expect(d.retryAfterMs).toBeGreaterThan(0);
          if (d.retryAfterMs > 0.001) {
            clock.set(now + d.retryAfterMs - 0.001);
            expect(counter.peek(cost).allowed, "just before").toBe(false);
          }
          clock.set(now + d.retryAfterMs);
          expect(counter.peek(cost).allowed, "at retryAfterMs").toBe(true);
          return;
        }
      }),
    );
  });

  test("peek answers what consume then does", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectPeekPredictsConsume(
          (clock) => new SlidingWindowCounter({ limit, windowMs, clock }),
          calls,
        );
      }),
    );
  });

  test("a denied call leaves peek unchanged", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectDenialChangesNothing(
          (clock) => new SlidingWindowCounter({ limit, windowMs, clock }),
          calls,
        );
      }),
    );
  });
});

describeClockResolution("SlidingWindowCounter", (options) => new SlidingWindowCounter(options));
