import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import { RateLimitError } from "../src/core/errors.js";
import type { Clock, Decision, Limiter } from "../src/core/limiter.js";
import { cleanMs } from "../src/core/numeric.js";
import { MAX_TIMER_MS, timerDelay, WaitQueue } from "../src/core/wait.js";
import { manualClock } from "./support/manual-clock.js";
import { settleLog, timerClock } from "./support/timer-clock.js";

const DAY_MS = 86_400_000;

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** Every limiter kind, empty of free units at time 0, refilling one unit per second. */
const drained: { name: string; make: (clock: Clock) => Limiter; unitMs: number }[] = [
  {
    name: "TokenBucket",
    make: (clock) => {
      const b = new TokenBucket({ capacity: 5, refillPerSecond: 1, clock });
      b.consume(5);
      return b;
    },
    unitMs: 1000,
  },
  {
    name: "LeakyBucket",
    make: (clock) => {
      // Shaping: a request waits for the water ahead of it; 5 units are in the bucket.
      const b = new LeakyBucket({ capacity: 20, leakPerSecond: 1, clock });
      b.consume(5);
      return b;
    },
    unitMs: 1000,
  },
];

describe("timerDelay", () => {
  test.each([
    { name: "0 fires after 1 ms", ms: 0, delay: 1 },
    { name: "a fraction rounds up, never early", ms: 33.34, delay: 34 },
    { name: "an exact ms stays", ms: 250, delay: 250 },
    { name: "2^31 - 1 is the largest piece", ms: 2 ** 31 - 1, delay: MAX_TIMER_MS },
    { name: "30 days is cut to one piece", ms: 30 * DAY_MS, delay: MAX_TIMER_MS },
    { name: "Infinity is cut to one piece", ms: Number.POSITIVE_INFINITY, delay: MAX_TIMER_MS },
  ])("$name", ({ ms, delay }) => {
    expect(timerDelay(ms)).toBe(delay);
  });
});

