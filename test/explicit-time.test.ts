import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import type { Clock, Decision, Limiter } from "../src/core/limiter.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import { manualClock } from "./support/manual-clock.js";

/** What the explicit-time forms of a limiter or a keyed limiter's key look like here. */
interface Subject {
  allow(cost: number): boolean;
  consume(cost: number): Decision;
  peek(cost: number): Decision;
  allowAt(timeMs: number, cost: number): boolean;
  consumeAt(timeMs: number, cost: number): Decision;
  peekAt(timeMs: number, cost: number): Decision;
}

type TimedLimiter = Limiter & {
  allowAt(timeMs: number, cost?: number): boolean;
  consumeAt(timeMs: number, cost?: number): Decision;
  peekAt(timeMs: number, cost?: number): Decision;
};

function own(limiter: TimedLimiter): Subject {
  return {
    allow: (c) => limiter.allow(c),
    consume: (c) => limiter.consume(c),
    peek: (c) => limiter.peek(c),
    allowAt: (t, c) => limiter.allowAt(t, c),
    consumeAt: (t, c) => limiter.consumeAt(t, c),
    peekAt: (t, c) => limiter.peekAt(t, c),
  };
}

function keyed(registry: KeyedLimiter, key: string): Subject {
  return {
    allow: (c) => registry.allow(key, c),
    consume: (c) => registry.consume(key, c),
    peek: (c) => registry.peek(key, c),
    allowAt: (t, c) => registry.allowAt(key, t, c),
    consumeAt: (t, c) => registry.consumeAt(key, t, c),
    peekAt: (t, c) => registry.peekAt(key, t, c),
  };
}

/** Each subject, made twice from one clock: once driven by it, once by explicit times. */
const SUBJECTS: readonly {
  name: string;
  make: (clock: Clock) => Subject;
  /** The generic path's map asks a key's own limiter `isIdle()`, which reads its clock. */
  readsClock?: boolean;
}[] = [
  {
    name: "TokenBucket",
    make: (clock) => own(new TokenBucket({ capacity: 5, refillPerSecond: 3, clock })),
  },
  {
    name: "TokenBucket with initialTokens",
    make: (clock) =>
      own(new TokenBucket({ capacity: 5, refillPerSecond: 3, initialTokens: 1, clock })),
  },
  {
    name: "LeakyBucket",
    make: (clock) => own(new LeakyBucket({ capacity: 4, leakPerSecond: 2, clock })),
  },
  {
    name: "FixedWindow",
    make: (clock) => own(new FixedWindow({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => own(new SlidingWindowLog({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => own(new SlidingWindowCounter({ limit: 5, windowMs: 100, clock })),
  },
  {
    name: "allOf(TokenBucket, SlidingWindowCounter)",
    make: (clock) =>
      own(
        allOf(
          new TokenBucket({ capacity: 4, refillPerSecond: 5, clock }),
          new SlidingWindowCounter({ limit: 6, windowMs: 150, clock }),
        ),
      ),
  },
  {
    name: "KeyedLimiter(FixedWindow)",
    make: (clock) =>
      keyed(new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 80, clock })), "k"),
  },
  {
    name: "KeyedLimiter(allOf(LeakyBucket, SlidingWindowLog))",
    make: (clock) =>
      keyed(
        new KeyedLimiter(
          allOf(
            new LeakyBucket({ capacity: 3, leakPerSecond: 4, clock }),
            new SlidingWindowLog({ limit: 4, windowMs: 90, clock }),
          ),
        ),
        "k",
      ),
  },
  {
    name: "KeyedLimiter(key => TokenBucket) (the generic path)",
    make: (clock) =>
      keyed(
        new KeyedLimiter(() => new TokenBucket({ capacity: 3, refillPerSecond: 2, clock })),
        "k",
      ),
    readsClock: true,
  },
];

/** Steps: move the time by `dt` (sometimes back), then one call. */
const steps = fc.array(
  fc.record({
    dt: fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 400 }) },
      { weight: 1, arbitrary: fc.integer({ min: -300, max: -1 }) },
    ),
    cost: fc.integer({ min: 0, max: 6 }),
    op: fc.constantFrom("allow", "consume", "peek"),
  }),
  { maxLength: 60 },
);

