import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { manualClock } from "../support/manual-clock.js";
import { settleLog, timerClock } from "../support/timer-clock.js";

type Step = readonly [
  atMs: number,
  cost: number,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
];

function run(
  options: { capacity: number; refillPerSecond: number },
  steps: readonly Step[],
  startMs = 0,
) {
  const clock = manualClock(startMs);
  const bucket = new TokenBucket({ ...options, clock });
  steps.forEach(([atMs, cost, allowed, remaining, retryAfterMs], i) => {
    clock.set(atMs);
    expect(bucket.consume(cost), `step ${i} at ${atMs} ms, cost ${cost}`).toMatchObject({
      allowed,
      remaining,
      retryAfterMs,
    });
  });
  return { bucket, clock };
}

describe("TokenBucket step tables", () => {
  test("basic refill", () => {
    // capacity 3, 10/s: one token per 100 ms.
    run({ capacity: 3, refillPerSecond: 10 }, [
      [0, 1, true, 2, 0],
      [0, 1, true, 1, 0],
      [0, 1, true, 0, 0],
      [0, 1, false, 0, 100],
      [50, 1, false, 0, 50],
      [100, 1, true, 0, 0],
      [400, 3, true, 0, 0],
      [1000, 0, true, 3, 0],
    ]);
  });

  test("cost above capacity is denied with Infinity and takes nothing", () => {
    const { bucket } = run({ capacity: 3, refillPerSecond: 10 }, [
      [0, 5, false, 3, Number.POSITIVE_INFINITY],
      [0, 3.0000001, false, 3, Number.POSITIVE_INFINITY],
      [0, 3, true, 0, 0],
    ]);
    expect(bucket.peek(4).retryAfterMs).toBe(Number.POSITIVE_INFINITY);
  });

  test("a clock going backwards adds nothing and counts from the latest reading", () => {
    const { bucket, clock } = run({ capacity: 2, refillPerSecond: 1 }, [
      [1000, 2, true, 0, 0],
      [500, 1, false, 0, 1000], // time stands still at 1000: a full second still to wait
      [0, 1, false, 0, 1000],
      [1500, 1, false, 0, 500],
      [1200, 1, false, 0, 500], // still counted from 1500, the latest reading
      [2000, 1, true, 0, 0],
    ]);
    clock.set(-5000);
    expect(bucket.peek(1)).toMatchObject({ allowed: false, retryAfterMs: 1000 });
  });

  test("a denied request at an earlier time changes nothing", () => {
    const { bucket, clock } = run({ capacity: 1, refillPerSecond: 2 }, [
      [0, 1, true, 0, 0],
      [100, 1, false, 0, 400],
    ]);
    clock.set(50);
    const before = bucket.peek(1);
    expect(bucket.consume(1)).toEqual(before);
    expect(bucket.peek(1)).toEqual(before);
    clock.set(500);
    expect(bucket.consume(1).allowed).toBe(true);
  });

  test("300 admissions in 3 s at 100/s, checked every 1 ms", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 100, clock });
    const admitted: number[] = [];
    for (let t = 0; t < 3000; t++) {
      clock.set(t);
      if (bucket.allow()) admitted.push(t);
    }
    expect(admitted.length).toBe(300);
    expect(admitted.every((t, i) => t === i * 10)).toBe(true);
  });

  test("5 admissions after an idle of 1e9 ms", () => {
    run({ capacity: 5, refillPerSecond: 1 }, [
      [0, 5, true, 0, 0],
      [1e9, 1, true, 4, 0],
      [1e9, 1, true, 3, 0],
      [1e9, 1, true, 2, 0],
      [1e9, 1, true, 1, 0],
      [1e9, 1, true, 0, 0],
      [1e9, 1, false, 0, 1000],
    ]);
  });

  test("a refill rate of 0 is a fixed quota", () => {
    const { bucket } = run({ capacity: 2, refillPerSecond: 0 }, [
      [0, 1, true, 1, 0],
      [1e12, 1, true, 0, 0],
      [2e12, 1, false, 0, Number.POSITIVE_INFINITY],
      [3e12, 0, true, 0, 0],
    ]);
    expect(bucket.peek().resetAfterMs).toBe(Number.POSITIVE_INFINITY);
    bucket.reset();
    expect(bucket.peek(0)).toMatchObject({ allowed: true, remaining: 2, resetAfterMs: 0 });
    expect(bucket.peek()).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: Infinity });
  });

  test("a tiny rate of 1e-10 per second", () => {
    run({ capacity: 1, refillPerSecond: 1e-10 }, [
      [0, 1, true, 0, 0],
      [0, 1, false, 0, 1e13],
      [5e12, 1, false, 0, 5e12],
      [1e13, 1, true, 0, 0],
    ]);
  });

  test("capacity 1e15 at 1e12 per second", () => {
    run({ capacity: 1e15, refillPerSecond: 1e12 }, [
      [0, 1e15, true, 0, 0],
      [1, 1e9, true, 0, 0],
      [1, 1, false, 0, 1e-9],
      [2, 1e15, false, 1e9, 999_999],
      [1_000_001, 1e15, true, 0, 0],
    ]);
  });

  test("clock values near Number.MAX_SAFE_INTEGER", () => {
    const start = Number.MAX_SAFE_INTEGER - 10_000;
    const { bucket } = run(
      { capacity: 10, refillPerSecond: 1000 },
      [
        [start, 10, true, 0, 0],
        [start, 1, false, 0, 1],
        [start + 5, 5, true, 0, 0],
        [start + 5, 1, false, 0, 1],
        [start + 9999, 10, true, 0, 0],
      ],
      start,
    );
    const d = bucket.peek(1);
    expect(Number.isNaN(d.retryAfterMs) || d.remaining < 0).toBe(false);
    expect(d.resetAfterMs).toBe(10);
  });

  test("fractional costs", () => {
    run({ capacity: 1, refillPerSecond: 1 }, [
      [0, 0.25, true, 0, 0],
      [0, 0.25, true, 0, 0],
      [0, 0.25, true, 0, 0],
      [0, 0.25, true, 0, 0],
      [0, 0.25, false, 0, 250],
      [250, 0.5, false, 0, 250],
      [500, 0.5, true, 0, 0],
    ]);
  });

  test("retry is exactly 1000 ms where naive float math gives 1000.0000000000001", () => {
    // (0.7 * 1000) / 0.7 === 1000.0000000000001: a naive ceil would say 1001.
    const { bucket, clock } = run({ capacity: 0.7, refillPerSecond: 0.7 }, [
      [0, 0.7, true, 0, 0],
      [0, 0.7, false, 0, 1000],
    ]);
    clock.set(1000);
    expect(bucket.allow(0.7)).toBe(true);
  });

  test("a request at the exact instant it fits is allowed", () => {
    // 1 token per 300 ms at 10/3 per second: 300 * (10/3) / 1000 is 0.9999999999999999.
    const { bucket, clock } = run({ capacity: 1, refillPerSecond: 10 / 3 }, [[0, 1, true, 0, 0]]);
    const retry = bucket.peek().retryAfterMs;
    clock.set(retry);
    expect(bucket.allow()).toBe(true);
  });

  test("resetAfterMs counts until full; isIdle only when full", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 2, clock });
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.consume(3)).toMatchObject({ remaining: 1, resetAfterMs: 1500 });
    expect(bucket.isIdle()).toBe(false);
    clock.set(1499);
    expect(bucket.isIdle()).toBe(false);
    clock.set(1500);
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.peek()).toMatchObject({ allowed: true, remaining: 3, resetAfterMs: 500 });
  });

  test("reset refills the bucket", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    bucket.consume(2);
    bucket.reset();
    expect(bucket.isIdle()).toBe(true);
    expect(bucket.consume(2)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("clone copies the options, not the state", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    bucket.consume(2);
    const copy = bucket.clone();
    expect(copy).toMatchObject({ capacity: 2, refillPerSecond: 1, clock });
    expect(copy.consume(2).allowed).toBe(true);
  });

  test("allow and consume agree", () => {
    const clock = manualClock();
    const a = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    const b = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    for (let t = 0; t < 5000; t += 250) {
      clock.set(t);
      expect(a.allow(0.75), `at ${t}`).toBe(b.consume(0.75).allowed);
    }
  });
});