describe.each(drained)("$name wait", ({ make, unitMs }) => {
  test("first-in, first-out with costs 3, 1, 1: each starts when those ahead are done", async () => {
    const { clock, advance } = timerClock();
    const limiter = make(clock);
    const { log, track } = settleLog(clock);
    const all = Promise.all([
      track("3", limiter.wait(3)),
      track("1a", limiter.wait(1)),
      track("1b", limiter.wait(1)),
    ]);
    await advance(10 * unitMs);
    await all;
    // Token bucket: when the debt up to and including each is repaid (3, 4, 5 s).
    // Leaky bucket: when the water ahead of each has drained (5, 8, 9 s).
    const leaky = limiter instanceof LeakyBucket;
    expect(log).toEqual(
      leaky
        ? [`3@${5 * unitMs}`, `1a@${8 * unitMs}`, `1b@${9 * unitMs}`]
        : [`3@${3 * unitMs}`, `1a@${4 * unitMs}`, `1b@${5 * unitMs}`],
    );
  });

  test("a large cost behind small ones is not starved by later small requests", async () => {
    const { clock, advance } = timerClock();
    const limiter = make(clock);
    const { log, track } = settleLog(clock);
    const waits = [track("small", limiter.wait(1)), track("big", limiter.wait(5))];
    // Plain requests keep trying every 100 ms: all denied while anyone waits.
    let overtook = 0;
    for (let t = 0; t < 20 * unitMs; t += 100) {
      if (log.length === 2) break;
      if (limiter.allow(1)) overtook++;
      await advance(100);
    }
    await Promise.all(waits);
    expect(overtook, "no plain request overtook a waiter").toBe(0);
    expect(log.map((l) => l.split("@")[0])).toEqual(["small", "big"]);
  });

  test("an abort in the middle gives its units back; the next is served earlier", async () => {
    const { clock, advance } = timerClock();
    const limiter = make(clock);
    const { log, track } = settleLog(clock);
    const controller = new AbortController();
    const waits = [
      track("a", limiter.wait(1)),
      track("b", limiter.wait(2, { signal: controller.signal })),
      track("c", limiter.wait(1)),
    ];
    await advance(unitMs / 2);
    controller.abort(new Error("gave up"));
    await advance(20 * unitMs);
    await Promise.all(waits);
    const leaky = limiter instanceof LeakyBucket;
    // Without the abort c would be served at 4 s (token) or 8 s (leaky).
    expect(log).toEqual(
      leaky
        ? [`b!Error@${unitMs / 2}`, `a@${5 * unitMs}`, `c@${6 * unitMs}`]
        : [`b!Error@${unitMs / 2}`, `a@${unitMs}`, `c@${2 * unitMs}`],
    );
  });

  test("a maxWaitMs refusal takes nothing and leaves no waiter", async () => {
    const { clock } = timerClock();
    const limiter = make(clock);
    const before = limiter.peek(1);
    const refused = limiter.wait(2, { maxWaitMs: 1 });
    await expect(refused).rejects.toBeInstanceOf(RateLimitError);
    await expect(refused).rejects.toMatchObject({
      name: "RateLimitError",
      decision: { allowed: false },
    });
    expect(limiter.peek(1)).toEqual(before);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a cost above capacity rejects at once, leaving no waiter", async () => {
    const { clock } = timerClock();
    const limiter = make(clock);
    const before = limiter.peek(1);
    const kind = limiter instanceof LeakyBucket ? "LeakyBucket" : "TokenBucket";
    const cap = limiter.peek(0).limit;
    await expect(limiter.wait(cap + 2)).rejects.toThrow(
      new RangeError(`${kind}.wait: cost ${cap + 2} exceeds capacity ${cap}`),
    );
    expect(limiter.peek(1)).toEqual(before);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("10,000 concurrent waiters use one timer and are served in order", async () => {
    const { clock, advance } = timerClock();
    const limiter = make(clock);
    const order: number[] = [];
    const waits: Promise<void>[] = [];
    // Costs small enough for the leaky bucket's queue (5 units free).
    const cost = 4 / 10_000;
    for (let i = 0; i < 10_000; i++) waits.push(limiter.wait(cost).then(() => void order.push(i)));
    expect(vi.getTimerCount()).toBe(1);
    await advance(20 * unitMs);
    await Promise.all(waits);
    expect(order).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("argument errors are rejections, never throws", () => {
  const makers = [
    { name: "TokenBucket", make: () => new TokenBucket({ capacity: 2, refillPerSecond: 1 }) },
    { name: "LeakyBucket", make: () => new LeakyBucket({ capacity: 2, leakPerSecond: 1 }) },
    { name: "FixedWindow", make: () => new FixedWindow({ limit: 2, windowMs: 1000 }) },
  ];
  const cases = [
    {
      what: "a string cost",
      args: ["1"],
      error: TypeError,
      message: 'cost must be a finite number >= 0, got "1" (string)',
    },
    {
      what: "a negative cost",
      args: [-1],
      error: RangeError,
      message: "cost must be a finite number >= 0, got -1",
    },
    {
      what: "an array as options",
      args: [1, []],
      error: TypeError,
      message: "options must be an object, got an array; for example: wait(1, { maxWaitMs: 100 })",
    },
    {
      what: "null options",
      args: [1, null],
      error: TypeError,
      message: "options must be an object, got null; for example: wait(1, { maxWaitMs: 100 })",
    },
    {
      what: "a bad signal",
      args: [1, { signal: 1 }],
      error: TypeError,
      message: "signal must be an AbortSignal, got 1",
    },
    {
      what: "a negative maxWaitMs",
      args: [1, { maxWaitMs: -1 }],
      error: RangeError,
      message: "maxWaitMs must be a finite number >= 0, got -1",
    },
    {
      what: "a NaN maxWaitMs",
      args: [1, { maxWaitMs: Number.NaN }],
      error: RangeError,
      message: "maxWaitMs must be a finite number >= 0, got NaN",
    },
  ];
  test.each(
    makers.flatMap((m) => cases.map((c) => ({ ...m, ...c, name: `${m.name}: ${c.what}` }))),
  )("$name", async ({ name, make, args, error, message }) => {
    const limiter = make();
    const where = name.split(":")[0];
    let promise: Promise<unknown> | undefined;
    expect(() => {
      promise = (limiter.wait as (...a: unknown[]) => Promise<unknown>)(...args);
    }).not.toThrow();
    await expect(promise).rejects.toThrow(new error(`${where}.wait: ${message}`));
    expect(limiter.isIdle()).toBe(true);
  });

  test.each(makers)(
    "$name: an aborted signal rejects with its reason, taking nothing",
    async ({ make }) => {
      const limiter = make();
      const reason = new Error("stop");
      await expect(limiter.wait(1, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      expect(limiter.isIdle()).toBe(true);
    },
  );
});

describe("waits that can never end", () => {
  test("a token bucket with a rate of 0 rejects with RateLimitError, taking nothing", async () => {
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 0, clock: manualClock() });
    bucket.consume(2);
    const never = bucket.wait(1);
    await expect(never).rejects.toThrow(
      new RateLimitError(
        "TokenBucket.wait: cost 1 can never be granted (a rate of 0)",
        bucket.peek(1),
      ),
    );
    await expect(never).rejects.toMatchObject({
      decision: { retryAfterMs: Number.POSITIVE_INFINITY },
    });
    expect(bucket.reserve(1)).toMatchObject({ ok: false, delayMs: Number.POSITIVE_INFINITY });
  });

  test("a leaky bucket with a full queue rejects with RateLimitError, taking nothing", async () => {
    const clock = manualClock();
    const bucket = new LeakyBucket({ capacity: 2, leakPerSecond: 4, clock });
    bucket.consume(2);
    await expect(bucket.wait(1)).rejects.toThrow(
      "LeakyBucket.wait: the queue is full: cost 1 does not fit in the 0 units free of capacity 2",
    );
    await expect(bucket.wait(1)).rejects.toMatchObject({ decision: { retryAfterMs: 250 } });
    expect(bucket.reserve(1).ok).toBe(false);
    clock.set(250);
    expect(bucket.reserve(1)).toMatchObject({ ok: true, delayMs: 250 });
  });
});

describe("timers longer than 2^31 - 1 ms", () => {
  test.each([
    {
      name: "TokenBucket",
      make: (clock: Clock) => {
        const b = new TokenBucket({ capacity: 1, refillPerSecond: 1 / (30 * 86_400), clock });
        b.consume(1);
        return b;
      },
    },
    {
      name: "FixedWindow",
      make: (clock: Clock) => {
        const w = new FixedWindow({ limit: 1, windowMs: 30 * DAY_MS, clock });
        w.consume(1);
        return w;
      },
    },
  ])(
    "$name: a 30-day wait is armed in pieces and resolves at exactly 30 days",
    async ({ make }) => {
      const { clock, advance } = timerClock();
      const spy = vi.spyOn(globalThis, "setTimeout");
      const limiter = make(clock);
      let doneAt: number | undefined;
      const waiting = limiter.wait(1).then(() => {
        doneAt = clock();
      });
      await advance(MAX_TIMER_MS);
      expect(doneAt, "not after the first piece").toBeUndefined();
      await advance(30 * DAY_MS - 1 - MAX_TIMER_MS);
      expect(doneAt, "not 1 ms early").toBeUndefined();
      await advance(1);
      await waiting;
      expect(doneAt).toBe(30 * DAY_MS);
      const delays = spy.mock.calls.map((c) => c[1] as number);
      expect(delays.every((d) => d >= 1 && d <= MAX_TIMER_MS)).toBe(true);
      expect(delays[0]).toBe(MAX_TIMER_MS);
    },
  );
});

describe("reserve and cancel restore the balance exactly", () => {
  for (const refillPerSecond of [30, 60, 100]) {
    for (const order of ["reverse", "forward"] as const) {
      test(`${refillPerSecond}/s, cancelled in ${order} order`, () => {
        const clock = manualClock();
        const bucket = new TokenBucket({ capacity: 3, refillPerSecond, clock });
        const twin = new TokenBucket({ capacity: 3, refillPerSecond, clock });
        bucket.consume(3);
        twin.consume(3);
        const costs = [1, 2, 1, 3];
        const reservations = costs.map((c) => bucket.reserve(c));
        // Each waits for the debt up to and including it: (1, 3, 4, 7) tokens.
        expect(reservations.map((r) => r.delayMs)).toEqual(
          [1, 3, 4, 7].map((n) => cleanMs((n * 1000) / refillPerSecond)),
        );
        clock.set(7); // before the first one's time (at 100/s: 10 ms)
        const list = order === "reverse" ? [...reservations].reverse() : reservations;
        for (const r of list) r.cancel();
        for (const cost of [0, 0.5, 1, 3]) {
          expect(bucket.peek(cost), `cost ${cost}`).toEqual(twin.peek(cost));
        }
        clock.set(1000);
        expect(bucket.isIdle()).toBe(twin.isIdle());
      });
    }
  }

  test("a cancel in the middle keeps what a later reservation's time to act counts on", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1, clock });
    bucket.consume(3);
    const a = bucket.reserve(3); // debt 3: at 3 s
    const b = bucket.reserve(1); // debt 4: at 4 s
    expect([a.delayMs, b.delayMs]).toEqual([3000, 4000]);
    a.cancel(); // b's time was fixed counting all 3: none come back while b is pending
    expect(bucket.peek(1).retryAfterMs, "debt 4, plus the cost").toBe(5000);
    b.cancel(); // b is last: its own and a's 3 come back
    expect(bucket.peek(1).retryAfterMs, "no debt: 1 token in 1 s").toBe(1000);
    expect(bucket.reserve(1).delayMs).toBe(1000);
  });

  test("cancel after the time to act, or twice, does nothing; a delay-0 one cancelled at once gives back", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 10, clock });
    const now = bucket.reserve(2);
    expect(now).toMatchObject({ ok: true, delayMs: 0 });
    now.cancel();
    expect(bucket.peek(0).remaining, "cancelled at its time to act: given back").toBe(2);
    const acted = bucket.reserve(2);
    clock.set(1); // past its time to act: it may have acted
    acted.cancel();
    expect(bucket.peek(0).remaining).toBe(0);
    clock.set(200);
    bucket.consume(2);
    const later = bucket.reserve(1);
    expect(later.delayMs).toBe(100);
    later.cancel();
    later.cancel();
    expect(bucket.peek(0)).toMatchObject({ remaining: 0, resetAfterMs: 200 });
    const due = bucket.reserve(1);
    clock.set(100);
    due.cancel();
    expect(bucket.peek(0)).toMatchObject({ remaining: 0, resetAfterMs: 200 });
  });

  test("not ok above capacity or maxWaitMs: nothing is taken", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 10, clock });
    expect(bucket.reserve(3)).toMatchObject({ ok: false, delayMs: Number.POSITIVE_INFINITY });
    bucket.consume(2);
    expect(bucket.reserve(1, { maxWaitMs: 99 }).ok).toBe(false);
    expect(bucket.reserve(1, { maxWaitMs: 100 })).toMatchObject({ ok: true, delayMs: 100 });
    expect(() => bucket.reserve(1, { maxWaitMs: -1 })).toThrow(
      new RangeError("TokenBucket.reserve: maxWaitMs must be a finite number >= 0, got -1"),
    );
  });

  test("property: cancelling every pending reservation in any order restores the balance", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
        (rate, costs, shuffle) => {
          const clock = manualClock();
          const bucket = new TokenBucket({ capacity: 4, refillPerSecond: rate, clock });
          const twin = new TokenBucket({ capacity: 4, refillPerSecond: rate, clock });
          bucket.consume(4);
          twin.consume(4);
          const rs = costs.map((c) => bucket.reserve(c));
          const order = rs.map((r, i) => ({ r, k: shuffle[i]! })).sort((x, y) => x.k - y.k);
          for (const { r } of order) r.cancel();
          expect(bucket.peek(0)).toEqual(twin.peek(0));
          expect(bucket.peek(4)).toEqual(twin.peek(4));
        },
      ),
    );
  });
});

