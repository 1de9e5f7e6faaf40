import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { RateLimitError } from "../../src/core/errors.js";
import { describeSharedValidation } from "../support/limiter-checks.js";
import { manualClock } from "../support/manual-clock.js";
import { runSteps } from "../support/steps.js";
import {
  expectDenialChangesNothing,
  expectPeekPredictsConsume,
  timeline,
} from "../support/timeline.js";

const INF = Number.POSITIVE_INFINITY;

describe("LeakyBucket step tables", () => {
  // Each row: atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs (until empty).
  test("the level drains at leakPerSecond", () => {
    // capacity 3, 10/s: one unit drains per 100 ms.
    runSteps(
      (clock) => new LeakyBucket({ capacity: 3, leakPerSecond: 10, clock }),
      [
        [0, 1, true, 2, 0, 100],
        [0, 2, true, 0, 0, 300], // the last slot
        [0, 1, false, 0, 100, 300],
        [50, 1, false, 0, 50, 250],
        [100, 1, true, 0, 0, 300],
        [400, 3, true, 0, 0, 300],
        [700, 0, true, 3, 0, 0], // cost 0 at the instant it is empty
      ],
    );
  });

  test("a cost above capacity is denied with Infinity and takes nothing", () => {
    runSteps(
      (clock) => new LeakyBucket({ capacity: 3, leakPerSecond: 10, clock }),
      [
        [0, 5, false, 3, INF, 0],
        [0, 3.0000001, false, 3, INF, 0],
        [0, 3, true, 0, 0, 300],
      ],
    );
  });

  test("a clock going backwards drains nothing and counts from the latest reading", () => {
    const { limiter, clock } = runSteps(
      (clock) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock }),
      [
        [1000, 2, true, 0, 0, 2000],
        [500, 1, false, 0, 1000, 2000], // time stands still at 1000
        [1500, 1, false, 0, 500, 1500],
        [1200, 1, false, 0, 500, 1500], // still counted from 1500, the latest reading
        [2000, 1, true, 0, 0, 2000],
      ],
    );
    clock.set(-5000);
    expect(limiter.peek(1)).toMatchObject({ allowed: false, retryAfterMs: 1000 });
  });

  test("a leak of 0 never drains", () => {
    const { limiter } = runSteps(
      (clock) => new LeakyBucket({ capacity: 2, leakPerSecond: 0, clock }),
      [
        [0, 1, true, 1, 0, INF],
        [1e12, 1, true, 0, 0, INF],
        [2e12, 1, false, 0, INF, INF],
        [3e12, 0, true, 0, 0, INF],
      ],
    );
    limiter.reset();
    expect(limiter.peek(0)).toMatchObject({ allowed: true, remaining: 2, resetAfterMs: 0 });
  });

  test("fractional costs and the exact instant they fit", () => {
    const { limiter, clock } = runSteps(
      (clock) => new LeakyBucket({ capacity: 1, leakPerSecond: 10 / 3, clock }),
      [
        [0, 0.25, true, 0, 0, 75],
        [0, 0.75, true, 0, 0, 300],
        [0, 0.5, false, 0, 150, 300],
      ],
    );
    clock.set(150);
    expect(limiter.allow(0.5)).toBe(true);
  });

  test("huge values: capacity 1e15 at 1e12 per second", () => {
    runSteps(
      (clock) => new LeakyBucket({ capacity: 1e15, leakPerSecond: 1e12, clock }),
      [
        [0, 1e15, true, 0, 0, 1_000_000],
        [1, 1e9, true, 0, 0, 1_000_000],
        [1, 1, false, 0, 1e-9],
        [1_000_001, 1e15, true, 0, 0, 1_000_000],
      ],
    );
  });

  test("the doc example", () => {
    const bucket = new LeakyBucket({ capacity: 10, leakPerSecond: 5, clock: manualClock() });
    expect(bucket.consume(10).allowed).toBe(true);
    expect(bucket.consume()).toMatchObject({ allowed: false, retryAfterMs: 200 });
  });

  test("peek changes nothing; reset, isIdle and clone", () => {
    const clock = manualClock();
    const bucket = new LeakyBucket({ capacity: 4, leakPerSecond: 2, clock });
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.peek(4)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 2000 });
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.consume(3)).toMatchObject({ remaining: 1, resetAfterMs: 1500 });
    const copy = bucket.clone();
    expect(copy).toMatchObject({ capacity: 4, leakPerSecond: 2, clock });
    expect(copy.isIdle()).toBe(true);
    clock.set(1499);
    expect(bucket.isIdle()).toBe(false);
    clock.set(1500);
    expect(bucket.isIdle()).toBe(true);
    bucket.consume(4);
    bucket.reset();
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.consume(4).allowed).toBe(true);
  });
});