describe("TokenBucket validation", () => {
  const base = { capacity: 1, refillPerSecond: 1 };
  test.each([
    {
      name: "no options",
      options: undefined,
      error: TypeError,
      message:
        "TokenBucket: options must be an object, got undefined; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
    },
    {
      name: "null options",
      options: null,
      error: TypeError,
      message:
        "TokenBucket: options must be an object, got null; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
    },
    {
      name: "capacity missing",
      options: { refillPerSecond: 1 },
      error: TypeError,
      message:
        'TokenBucket: missing option "capacity"; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })',
    },
    {
      name: "capacity string",
      options: { ...base, capacity: "10" },
      error: TypeError,
      message: 'TokenBucket: capacity must be a finite number > 0, got "10" (string)',
    },
    {
      name: "capacity 0",
      options: { ...base, capacity: 0 },
      error: RangeError,
      message: "TokenBucket: capacity must be a finite number > 0, got 0",
    },
    {
      name: "capacity negative",
      options: { ...base, capacity: -1 },
      error: RangeError,
      message: "TokenBucket: capacity must be a finite number > 0, got -1",
    },
    {
      name: "capacity NaN",
      options: { ...base, capacity: Number.NaN },
      error: RangeError,
      message: "TokenBucket: capacity must be a finite number > 0, got NaN",
    },
    {
      name: "capacity Infinity",
      options: { ...base, capacity: Number.POSITIVE_INFINITY },
      error: RangeError,
      message: "TokenBucket: capacity must be a finite number > 0, got Infinity",
    },
    {
      name: "refillPerSecond missing",
      options: { capacity: 1 },
      error: TypeError,
      message:
        'TokenBucket: missing option "refillPerSecond"; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })',
    },
    {
      name: "refillPerSecond negative",
      options: { ...base, refillPerSecond: -0.5 },
      error: RangeError,
      message: "TokenBucket: refillPerSecond must be a finite number >= 0, got -0.5",
    },
    {
      name: "refillPerSecond Infinity",
      options: { ...base, refillPerSecond: Number.POSITIVE_INFINITY },
      error: RangeError,
      message: "TokenBucket: refillPerSecond must be a finite number >= 0, got Infinity",
    },
    {
      name: "clock not a function",
      options: { ...base, clock: 5 },
      error: TypeError,
      message: "TokenBucket: clock must be a function returning milliseconds, got 5",
    },
    {
      name: "first problem wins",
      options: { capacity: 0, refillPerSecond: -1 },
      error: RangeError,
      message: "TokenBucket: capacity must be a finite number > 0, got 0",
    },
  ])("$name", ({ options, error, message }) => {
    const make = () => new TokenBucket(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });

  const bucket = new TokenBucket({ ...base, clock: () => 0 });
  test.each([
    {
      name: "string cost",
      cost: "1",
      error: TypeError,
      message: 'TokenBucket: cost must be a finite number >= 0, got "1" (string)',
    },
    {
      name: "null cost",
      cost: null,
      error: TypeError,
      message: "TokenBucket: cost must be a finite number >= 0, got null",
    },
    {
      name: "NaN cost",
      cost: Number.NaN,
      error: RangeError,
      message: "TokenBucket: cost must be a finite number >= 0, got NaN",
    },
    {
      name: "negative cost",
      cost: -1,
      error: RangeError,
      message: "TokenBucket: cost must be a finite number >= 0, got -1",
    },
    {
      name: "infinite cost",
      cost: Number.POSITIVE_INFINITY,
      error: RangeError,
      message: "TokenBucket: cost must be a finite number >= 0, got Infinity",
    },
  ])("$name", ({ cost, error, message }) => {
    for (const method of ["allow", "consume", "peek"] as const) {
      const call = () => bucket[method](cost as never);
      expect(call, method).toThrow(error);
      expect(call, method).toThrow(message);
    }
    expect(bucket.isIdle()).toBe(true);
  });

  test.each([
    {
      name: "NaN reading",
      reading: Number.NaN,
      error: RangeError,
      message: "TokenBucket: clock must return a finite number of milliseconds, got NaN",
    },
    {
      name: "string reading",
      reading: "5",
      error: TypeError,
      message: 'TokenBucket: clock must return a finite number of milliseconds, got "5" (string)',
    },
    {
      name: "infinite reading",
      reading: Number.POSITIVE_INFINITY,
      error: RangeError,
      message: "TokenBucket: clock must return a finite number of milliseconds, got Infinity",
    },
  ])("a clock returning a $name is an error, not a NaN decision", ({ reading, error, message }) => {
    const b = new TokenBucket({ ...base, clock: () => reading as number });
    expect(() => b.consume()).toThrow(error);
    expect(() => b.allow()).toThrow(message);
  });
});

/** The reference model: docs/semantics.md#the-algorithms's formula, step by step, plainly. */
function model(capacity: number, rate: number) {
  let tokens = capacity;
  let last = 0;
  return (t: number, cost: number) => {
    if (t > last) {
      tokens = Math.min(capacity, tokens + ((t - last) * rate) / 1000);
      last = t;
    }
    const allowed = cost <= tokens + 1e-9 * Math.max(1, cost);
    if (allowed) tokens = Math.max(0, tokens - cost);
    return { allowed, remaining: Math.max(0, Math.floor(tokens + 1e-9)) };
  };
}

describe("TokenBucket properties", () => {
  const params = fc.record({
    capacity: fc.integer({ min: 1, max: 20 }),
    rate: fc.integer({ min: 0, max: 50 }),
  });
  const steps = fc.array(
    fc.record({ dt: fc.integer({ min: 0, max: 500 }), cost: fc.integer({ min: 0, max: 25 }) }),
    { maxLength: 80 },
  );

  test("decides as the reference model for any timeline", () => {
    fc.assert(
      fc.property(params, steps, ({ capacity, rate }, timeline) => {
        const clock = manualClock();
        const bucket = new TokenBucket({ capacity, refillPerSecond: rate, clock });
        const ref = model(capacity, rate);
        for (const { dt, cost } of timeline) {
          clock.advance(dt);
          const d = bucket.consume(cost);
          const m = ref(clock(), cost);
          expect({ allowed: d.allowed, remaining: d.remaining }).toEqual(m);
        }
      }),
    );
  });

  test("allowed cost over any interval d stays within capacity + rate*d/1000", () => {
    fc.assert(
      fc.property(params, steps, ({ capacity, rate }, timeline) => {
        const clock = manualClock();
        const bucket = new TokenBucket({ capacity, refillPerSecond: rate, clock });
        const log: [number, number][] = [];
        for (const { dt, cost } of timeline) {
          clock.advance(dt);
          if (bucket.allow(cost)) log.push([clock(), cost]);
        }
        for (let i = 0; i < log.length; i++) {
          let sum = 0;
          for (let j = i; j < log.length; j++) {
            sum += log[j]![1];
            const d = log[j]![0] - log[i]![0];
            expect(sum).toBeLessThanOrEqual(capacity + (rate * d) / 1000 + 1e-6);
          }
        }
      }),
    );
  });

  test("a denied call leaves peek unchanged", () => {
    fc.assert(
      fc.property(params, steps, ({ capacity, rate }, timeline) => {
        const clock = manualClock();
        const bucket = new TokenBucket({ capacity, refillPerSecond: rate, clock });
        for (const { dt, cost } of timeline) {
          clock.advance(dt);
          const before = bucket.peek(1);
          if (!bucket.consume(cost).allowed) expect(bucket.peek(1)).toEqual(before);
        }
      }),
    );
  });

  test("a clock going backwards never adds tokens", () => {
    fc.assert(
      fc.property(
        params,
        fc.array(fc.integer({ min: -1000, max: 1000 }), { maxLength: 60 }),
        ({ capacity, rate }, moves) => {
          const clock = manualClock(5000);
          const bucket = new TokenBucket({ capacity, refillPerSecond: rate, clock });
          bucket.consume(capacity);
          for (const move of moves) {
            const before = bucket.peek(0).remaining;
            clock.advance(move);
            const after = bucket.peek(0).remaining;
            if (move <= 0) expect(after).toBe(before);
            else expect(after).toBeGreaterThanOrEqual(before);
          }
        },
      ),
    );
  });
});

describe("TokenBucket reserve doc example", () => {
  test("reserve: 0 ms, then 100 ms in debt; cancel gives the token back", () => {
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 10, clock: manualClock() });
    expect(bucket.reserve().delayMs).toBe(0);
    const r = bucket.reserve();
    expect(r.delayMs).toBe(100);
    r.cancel();
    expect(bucket.peek()).toMatchObject({ allowed: false, retryAfterMs: 100 });
  });
});