describe("LeakyBucket shaping", () => {
  test("20 simultaneous requests leave exactly 1000 / leakPerSecond ms apart", async () => {
    const { clock, advance } = timerClock();
    const shaper = new LeakyBucket({ capacity: 20, leakPerSecond: 8, clock });
    const { log, track } = settleLog(clock);
    const waits = Array.from({ length: 20 }, (_, i) => track(`${i}`, shaper.wait()));
    await expect(shaper.wait()).rejects.toBeInstanceOf(RateLimitError); // the 21st: full
    await advance(3000);
    await Promise.all(waits);
    expect(log).toEqual(Array.from({ length: 20 }, (_, i) => `${i}@${i * 125}`));
  });

  test("reserve gives the same delays; plain consume waits behind the queue", () => {
    const clock = manualClock();
    const shaper = new LeakyBucket({ capacity: 5, leakPerSecond: 10, clock });
    expect([1, 1, 2, 1].map((c) => shaper.reserve(c).delayMs)).toEqual([0, 100, 200, 400]);
    expect(shaper.reserve(1).ok, "level 5: full").toBe(false);
    clock.set(150);
    // 1.5 units drained, but the last reservation leaves only at 400 ms.
    expect(shaper.consume(1)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 250 });
    expect(shaper.allow(1)).toBe(false);
    clock.set(400);
    expect(shaper.consume(1)).toMatchObject({ allowed: true });
  });
});

