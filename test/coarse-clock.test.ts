// The coarse clock (src/core/coarse-clock.ts): a cached reading refreshed by an unref'd timer
// and every `maxReads` reads, monotonic, exact again after stop(); and exactness with it:
// a limiter on the coarse clock decides exactly as the same limiter on a manual clock set
// to the readings the coarse clock gave, for every algorithm, allOf and the keyed registry.
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import { type CoarseClock, coarseClock } from "../src/core/coarse-clock.js";
import type { Clock, Limiter } from "../src/core/limiter.js";
import { coarseClock as exported } from "../src/index.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import "./support/fast-check-seed.js";
import { manualClock } from "./support/manual-clock.js";

const FAKE = {
  toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] as (
    | "setTimeout"
    | "clearTimeout"
    | "setInterval"
    | "clearInterval"
  )[],
};

describe("coarseClock options", () => {
  test("is exported from tollgate", () => {
    expect(exported).toBe(coarseClock);
  });

  test.each([
    {
      name: "options not an object",
      options: 5,
      error: TypeError,
      message: "coarseClock: options must be an object, got 5",
    },
    {
      name: "an unknown option",
      options: { refreshMS: 5 },
      error: TypeError,
      message:
        'coarseClock: unknown option "refreshMS" (did you mean "refreshMs"?); known options: refreshMs, maxReads, source',
    },
    {
      name: "refreshMs below 1",
      options: { refreshMs: 0.5 },
      error: RangeError,
      message: "coarseClock: refreshMs must be a finite number >= 1, got 0.5",
    },
    {
      name: "refreshMs NaN",
      options: { refreshMs: Number.NaN },
      error: RangeError,
      message: "coarseClock: refreshMs must be a finite number >= 1, got NaN",
    },
    {
      name: "refreshMs a string",
      options: { refreshMs: "5" },
      error: TypeError,
      message: 'coarseClock: refreshMs must be a finite number >= 1, got "5" (string)',
    },
    {
      name: "refreshMs beyond a timer's range",
      options: { refreshMs: 2 ** 31 },
      error: RangeError,
      message:
        "coarseClock: refreshMs must be a finite number >= 1 and <= 2147483647, got 2147483648",
    },
    {
      name: "maxReads 0",
      options: { maxReads: 0 },
      error: RangeError,
      message: "coarseClock: maxReads must be an integer from 1 to 1073741824, got 0",
    },
    {
      name: "maxReads a fraction",
      options: { maxReads: 1.5 },
      error: RangeError,
      message: "coarseClock: maxReads must be an integer from 1 to 1073741824, got 1.5",
    },
    {
      name: "source not a function",
      options: { source: 5 },
      error: TypeError,
      message: "coarseClock: source must be a function returning milliseconds, got 5",
    },
  ])("$name is refused", ({ options, error, message }) => {
    const make = () => coarseClock(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });

  test("defaults: refresh every 1 ms, the source read again after 1024 cached reads", () => {
    const clock = coarseClock();
    expect({ refreshMs: clock.refreshMs, maxReads: clock.maxReads }).toEqual({
      refreshMs: 1,
      maxReads: 1024,
    });
    clock.stop();
  });
});

describe("coarseClock readings (manual source, fake timers)", () => {
  beforeEach(() => {
    vi.useFakeTimers(FAKE);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test("a reading is cached until the timer refreshes it, then the source's time", () => {
    const source = manualClock(100);
    const clock = coarseClock({ refreshMs: 5, source });
    expect(clock()).toBe(100); // the first read reads the source
    source.advance(3);
    expect(clock()).toBe(100); // cached: 3 ms stale
    vi.advanceTimersByTime(5);
    expect(clock()).toBe(103);
    clock.stop();
  });

  test("the timer starts at the first read, not at construction", () => {
    const clock = coarseClock({ source: manualClock(0) });
    expect(vi.getTimerCount()).toBe(0);
    clock();
    expect(vi.getTimerCount()).toBe(1);
    clock.stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a synchronous loop sees time advance every maxReads reads, with no timer run", () => {
    const source = manualClock(0);
    const clock = coarseClock({ refreshMs: 1000, maxReads: 4, source });
    const seen: number[] = [];
    for (let i = 0; i < 10; i++) {
      seen.push(clock());
      source.advance(1);
    }
    // The source is read once every 4 reads: reads 1, 5 and 9; the others are cached.
    expect(seen).toEqual([0, 0, 0, 0, 4, 4, 4, 4, 8, 8]);
    clock.stop();
  });

  test("maxReads 1 reads the source on every read", () => {
    const source = manualClock(0);
    const clock = coarseClock({ maxReads: 1, source });
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) {
      seen.push(clock());
      source.advance(2);
    }
    expect(seen).toEqual([0, 2, 4, 6]);
    clock.stop();
  });

  test("a source going backwards leaves the reading where it was (monotonic)", () => {
    const source = manualClock(50);
    const clock = coarseClock({ maxReads: 1, source });
    expect(clock()).toBe(50);
    source.set(20);
    expect(clock()).toBe(50);
    source.set(60);
    expect(clock()).toBe(60);
    clock.stop();
  });

  test("an idle clock stops its timer and reads the source at its next read", () => {
    const source = manualClock(0);
    const clock = coarseClock({ refreshMs: 2, source });
    clock();
    vi.advanceTimersByTime(2); // the tick finds no read since the refresh: idle, it stops
    expect(vi.getTimerCount()).toBe(0);
    source.advance(1000);
    expect(clock()).toBe(1000); // not 0: the read after idling is exact
    expect(vi.getTimerCount()).toBe(1);
    clock.stop();
  });

  test("a source reading that is not a time is passed on uncached, and asked for again", () => {
    let reading: unknown = 7;
    const clock = coarseClock({ maxReads: 2, source: () => reading as number });
    expect(clock()).toBe(7); // reads the source
    reading = Number.NaN;
    expect(clock()).toBe(7); // cached
    expect(clock()).toBeNaN(); // reads the source: NaN, passed on
    expect(clock()).toBeNaN(); // not cached: the source again
    reading = 9;
    expect(clock()).toBe(9);
    clock.stop();
  });

  test("a limiter on a source that breaks reports the bad reading, never decides on it", () => {
    let reading: unknown = 0;
    const clock = coarseClock({ maxReads: 1, source: () => reading as number });
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1, clock });
    expect(bucket.allow()).toBe(true);
    reading = "later";
    expect(() => bucket.allow()).toThrow(
      'TokenBucket: clock must return a finite number of milliseconds, got "later" (string)',
    );
    clock.stop();
  });

  test("after stop() every read reads the source, still monotonic", () => {
    const source = manualClock(10);
    const clock = coarseClock({ refreshMs: 1000, source });
    clock();
    clock.stop();
    source.advance(5);
    expect(clock()).toBe(15);
    source.set(3);
    expect(clock()).toBe(15);
    clock.stop(); // idempotent
    expect(vi.getTimerCount()).toBe(0);
  });
});