describe("TokenBucket regressions", () => {
  test("a spent reservation kept the bucket busy: isIdle was false after its time had come", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 10, clock });
    bucket.consume(1);
    expect(bucket.reserve(1).delayMs).toBe(100);
    clock.set(200); // the reservation acted at 100 ms; the bucket is full again at 200 ms
    expect(bucket.isIdle()).toBe(true);
  });

  test("reserve at a rate of 0 answered ok: true with delayMs Infinity", () => {
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 0, clock: manualClock() });
    bucket.consume(1);
    expect(bucket.reserve(1)).toMatchObject({ ok: false, delayMs: Number.POSITIVE_INFINITY });
    expect(bucket.peek(0)).toMatchObject({ remaining: 0, resetAfterMs: Number.POSITIVE_INFINITY });
  });

  test("retryAfterMs for a capacity of 1e306 overflowed to Infinity (missing * 1000)", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 1e306, refillPerSecond: 1000, clock });
    bucket.consume(1e306);
    expect(bucket.peek(1e306)).toMatchObject({ allowed: false, retryAfterMs: 1e306 });
    expect(bucket.reserve(1e306)).toMatchObject({ ok: true, delayMs: 1e306 });
  });
});

describe("TokenBucket debt (reserve and wait)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test("while reservations hold debt, consume is denied and retryAfterMs counts the debt", () => {
    // capacity 3, 10/s: one token per 100 ms. Each row: atMs, action, expected.
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 10, clock });
    const steps: readonly (readonly [number, () => unknown, unknown])[] = [
      [0, () => bucket.reserve(3).delayMs, 0],
      [0, () => bucket.reserve(2).delayMs, 200], // debt 2
      [
        0,
        () => bucket.consume(1),
        { allowed: false, remaining: 0, retryAfterMs: 300, resetAfterMs: 500 },
      ],
      [0, () => bucket.reserve(1).delayMs, 300], // debt 3, behind the first
      [150, () => bucket.allow(1), false],
      [150, () => bucket.isIdle(), false],
      [300, () => bucket.consume(1), { allowed: false, retryAfterMs: 100 }], // all repaid at 300
      [400, () => bucket.consume(1), { allowed: true, remaining: 0 }],
      [700, () => bucket.isIdle(), true],
    ];
    steps.forEach(([atMs, act, expected], i) => {
      clock.set(atMs);
      const got = act();
      if (typeof expected === "object") expect(got, `step ${i}`).toMatchObject(expected as object);
      else expect(got, `step ${i}`).toBe(expected);
    });
  });

  test("a free probe (cost 0) is allowed in debt, and says how long until full", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 10, clock });
    bucket.consume(2);
    bucket.reserve(1);
    expect(bucket.allow(0)).toBe(true);
    expect(bucket.consume(0)).toEqual({
      allowed: true,
      limit: 2,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 300,
    });
    expect(bucket.peek(0)).toEqual(bucket.consume(0));
  });

  test("reset keeps pending waiters in their place; the full bucket pays their debt first", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    bucket.consume(2);
    const { log, track } = settleLog(clock);
    const waits = [track("a", bucket.wait(2)), track("b", bucket.wait(1))]; // at 2 s and 3 s
    await advance(500);
    bucket.reset(); // 2 fresh tokens: a's debt is paid now, b's 1 token is still owed
    expect(bucket.isIdle()).toBe(false);
    await advance(0);
    expect(log).toEqual(["a@500"]);
    await advance(1000);
    await Promise.all(waits);
    expect(log).toEqual(["a@500", "b@1500"]);
  });

  test("an aborted waiter keeps the tokens a later reservation counts on until it is cancelled", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 1, clock });
    bucket.consume(4);
    const controller = new AbortController();
    const { log, track } = settleLog(clock);
    const waiting = track("w", bucket.wait(3, { signal: controller.signal })); // at 3 s
    const r = bucket.reserve(1); // at 4 s: counts on one of w's tokens
    expect(r.delayMs).toBe(4000);
    controller.abort("no");
    await waiting;
    expect(log).toEqual(["w!no@0"]);
    // None of w's 3 tokens came back: r acts at 4 s, its time fixed counting them.
    expect(bucket.peek(1).retryAfterMs).toBe(5000);
    r.cancel(); // r is last now: its token and the kept ones come back
    expect(bucket.peek(0)).toMatchObject({ remaining: 0, resetAfterMs: 4000 });
    await advance(4000);
    expect(bucket.isIdle()).toBe(true);
  });

  test("a waiter resolves with the decision at the time it is granted", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 2, clock });
    bucket.consume(4);
    const granted = bucket.wait(3);
    await advance(1500);
    await expect(granted).resolves.toEqual({
      allowed: true,
      limit: 4,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 2000,
    });
  });
});