describe("windows: waiting holds nothing; maxWaitMs is a deadline behind others", () => {
  test.each([
    {
      name: "FixedWindow",
      make: (clock: Clock) => new FixedWindow({ limit: 2, windowMs: 1000, clock }),
    },
    {
      name: "SlidingWindowLog",
      make: (clock: Clock) => new SlidingWindowLog({ limit: 2, windowMs: 1000, clock }),
    },
    {
      name: "SlidingWindowCounter",
      make: (clock: Clock) => new SlidingWindowCounter({ limit: 2, windowMs: 1000, clock }),
    },
  ])("$name", async ({ make }) => {
    const { clock, advance } = timerClock();
    const window = make(clock);
    window.consume(2);
    const { log, track } = settleLog(clock);
    const waits = [
      track("a", window.wait(2)),
      // Alone it would fit at 1000 ms, but it is behind a: rejected at its deadline.
      track("b", window.wait(1, { maxWaitMs: 1500 })),
    ];
    expect(vi.getTimerCount()).toBe(1);
    await advance(5000);
    await Promise.all(waits);
    expect(log).toContain("b!RateLimitError@1500");
    expect(log.filter((l) => /^a@\d+$/.test(l))).toHaveLength(1);
  });

  test("a wait beyond maxWaitMs is rejected at once, with the numbers", async () => {
    const clock = manualClock();
    const window = new FixedWindow({ limit: 1, windowMs: 1000, clock });
    window.consume(1);
    await expect(window.wait(1, { maxWaitMs: 999 })).rejects.toThrow(
      "FixedWindow.wait: waiting 1000 ms for cost 1 exceeds maxWaitMs 999",
    );
  });
});