test("the refresh timer is unref'd: it never holds the process open", () => {
  const spy = vi.spyOn(globalThis, "setInterval");
  try {
    const clock = coarseClock();
    clock();
    const timer = spy.mock.results[0]?.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    clock.stop();
  } finally {
    spy.mockRestore();
  }
});

/** The limiters exactness runs over: one of each algorithm, allOf, and keyed forms. */
const SUBJECTS: readonly {
  name: string;
  make: (clock: Clock) => (key: string, cost: number) => unknown;
}[] = [
  {
    name: "TokenBucket",
    make: (clock) => single(new TokenBucket({ capacity: 5, refillPerSecond: 10, clock })),
  },
  {
    name: "LeakyBucket",
    make: (clock) => single(new LeakyBucket({ capacity: 5, leakPerSecond: 10, clock })),
  },
  {
    name: "FixedWindow",
    make: (clock) => single(new FixedWindow({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => single(new SlidingWindowLog({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => single(new SlidingWindowCounter({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "allOf(TokenBucket, FixedWindow)",
    make: (clock) =>
      single(
        allOf(
          new TokenBucket({ capacity: 5, refillPerSecond: 10, clock }),
          new FixedWindow({ limit: 8, windowMs: 100, clock }),
        ),
      ),
  },
  {
    name: "KeyedLimiter(TokenBucket)",
    make: (clock) =>
      keyed(
        new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 10, clock }), {
          maxKeys: 3,
        }),
      ),
  },
  {
    name: "KeyedLimiter(SlidingWindowCounter)",
    make: (clock) =>
      keyed(
        new KeyedLimiter(new SlidingWindowCounter({ limit: 5, windowMs: 100, clock }), {
          maxKeys: 3,
        }),
      ),
  },
  {
    name: "KeyedLimiter(SlidingWindowLog)",
    make: (clock) =>
      keyed(
        new KeyedLimiter(new SlidingWindowLog({ limit: 5, windowMs: 100, clock }), { maxKeys: 3 }),
      ),
  },
];

function single(limiter: Limiter): (key: string, cost: number) => unknown {
  return (_key, cost) => limiter.consume(cost);
}

function keyed(limiter: KeyedLimiter): (key: string, cost: number) => unknown {
  return (key, cost) => limiter.consume(key, cost);
}

/** The coarse clock, recording every reading a limiter takes. */
function recording(clock: CoarseClock): { clock: Clock; readings: number[] } {
  const readings: number[] = [];
  return {
    readings,
    clock: () => {
      const t = clock();
      readings.push(t);
      return t;
    },
  };
}

/**
 * Replays `calls` on a limiter over a clock that returns, read after read, the readings the
 * coarse-clock limiter took (a call may read more than once: `allOf` reads each part's
 * clock): the exact decisions at the coarse clock's times.
 */
function exactAt(
  make: (clock: Clock) => (key: string, cost: number) => unknown,
  calls: readonly { key: string; cost: number }[],
  readings: readonly number[],
): unknown[] {
  let next = 0;
  const check = make(() => {
    if (next >= readings.length) throw new Error("the replay read the clock more often");
    return readings[next++]!;
  });
  const decisions = calls.map((call) => check(call.key, call.cost));
  expect(next, "the replay read the clock as often as the coarse run").toBe(readings.length);
  return decisions;
}

describe("exactness: the coarse clock's decisions are the exact ones at its readings", () => {
  beforeEach(() => {
    vi.useFakeTimers(FAKE);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const step = fc.record({
    sourceMs: fc.integer({ min: 0, max: 40 }),
    timerMs: fc.integer({ min: 0, max: 12 }),
    key: fc.constantFrom("a", "b", "c", "d"),
    cost: fc.constantFrom(0, 1, 1, 1, 2, 3),
  });

  test.each(SUBJECTS)("$name", ({ make }) => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 8 }),
        (steps, refreshMs, maxReads) => {
          // The source and the timer move apart: the source can run ahead of the timer
          // (a stale cached reading), the timer can fire with no source change.
          const source = manualClock(1000);
          const coarse = coarseClock({ refreshMs, maxReads, source });
          const { clock, readings } = recording(coarse);
          const check = make(clock);
          const calls = steps.map((s) => ({ key: s.key, cost: s.cost }));
          const decisions = steps.map((s) => {
            source.advance(s.sourceMs);
            vi.advanceTimersByTime(s.timerMs);
            return check(s.key, s.cost);
          });
          coarse.stop();
          expect(readings.length).toBeGreaterThanOrEqual(steps.length);
          // Never backwards, never ahead of the source.
          for (let i = 1; i < readings.length; i++) {
            expect(readings[i]!).toBeGreaterThanOrEqual(readings[i - 1]!);
          }
          expect(readings.at(-1)!).toBeLessThanOrEqual(source());
          expect(decisions).toEqual(exactAt(make, calls, readings));
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("exactness on the real clock: performance.now(), a real timer, the event loop turning", () => {
  test.each(SUBJECTS)("$name", async ({ make }) => {
    const coarse = coarseClock({ refreshMs: 1, maxReads: 64 });
    const { clock, readings } = recording(coarse);
    const check = make(clock);
    const calls: { key: string; cost: number }[] = [];
    const decisions: unknown[] = [];
    let x = 12345; // xorshift32, fixed seed
    for (let batch = 0; batch < 40; batch++) {
      for (let i = 0; i < 200; i++) {
        x ^= x << 13;
        x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5;
        x >>>= 0;
        const call = { key: "abcd"[x % 4]!, cost: (x >>> 8) % 3 };
        calls.push(call);
        decisions.push(check(call.key, call.cost));
      }
      await new Promise((resolve) => setTimeout(resolve, 0)); // lets the refresh timer run
    }
    coarse.stop();
    expect(decisions).toEqual(exactAt(make, calls, readings));
    // The clock moved during the run (it is a clock, not a constant).
    expect(readings.at(-1)!).toBeGreaterThan(readings[0]!);
  });
});