describe.each(SUBJECTS)("explicit time: $name", ({ make, readsClock }) => {
  test("deciding at explicit times is deciding with a clock at those times, and reads no clock", () => {
    fc.assert(
      fc.property(steps, (calls) => {
        const clock = manualClock(1000);
        const byClock = make(clock);
        // Reads 1000 while the limiter is made (a bucket with initialTokens starts then),
        // then stands behind every explicit time, so no reading moves the latest time.
        let reads = 0;
        let making = true;
        const counted: Clock = () => {
          if (making) return 1000;
          reads++;
          return -1e9;
        };
        const byTime = make(counted);
        making = false;
        let t = 1000;
        calls.forEach(({ dt, cost, op }, i) => {
          t += dt;
          clock.set(t);
          const where = `step ${i} (${op} ${cost} at ${t})`;
          if (op === "allow") expect(byTime.allowAt(t, cost), where).toBe(byClock.allow(cost));
          else if (op === "consume")
            expect(byTime.consumeAt(t, cost), where).toEqual(byClock.consume(cost));
          else expect(byTime.peekAt(t, cost), where).toEqual(byClock.peek(cost));
        });
        if (!readsClock) expect(reads, "clock readings by the explicit-time limiter").toBe(0);
      }),
    );
  });

  test("a time behind the latest one counts as the latest one", () => {
    const subject = make(manualClock(0));
    expect(subject.consumeAt(5000, 1).allowed).toBe(true);
    expect(subject.peekAt(10, 0)).toEqual(subject.peekAt(5000, 0));
  });

  test.each([
    { name: "a string", timeMs: "5", error: TypeError, got: '"5" (string)' },
    { name: "NaN", timeMs: Number.NaN, error: RangeError, got: "NaN" },
    { name: "Infinity", timeMs: Number.POSITIVE_INFINITY, error: RangeError, got: "Infinity" },
    { name: "undefined", timeMs: undefined, error: TypeError, got: "undefined" },
  ])("timeMs $name is refused, naming it, and changes nothing", ({ timeMs, error, got }) => {
    const subject = make(manualClock(0));
    const before = subject.peekAt(100, 1);
    for (const call of [
      () => subject.allowAt(timeMs as number, 1),
      () => subject.consumeAt(timeMs as number, 1),
      () => subject.peekAt(timeMs as number, 1),
    ]) {
      expect(call).toThrow(error);
      expect(call).toThrow(`timeMs must be a finite number of milliseconds, got ${got}`);
    }
    expect(subject.peekAt(100, 1)).toEqual(before);
  });
});

describe("explicit time: edges", () => {
  test("a window refuses a time past its float-step bound, as it refuses such a reading", () => {
    const window = new FixedWindow({ limit: 5, windowMs: 0.01, clock: () => 0 });
    expect(() => window.allowAt(1e15, 1)).toThrow(RangeError);
    expect(window.allowAt(1000, 1)).toBe(true);
  });

  test("the message names the method: FixedWindow.consumeAt, KeyedLimiter.allowAt", () => {
    const window = new FixedWindow({ limit: 5, windowMs: 100 });
    expect(() => window.consumeAt(Number.NaN)).toThrow(
      "FixedWindow.consumeAt: timeMs must be a finite number of milliseconds, got NaN",
    );
    const registry = new KeyedLimiter(window);
    expect(() => registry.allowAt("k", "1" as unknown as number)).toThrow(
      'KeyedLimiter.allowAt: timeMs must be a finite number of milliseconds, got "1" (string)',
    );
  });

  test("a custom limiter without allowAt cannot decide at an explicit time (generic path)", () => {
    const custom: Limiter = {
      allow: () => true,
      consume: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
      peek: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
      reset: () => {},
      isIdle: () => true,
      wait: () => Promise.reject(new Error("no")),
    };
    const registry = new KeyedLimiter(() => custom);
    expect(() => registry.allowAt("k", 5)).toThrow(TypeError);
    expect(() => registry.allowAt("k", 5)).toThrow("cannot decide at an explicit time");
    expect(() => allOf(custom, new FixedWindow({ limit: 1, windowMs: 10 })).consumeAt(5)).toThrow(
      "cannot decide at an explicit time",
    );
  });

  test("sweepAt drops what is idle by that time, reading no clock", () => {
    let reads = 0;
    const clock: Clock = () => {
      reads++;
      return 0;
    };
    const registry = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 100, clock }));
    registry.allowAt("a", 10);
    registry.allowAt("b", 150);
    expect(registry.sweepAt(120)).toBe(1); // at the latest time, 150: "a"'s window has ended
    expect(registry.size).toBe(1);
    expect(registry.sweepAt(250)).toBe(1);
    expect(registry.size).toBe(0);
    expect(reads).toBe(0);
  });
});