describe("allOf wait (polls its parts as meters)", () => {
  const layered = (clock: Clock) =>
    allOf(
      new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
      new FixedWindow({ limit: 100, windowMs: 60_000, clock }),
    );

  test("first-in, first-out with costs 3, 1, 1; a large cost is not starved", async () => {
    const { clock, advance } = timerClock();
    const both = layered(clock);
    both.consume(5);
    const { log, track } = settleLog(clock);
    const waits = [
      track("3", both.wait(3)),
      track("1a", both.wait(1)),
      track("5", both.wait(5)),
      track("1b", both.wait(1)),
    ];
    expect(vi.getTimerCount()).toBe(1);
    await advance(20_000);
    await Promise.all(waits);
    // Each starts when the bucket has its cost again: 3 s, then 1 s, then 5 s, then 1 s.
    expect(log).toEqual(["3@3000", "1a@4000", "5@9000", "1b@10000"]);
  });

  test("an abort in the middle lets the next one move up; it held nothing", async () => {
    const { clock, advance } = timerClock();
    const both = layered(clock);
    both.consume(5);
    const controller = new AbortController();
    const { log, track } = settleLog(clock);
    const waits = [
      track("a", both.wait(1)),
      track("b", both.wait(4, { signal: controller.signal })),
      track("c", both.wait(1)),
    ];
    await advance(500);
    controller.abort(new Error("gone"));
    await advance(5000);
    await Promise.all(waits);
    expect(log).toEqual(["b!Error@500", "a@1000", "c@2000"]);
  });

  test("maxWaitMs: refused at once for the head, a deadline behind others", async () => {
    const { clock, advance } = timerClock();
    const both = layered(clock);
    both.consume(5);
    const before = both.peek(0);
    await expect(both.wait(2, { maxWaitMs: 1999 })).rejects.toThrow(
      "allOf.wait: waiting 2000 ms for cost 2 exceeds maxWaitMs 1999",
    );
    expect(both.peek(0)).toEqual(before);
    const { log, track } = settleLog(clock);
    const waits = [track("a", both.wait(3)), track("b", both.wait(1, { maxWaitMs: 2000 }))];
    await advance(5000);
    await Promise.all(waits);
    expect(log).toEqual(["b!RateLimitError@2000", "a@3000"]);
  });

  test("10,000 concurrent waiters use one timer", async () => {
    const { clock, advance } = timerClock();
    const both = layered(clock);
    both.consume(5);
    const waits = Array.from({ length: 10_000 }, () => both.wait(0.0001));
    expect(vi.getTimerCount()).toBe(1);
    await advance(2000);
    await Promise.all(waits);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a leaky part of capacity 1 meters 20 simultaneous requests 1000 / leakPerSecond ms apart", async () => {
    const { clock, advance } = timerClock();
    const both = allOf(
      new LeakyBucket({ capacity: 1, leakPerSecond: 8, clock }),
      new FixedWindow({ limit: 100, windowMs: 60_000, clock }),
    );
    const { log, track } = settleLog(clock);
    const waits = Array.from({ length: 20 }, (_, i) => track(`${i}`, both.wait()));
    await advance(3000);
    await Promise.all(waits);
    expect(log).toEqual(Array.from({ length: 20 }, (_, i) => `${i}@${i * 125}`));
  });
});

