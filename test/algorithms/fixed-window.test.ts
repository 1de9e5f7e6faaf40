import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { RateLimitError } from "../../src/core/errors.js";
import { describeSharedValidation, windowOptionCases } from "../support/limiter-checks.js";
import { manualClock } from "../support/manual-clock.js";
import { fixedWindowModel } from "../support/models.js";
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

describe("FixedWindow step tables", () => {
  // Each row: atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs.
  test("exact window edges and the last slot", () => {
    runSteps(
      (clock) => new FixedWindow({ limit: 3, windowMs: 1000, clock }),
      [
        [0, 1, true, 2, 0, 1000],
        [0, 1, true, 1, 0, 1000],
        [999, 1, true, 0, 0, 1], // the last slot, in the last ms of the window
        [999, 1, false, 0, 1, 1],
        [1000, 1, true, 2, 0, 1000], // the boundary instant belongs to the new window
        [1999, 2, true, 0, 0, 1],
        [1999, 0, true, 0, 0, 1], // cost 0: a free probe, always allowed
        [2000, 3, true, 0, 0, 1000],
        [2500, 1, false, 0, 500, 500],
      ],
    );
  });

  test("the double burst at a boundary is allowed (the known weakness)", () => {
    runSteps(
      (clock) => new FixedWindow({ limit: 5, windowMs: 1000, clock }),
      [
        [999, 5, true, 0, 0, 1],
        [1000, 5, true, 0, 0, 1000],
        [1001, 1, false, 0, 999, 999],
      ],
    );
  });

  test("a cost above the limit is denied with Infinity and takes nothing", () => {
    const { limiter } = runSteps(
      (clock) => new FixedWindow({ limit: 3, windowMs: 1000, clock }),
      [
        [0, 4, false, 3, INF, 0],
        [0, 3.0000001, false, 3, INF, 0],
        [10, 1, true, 2, 0, 990],
        [20, 4, false, 2, INF, 980],
        [30, 2, true, 0, 0, 970],
      ],
    );
    expect(limiter.peek(100).retryAfterMs).toBe(INF);
  });

  test("a clock going backwards never returns to an earlier window", () => {
    const { limiter, clock } = runSteps(
      (clock) => new FixedWindow({ limit: 2, windowMs: 1000, clock }),
      [
        [1500, 2, true, 0, 0, 500],
        [900, 1, false, 0, 500, 500], // window 0 is over: time stands still at 1500
        [0, 1, false, 0, 500, 500],
        [1800, 1, false, 0, 200, 200],
        [1700, 1, false, 0, 200, 200], // still counted from 1800, the latest reading
        [2000, 1, true, 1, 0, 1000],
      ],
    );
    clock.set(-1e9);
    expect(limiter.peek()).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
  });

  test("fractional costs add up to the limit and no further", () => {
    const steps: [number, number, boolean, number, number][] = [];
    for (let i = 0; i < 10; i++) steps.push([i, 0.1, true, 0, 0]); // 0.1 * 10 fits in 1
    steps.push([10, 0.1, false, 0, 990]);
    steps.push([10, 0.5, false, 0, 990]);
    steps.push([1000, 0.5, true, 0, 0]);
    steps.push([1000, 0.5, true, 0, 0]);
    steps.push([1000, 0.001, false, 0, 1000]);
    runSteps((clock) => new FixedWindow({ limit: 1, windowMs: 1000, clock }), steps);
  });

  test("windows longer than 2^31-1 ms and clocks near 2^53", () => {
    const w = 2 ** 32;
    runSteps(
      (clock) => new FixedWindow({ limit: 1, windowMs: w, clock }),
      [
        [w - 1, 1, true, 0, 0, 1],
        [w - 1, 1, false, 0, 1, 1],
        [w, 1, true, 0, 0, w],
        [w + 1, 1, false, 0, w - 1, w - 1],
        [5 * w, 1, true, 0, 0, w],
      ],
    );
    const start = 2 ** 52;
    runSteps(
      (clock) => new FixedWindow({ limit: 2, windowMs: 60_000, clock }),
      [
        [start, 2, true, 0, 0, 60_000 - (start % 60_000)],
        [start + 1, 1, false, 0, 60_000 - ((start + 1) % 60_000), 60_000 - ((start + 1) % 60_000)],
      ],
    );
  });

  test("huge values: limit 1e15, a window of a year, a clock at 1e13 ms", () => {
    const year = 31_536_000_000; // window 317 of a year ends at 10_028_448_000_000
    runSteps(
      (clock) => new FixedWindow({ limit: 1e15, windowMs: year, clock }),
      [
        [1e13, 1e15, true, 0, 0, 28_448_000_000],
        [1e13, 1, false, 0, 28_448_000_000, 28_448_000_000],
        [10_028_448_000_000, 1e15, true, 0, 0, year],
      ],
    );
  });

  test("negative clock readings use floor, not truncation", () => {
    runSteps(
      (clock) => new FixedWindow({ limit: 1, windowMs: 1000, clock }),
      [
        [-1500, 1, true, 0, 0, 500], // window [-2000, -1000)
        [-1001, 1, false, 0, 1, 1],
        [-1000, 1, true, 0, 0, 1000],
      ],
    );
  });

  test("the doc example", () => {
    const window = new FixedWindow({ limit: 100, windowMs: 60_000, clock: manualClock() });
    expect(window.consume().remaining).toBe(99);
  });

  test("peek changes nothing; reset, isIdle and clone", () => {
    const clock = manualClock(100);
    const window = new FixedWindow({ limit: 2, windowMs: 1000, clock });
    expect(window.isIdle()).toBe(true);
    expect(window.peek(2)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 900 });
    expect(window.peek(0)).toMatchObject({ allowed: true, remaining: 2, resetAfterMs: 0 });
    expect(window.isIdle()).toBe(true);
    expect(window.allow()).toBe(true);
    expect(window.isIdle()).toBe(false);
    const copy = window.clone();
    expect(copy).toMatchObject({ limit: 2, windowMs: 1000, clock });
    expect(copy.isIdle()).toBe(true);
    clock.set(999);
    expect(window.isIdle()).toBe(false);
    clock.set(1000);
    expect(window.isIdle()).toBe(true);
    expect(window.consume(2).allowed).toBe(true);
    window.reset();
    expect(window.isIdle()).toBe(true);
    expect(window.consume(2)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("allow and consume agree", () => {
    const clock = manualClock();
    const a = new FixedWindow({ limit: 2, windowMs: 700, clock });
    const b = new FixedWindow({ limit: 2, windowMs: 700, clock });
    for (let t = 0; t < 5000; t += 130) {
      clock.set(t);
      expect(a.allow(0.75), `at ${t}`).toBe(b.consume(0.75).allowed);
    }
  });
});

describe("FixedWindow wait", () => {
  test("resolves when the next window starts; rejects a cost above the limit", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      vi.setSystemTime(0);
      const window = new FixedWindow({ limit: 2, windowMs: 1000, clock: () => Date.now() });
      window.consume(2);
      await expect(window.wait(3)).rejects.toThrow(
        new RangeError("FixedWindow.wait: cost 3 exceeds limit 2"),
      );
      await expect(window.wait(1, { maxWaitMs: 999 })).rejects.toBeInstanceOf(RateLimitError);
      const granted = window.wait(1);
      await vi.advanceTimersByTimeAsync(999);
      expect(window.peek(0).remaining).toBe(0);
      await vi.advanceTimersByTimeAsync(1);
      await expect(granted).resolves.toMatchObject({ allowed: true, remaining: 1 });
      expect(window.isIdle()).toBe(false);
      // A pending waiter keeps the limiter busy even when its state is reset to fresh.
      window.consume(1);
      const pending = window.wait(1);
      window.reset();
      expect(window.isIdle()).toBe(false);
      await vi.advanceTimersByTimeAsync(10_000);
      await expect(pending).resolves.toMatchObject({ allowed: true });
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("FixedWindow validation", () => {
  test.each(windowOptionCases("FixedWindow"))("$name", ({ options, error, message }) => {
    const make = () => new FixedWindow(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });
});

describeSharedValidation(
  "FixedWindow",
  (clock) => new FixedWindow({ limit: 1, windowMs: 1000, clock }),
);

describe("FixedWindow properties", () => {
  test("decides as a count per floor(t / windowMs) for any timeline", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectSameAsModel(
          (clock) => new FixedWindow({ limit, windowMs, clock }),
          fixedWindowModel(limit, windowMs),
          calls,
        );
      }),
    );
  });

  test("peek answers what consume then does", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectPeekPredictsConsume((clock) => new FixedWindow({ limit, windowMs, clock }), calls);
      }),
    );
  });

  test("a denied call leaves peek unchanged", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectDenialChangesNothing((clock) => new FixedWindow({ limit, windowMs, clock }), calls);
      }),
    );
  });
});

describeClockResolution("FixedWindow", (options) => new FixedWindow(options));