describe("LeakyBucket wait", () => {
  // Shaping (docs/waiting.md#what-waiting-means-per-algorithm): a request waits for the
  // water ahead of it to drain; when it does not fit (level + cost > capacity) the queue is
  // full and it is refused. (This test used to
  // expect a plain meter wait, with "exceeds limit" in the message.)
  test("resolves once the water ahead has drained; refuses a full queue and a cost above capacity", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      vi.setSystemTime(0);
      const bucket = new LeakyBucket({ capacity: 2, leakPerSecond: 4, clock: () => Date.now() });
      bucket.consume(1);
      await expect(bucket.wait(3)).rejects.toThrow(
        new RangeError("LeakyBucket.wait: cost 3 exceeds capacity 2"),
      );
      await expect(bucket.wait(1, { maxWaitMs: 249 })).rejects.toBeInstanceOf(RateLimitError);
      const granted = bucket.wait(1); // one unit ahead: 250 ms
      await expect(bucket.wait(1), "level 2: the queue is full").rejects.toBeInstanceOf(
        RateLimitError,
      );
      await vi.advanceTimersByTimeAsync(249);
      expect(bucket.peek().allowed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await expect(granted).resolves.toMatchObject({ allowed: true, remaining: 1 });
      // A pending waiter keeps the limiter busy even when its state is reset to fresh.
      const pending = bucket.wait(1);
      bucket.reset();
      expect(bucket.isIdle()).toBe(false);
      await vi.advanceTimersByTimeAsync(10_000);
      await expect(pending).resolves.toMatchObject({ allowed: true });
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("LeakyBucket validation", () => {
  const base = { capacity: 1, leakPerSecond: 1 };
  const gt0 = "must be a finite number > 0, got";
  const ge0 = "must be a finite number >= 0, got";
  test.each([
    {
      name: "no options",
      options: undefined,
      error: TypeError,
      message:
        "options must be an object, got undefined; for example: new LeakyBucket({ capacity: 10, leakPerSecond: 5 })",
    },
    {
      name: "null options",
      options: null,
      error: TypeError,
      message:
        "options must be an object, got null; for example: new LeakyBucket({ capacity: 10, leakPerSecond: 5 })",
    },
    {
      name: "capacity missing",
      options: { leakPerSecond: 1 },
      error: TypeError,
      message: `missing option "capacity"; for example: new LeakyBucket({ capacity: 10, leakPerSecond: 5 })`,
    },
    {
      name: "capacity string",
      options: { ...base, capacity: "10" },
      error: TypeError,
      message: `capacity ${gt0} "10" (string)`,
    },
    {
      name: "capacity 0",
      options: { ...base, capacity: 0 },
      error: RangeError,
      message: `capacity ${gt0} 0`,
    },
    {
      name: "capacity negative",
      options: { ...base, capacity: -1 },
      error: RangeError,
      message: `capacity ${gt0} -1`,
    },
    {
      name: "capacity NaN",
      options: { ...base, capacity: Number.NaN },
      error: RangeError,
      message: `capacity ${gt0} NaN`,
    },
    {
      name: "capacity Infinity",
      options: { ...base, capacity: INF },
      error: RangeError,
      message: `capacity ${gt0} Infinity`,
    },
    {
      name: "leakPerSecond missing",
      options: { capacity: 1 },
      error: TypeError,
      message: `missing option "leakPerSecond"; for example: new LeakyBucket({ capacity: 10, leakPerSecond: 5 })`,
    },
    {
      name: "leakPerSecond string",
      options: { ...base, leakPerSecond: "1/s" },
      error: TypeError,
      message: `leakPerSecond ${ge0} "1/s" (string)`,
    },
    {
      name: "leakPerSecond negative",
      options: { ...base, leakPerSecond: -0.5 },
      error: RangeError,
      message: `leakPerSecond ${ge0} -0.5`,
    },
    {
      name: "leakPerSecond NaN",
      options: { ...base, leakPerSecond: Number.NaN },
      error: RangeError,
      message: `leakPerSecond ${ge0} NaN`,
    },
    {
      name: "leakPerSecond Infinity",
      options: { ...base, leakPerSecond: INF },
      error: RangeError,
      message: `leakPerSecond ${ge0} Infinity`,
    },
    {
      name: "clock not a function",
      options: { ...base, clock: 5 },
      error: TypeError,
      message: "clock must be a function returning milliseconds, got 5",
    },
    {
      name: "first problem wins",
      options: { capacity: 0, leakPerSecond: -1, clock: 1 },
      error: RangeError,
      message: `capacity ${gt0} 0`,
    },
    {
      name: "leakPerSecond before clock",
      options: { capacity: 1, leakPerSecond: -1, clock: 1 },
      error: RangeError,
      message: `leakPerSecond ${ge0} -1`,
    },
  ])("$name", ({ options, error, message }) => {
    const make = () => new LeakyBucket(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(new error(`LeakyBucket: ${message}`));
  });
});

describeSharedValidation(
  "LeakyBucket",
  (clock) => new LeakyBucket({ capacity: 1, leakPerSecond: 1, clock }),
);

describe("LeakyBucket properties", () => {
  const params = fc.record({
    capacity: fc.oneof(
      fc.integer({ min: 1, max: 20 }),
      fc.double({ min: 0.1, max: 50, noNaN: true }),
    ),
    rate: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.double({ min: 0, max: 100, noNaN: true })),
  });
  const calls = fc.array(
    fc.record({
      dt: fc.oneof(
        fc.integer({ min: -300, max: 800 }),
        fc.double({ min: 0, max: 800, noNaN: true }),
      ),
      cost: fc.oneof(fc.integer({ min: 0, max: 25 }), fc.double({ min: 0, max: 25, noNaN: true })),
      op: fc.constantFrom("consume", "peek", "allow"),
    }),
    { maxLength: 100 },
  );

  test("the meter decides exactly as a TokenBucket of the same capacity and rate", () => {
    fc.assert(
      fc.property(params, calls, ({ capacity, rate }, timeline) => {
        const clock = manualClock(1000);
        const leaky = new LeakyBucket({ capacity, leakPerSecond: rate, clock });
        const token = new TokenBucket({ capacity, refillPerSecond: rate, clock });
        timeline.forEach(({ dt, cost, op }, i) => {
          clock.advance(dt);
          const where = `call ${i}: ${op}(${cost}) at ${clock()} ms`;
          if (op === "allow") expect(leaky.allow(cost), where).toBe(token.allow(cost));
          else expect(leaky[op](cost), where).toEqual(token[op](cost));
          expect(leaky.isIdle(), where).toBe(token.isIdle());
        });
      }),
    );
  });

  test("peek answers what consume then does", () => {
    fc.assert(
      fc.property(params, timeline, ({ capacity, rate }, calls) => {
        expectPeekPredictsConsume(
          (clock) => new LeakyBucket({ capacity, leakPerSecond: rate, clock }),
          calls,
        );
      }),
    );
  });

  test("a denied call leaves peek unchanged", () => {
    fc.assert(
      fc.property(params, timeline, ({ capacity, rate }, calls) => {
        expectDenialChangesNothing(
          (clock) => new LeakyBucket({ capacity, leakPerSecond: rate, clock }),
          calls,
        );
      }),
    );
  });
});

describe("LeakyBucket shaping (reserve)", () => {
  test("the reserve doc example: 0, 200, 400 ms", () => {
    const shaper = new LeakyBucket({ capacity: 10, leakPerSecond: 5, clock: manualClock() });
    expect([shaper.reserve(), shaper.reserve(), shaper.reserve()].map((r) => r.delayMs)).toEqual([
      0, 200, 400,
    ]);
  });

  test("delays are the level before each request; a full queue is refused", () => {
    const clock = manualClock();
    const shaper = new LeakyBucket({ capacity: 4, leakPerSecond: 10, clock });
    // Each row: atMs, cost, ok, delayMs.
    const steps = [
      [0, 1, true, 0], // empty: leaves at once
      [0, 2, true, 100], // one unit ahead
      [0, 1, true, 300],
      [0, 1, false, Number.POSITIVE_INFINITY], // level 4: full
      [50, 1, false, Number.POSITIVE_INFINITY], // 3.5 + 1 > 4
      [100, 1, true, 300], // level 3 ahead of it
      [100, 0, true, 400], // a free probe still waits its turn in the outflow
    ] as const;
    steps.forEach(([atMs, cost, ok, delayMs], i) => {
      clock.set(atMs);
      expect(shaper.reserve(cost), `step ${i}`).toMatchObject({ ok, delayMs });
    });
  });

  for (const leakPerSecond of [30, 60, 100]) {
    for (const order of ["reverse", "forward"] as const) {
      test(`cancel restores the level exactly at ${leakPerSecond}/s, ${order} order`, () => {
        const clock = manualClock();
        const shaper = new LeakyBucket({ capacity: 10, leakPerSecond, clock });
        const twin = new LeakyBucket({ capacity: 10, leakPerSecond, clock });
        shaper.consume(2);
        twin.consume(2);
        const reservations = [1, 3, 2, 1].map((c) => shaper.reserve(c));
        expect(reservations.every((r) => r.ok && r.delayMs > 0)).toBe(true);
        clock.set(5); // before the first one leaves (2 units ahead: 20 ms at 100/s)
        const list = order === "reverse" ? [...reservations].reverse() : reservations;
        for (const r of list) r.cancel();
        for (const cost of [0, 1, 8, 9]) {
          expect(shaper.peek(cost), `cost ${cost}`).toEqual(twin.peek(cost));
        }
      });
    }
  }

  test("a cancel in the middle keeps the water later reservations count on", () => {
    const clock = manualClock();
    const shaper = new LeakyBucket({ capacity: 5, leakPerSecond: 10, clock });
    shaper.reserve(1); // leaves at once
    const middle = shaper.reserve(1); // at 100 ms
    const last = shaper.reserve(1); // at 200 ms, behind middle's water
    expect([middle.delayMs, last.delayMs]).toEqual([100, 200]);
    middle.cancel(); // last still leaves at 200 ms: its slot must stay taken
    expect(shaper.reserve(1).delayMs, "not 200: that would leave together with last").toBe(300);
  });

  test("a maxWaitMs above the delay is refused and admits nothing", () => {
    const clock = manualClock();
    const shaper = new LeakyBucket({ capacity: 4, leakPerSecond: 10, clock });
    shaper.consume(2);
    expect(shaper.reserve(1, { maxWaitMs: 199 }).ok).toBe(false);
    expect(shaper.peek(0)).toMatchObject({ remaining: 2, resetAfterMs: 200 });
    expect(shaper.reserve(1, { maxWaitMs: 200 })).toMatchObject({ ok: true, delayMs: 200 });
  });

  test("a leak of 0 with water ahead can never shape: refused", async () => {
    const shaper = new LeakyBucket({ capacity: 4, leakPerSecond: 0, clock: manualClock() });
    expect(shaper.reserve(1)).toMatchObject({ ok: true, delayMs: 0 });
    expect(shaper.reserve(1).ok).toBe(false);
    const never = shaper.wait(1);
    await expect(never).rejects.toBeInstanceOf(RateLimitError);
    await expect(never).rejects.toThrow(
      "LeakyBucket.wait: cost 1 can never be granted (a rate of 0)",
    );
  });
});