describe("deadlines and failing clocks", () => {
  test("waiters behind the head are rejected at their own deadlines, in deadline order", async () => {
    const { clock, advance } = timerClock();
    const window = new FixedWindow({ limit: 2, windowMs: 1000, clock });
    window.consume(2);
    const { log, track } = settleLog(clock);
    // The head takes the next window whole; alone, each of the others would fit at 1000 ms.
    const waits = [track("head", window.wait(2))];
    for (const maxWaitMs of [1500, 1300, 1900, 1100, 1200, 1700, 1400]) {
      waits.push(track(`${maxWaitMs}`, window.wait(1, { maxWaitMs })));
    }
    expect(vi.getTimerCount()).toBe(1);
    await advance(3000);
    await Promise.all(waits);
    expect(log).toEqual([
      "head@1000",
      "1100!RateLimitError@1100",
      "1200!RateLimitError@1200",
      "1300!RateLimitError@1300",
      "1400!RateLimitError@1400",
      "1500!RateLimitError@1500",
      "1700!RateLimitError@1700",
      "1900!RateLimitError@1900",
    ]);
  });

  test("a wait of exactly maxWaitMs was rejected at its deadline: now granted, alone or behind others", async () => {
    const { clock, advance } = timerClock();
    const window = new FixedWindow({ limit: 2, windowMs: 1000, clock });
    window.consume(2);
    const { log, track } = settleLog(clock);
    const waits = [
      track("alone", window.wait(1, { maxWaitMs: 1000 })),
      track("behind", window.wait(1, { maxWaitMs: 1000 })),
    ];
    await advance(1000);
    await Promise.all(waits);
    expect(log).toEqual(["alone@1000", "behind@1000"]);
  });

  test.each([
    {
      name: "TokenBucket",
      make: (clock: Clock) => new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }),
    },
    {
      name: "FixedWindow",
      make: (clock: Clock) => new FixedWindow({ limit: 1, windowMs: 1000, clock }),
    },
  ])(
    "$name: a clock that starts throwing rejects the waiters instead of hanging",
    async ({ make }) => {
      const { clock, advance } = timerClock();
      let broken = false;
      const limiter = make(() => (broken ? Number.NaN : clock()));
      limiter.consume(1);
      // The handler is attached before the timer fires, so the rejection is never unhandled.
      const rejected = expect(limiter.wait(1)).rejects.toThrow(RangeError);
      broken = true;
      await advance(1000);
      await rejected;
      expect(vi.getTimerCount()).toBe(0);
    },
  );
});

describe("a limiter that throws while serving a waiter", () => {
  /** A limiter stub: denied for 100 ms, or granted; `failAt` numbers the call that throws. */
  function stub(grant: () => boolean, failAt: { peek?: number; consume?: number }) {
    const calls = { peek: 0, consume: 0 };
    const decision = (allowed: boolean): Decision => ({
      allowed,
      limit: 5,
      remaining: 0,
      retryAfterMs: allowed ? 0 : 100,
      resetAfterMs: 100,
    });
    return {
      peek: () => {
        if (++calls.peek === failAt.peek) throw new Error("peek failed");
        return decision(grant());
      },
      consume: () => {
        if (++calls.consume === failAt.consume) throw new Error("consume failed");
        return decision(grant());
      },
    };
  }

  test("regression: a waiter past its deadline whose last read throws was never settled", async () => {
    const { clock, advance } = timerClock();
    // Reads: the wait's and its serve's (1, 2), then at 100 ms the head's (3) and, at its
    // deadline, the expiring waiter's (4).
    const queue = new WaitQueue(
      "Stub",
      stub(() => false, { peek: 4 }),
      clock,
    );
    const { log, track } = settleLog(clock);
    void track("w", queue.wait(1, { maxWaitMs: 100 }));
    await advance(100); // settles what is due (no wait on a promise that may never settle)
    expect(log).toEqual(["w!Error@100"]);
    expect(queue.size).toBe(0);
  });

  test("regression: a waiter granted while its charge throws was never settled", async () => {
    const { clock, advance } = timerClock();
    let free = false;
    const queue = new WaitQueue(
      "Stub",
      stub(() => free, { consume: 1 }),
      clock,
    );
    const { log, track } = settleLog(clock);
    void track("w", queue.wait(1));
    free = true;
    queue.wake();
    await advance(0);
    expect(log).toEqual(["w!Error@0"]);
    expect(queue.size).toBe(0);
  });
});

describe("WaitQueue deadlines", () => {
  test("regression: aborted waiters stayed in the deadline heap behind an earlier deadline", async () => {
    const { clock, advance } = timerClock();
    const window = new FixedWindow({ limit: 1, windowMs: 60_000, clock });
    window.consume(1);
    const queue = new WaitQueue("FixedWindow", window, clock);
    const heapSize = () => (queue as unknown as { deadlines: unknown[] }).deadlines.length;
    const first = queue.wait(1, { maxWaitMs: 120_000 }); // the head, with the earliest deadline
    const controllers = Array.from({ length: 10_000 }, () => new AbortController());
    const rest = controllers.map((c) => queue.wait(1, { maxWaitMs: 600_000, signal: c.signal }));
    expect(heapSize()).toBe(10_001);
    for (const c of controllers) c.abort(new Error("gone"));
    await Promise.allSettled(rest);
    expect(queue.size).toBe(1);
    expect(heapSize(), "aborted waiters left the heap at once").toBe(1);
    await advance(60_000);
    await expect(first).resolves.toMatchObject({ allowed: true });
    expect(heapSize()).toBe(0);
  });
});
