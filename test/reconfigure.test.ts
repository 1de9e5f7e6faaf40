import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import type { Decision } from "../src/core/limiter.js";
import {
  allOf,
  FixedWindow,
  LeakyBucket,
  RateLimitError,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import { manualClock } from "./support/manual-clock.js";
import { fixedWindowModel, slidingCounterModel, slidingLogModel } from "./support/models.js";
import type { Step } from "./support/steps.js";
import { settleLog, timerClock } from "./support/timer-clock.js";

/** A row of a reconfiguring step table: a `consume` step, or a change at a time. */
type Row = Step | readonly ["reconfigure", atMs: number, options: object];

/** Runs `rows` on the limiter `make` builds: consume steps as runSteps, and changes. */
function runRows<L extends { consume(cost?: number): Decision; reconfigure(o: never): void }>(
  make: (clock: () => number) => L,
  rows: readonly Row[],
): L {
  const clock = manualClock();
  const limiter = make(clock);
  rows.forEach((row, i) => {
    if (row[0] === "reconfigure") {
      clock.set(row[1]);
      limiter.reconfigure(row[2] as never);
      return;
    }
    const [atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs] = row;
    clock.set(atMs);
    const expected: Partial<Decision> = { allowed, remaining, retryAfterMs };
    if (resetAfterMs !== undefined) Object.assign(expected, { resetAfterMs });
    expect(limiter.consume(cost), `row ${i} at ${atMs} ms, cost ${cost}`).toMatchObject(expected);
  });
  return limiter;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("reconfigure step tables", () => {
  test("TokenBucket: a rate of 0 made positive refills from the change on", () => {
    runRows(
      (clock) => new TokenBucket({ capacity: 4, refillPerSecond: 0, clock }),
      [
        [0, 4, true, 0, 0],
        [5000, 1, false, 0, Number.POSITIVE_INFINITY],
        ["reconfigure", 5000, { refillPerSecond: 2 }],
        // Nothing accrued before the change (the rate was 0): 2 per second from 5000 on.
        [5000, 1, false, 0, 500],
        [5500, 1, true, 0, 0],
        [6500, 2, true, 0, 0],
      ],
    );
  });

  test("TokenBucket: a positive rate made 0 keeps what accrued up to the change", () => {
    runRows(
      (clock) => new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }),
      [
        [0, 10, true, 0, 0],
        ["reconfigure", 3000, { refillPerSecond: 0 }],
        // 3 tokens accrued at the old rate, and no more after.
        [9000, 3, true, 0, 0, Number.POSITIVE_INFINITY],
        [9000, 1, false, 0, Number.POSITIVE_INFINITY],
        ["reconfigure", 9000, { refillPerSecond: 1 }],
        [10_000, 1, true, 0, 0],
      ],
    );
  });

  test("TokenBucket: a larger capacity keeps the tokens, a smaller clamps; full stays full", () => {
    runRows(
      (clock) => new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }),
      [
        [0, 7, true, 3, 0],
        // Go's SetBurst: the 3 tokens stay; the refill fills up to 20.
        ["reconfigure", 0, { capacity: 20 }],
        [0, 0, true, 3, 0, 17_000],
        [1000, 0, true, 4, 0, 16_000],
        // Clamped to 2: full at the new capacity.
        ["reconfigure", 1000, { capacity: 2 }],
        [1000, 0, true, 2, 0, 0],
        // A full bucket is fresh: full at the new capacity, as one dropped and made again.
        ["reconfigure", 1000, { capacity: 30 }],
        [1000, 0, true, 30, 0, 0],
      ],
    );
  });

  test("LeakyBucket keeps its level, even above a smaller capacity", () => {
    runRows(
      (clock) => new LeakyBucket({ capacity: 10, leakPerSecond: 1, clock }),
      [
        [0, 4, true, 6, 0],
        ["reconfigure", 0, { capacity: 20 }],
        // Level 4 of 20.
        [0, 0, true, 16, 0, 4000],
        ["reconfigure", 0, { capacity: 3 }],
        // Level 4 of 3 is kept, not forgiven: 1 fits once it has drained to 2.
        [0, 1, false, 0, 2000],
        [1000, 0, true, 0, 0, 3000],
        [2000, 1, true, 0, 0, 3000],
        ["reconfigure", 2000, { leakPerSecond: 0 }],
        [60_000, 1, false, 0, Number.POSITIVE_INFINITY],
      ],
    );
  });

  test("FixedWindow: the count carries over, judged against the new limit", () => {
    runRows(
      (clock) => new FixedWindow({ limit: 5, windowMs: 1000, clock }),
      [
        [100, 4, true, 1, 0, 900],
        ["reconfigure", 200, { limit: 3 }],
        [200, 1, false, 0, 800],
        ["reconfigure", 300, { limit: 6 }],
        [300, 2, true, 0, 0],
        [1000, 6, true, 0, 0],
      ],
    );
  });

  test("FixedWindow: a new window length keeps the count until the later end", () => {
    runRows(
      (clock) => new FixedWindow({ limit: 5, windowMs: 1000, clock }),
      [
        [100, 5, true, 0, 0, 900],
        // Longer: the count stays until the end of the 10 s window holding 200 (10 000).
        ["reconfigure", 200, { windowMs: 10_000 }],
        [1500, 1, false, 0, 8500],
        [10_000, 5, true, 0, 0, 10_000],
        // Shorter: the current window still ends at 20 000, then 100 ms windows.
        ["reconfigure", 10_050, { windowMs: 100 }],
        [19_999, 1, false, 0, 1],
        [20_000, 5, true, 0, 0, 100],
        [20_100, 5, true, 0, 0, 100],
      ],
    );
  });

  test("SlidingWindowLog: a longer window moves logged entries out; a shorter one does not", () => {
    runRows(
      (clock) => new SlidingWindowLog({ limit: 2, windowMs: 1000, clock }),
      [
        [0, 1, true, 1, 0],
        [500, 1, true, 0, 0],
        ["reconfigure", 600, { windowMs: 2000 }],
        // Entries at 0 and 500 now leave at 2000 and 2500.
        [1500, 1, false, 0, 500],
        [2000, 1, true, 0, 0],
        ["reconfigure", 2000, { windowMs: 100, limit: 1 }],
        // The entries at 500 (leaves at 2500) and 2000 (leaves at 4000) keep their times.
        [3000, 1, false, 0, 1000],
        [4000, 1, true, 0, 0, 100],
        [4100, 1, true, 0, 0, 100],
      ],
    );
  });

  test("SlidingWindowCounter: a new length turns the estimate into the count of its window", () => {
    runRows(
      (clock) => new SlidingWindowCounter({ limit: 10, windowMs: 1000, clock }),
      [
        [0, 8, true, 2, 0],
        // At 1500 the estimate is 8 * 0.5 = 4; with windowMs 2000 it is the count of [0, 2000).
        ["reconfigure", 1500, { windowMs: 2000 }],
        [1500, 0, true, 6, 0, 2500],
        [1500, 7, false, 6, 1000],
        [2000, 6, true, 0, 0],
      ],
    );
  });
});

describe("reconfigure checks everything first", () => {
  const cases = [
    ["TokenBucket", () => new TokenBucket({ capacity: 5, refillPerSecond: 1, clock: () => 0 })],
    ["LeakyBucket", () => new LeakyBucket({ capacity: 5, leakPerSecond: 1, clock: () => 0 })],
    ["FixedWindow", () => new FixedWindow({ limit: 5, windowMs: 1000, clock: () => 0 })],
    ["SlidingWindowLog", () => new SlidingWindowLog({ limit: 5, windowMs: 1000, clock: () => 0 })],
    [
      "SlidingWindowCounter",
      () => new SlidingWindowCounter({ limit: 5, windowMs: 1000, clock: () => 0 }),
    ],
  ] as const;

  test.each(cases)(
    "%s: a bad option throws the constructor's message and changes nothing",
    (name, make) => {
      const limiter = make() as unknown as Record<string, unknown> & {
        consume(c: number): Decision;
        peek(c: number): Decision;
        reconfigure(o: unknown): void;
      };
      limiter.consume(2);
      const before = JSON.stringify(limiter.peek(0));
      const size = name.endsWith("Bucket") ? "capacity" : "limit";
      const rate =
        name === "TokenBucket"
          ? "refillPerSecond"
          : name === "LeakyBucket"
            ? "leakPerSecond"
            : "windowMs";
      // A good option beside a bad one: neither applies.
      expect(() => limiter.reconfigure({ [size]: 7, [rate]: -1 })).toThrow(
        new RangeError(
          `${name}: ${rate} must be a finite number ${rate === "windowMs" ? ">" : ">="} 0, got -1`,
        ),
      );
      expect(
        () => new (limiter.constructor as new (o: object) => unknown)({ [size]: 7, [rate]: -1 }),
      ).toThrow(`${name}: ${rate} must be`);
      expect(() => limiter.reconfigure({ [size]: "7" })).toThrow(TypeError);
      expect(() => limiter.reconfigure({ [size]: 0 })).toThrow(RangeError);
      expect(() => limiter.reconfigure({ [`${size}s`]: 7 })).toThrow(
        new RegExp(
          `^${name}\\.reconfigure: unknown option "${size}s" \\(did you mean "${size}"\\?\\)`,
        ),
      );
      expect(() => limiter.reconfigure({ clock: () => 0 })).toThrow(/the clock cannot change/);
      expect(() => limiter.reconfigure(null)).toThrow(TypeError);
      expect(limiter[size]).toBe(5);
      expect(JSON.stringify(limiter.peek(0))).toBe(before);
      // Partial options are fine; an empty object changes nothing.
      limiter.reconfigure({});
      expect(JSON.stringify(limiter.peek(0))).toBe(before);
      limiter.reconfigure({ [size]: 9 });
      expect(limiter[size]).toBe(9);
    },
  );

  test("allOf: every part is checked before any changes", () => {
    const clock = manualClock();
    const a = new TokenBucket({ capacity: 5, refillPerSecond: 1, clock });
    const b = new FixedWindow({ limit: 10, windowMs: 1000, clock });
    const both = allOf(a, b);
    expect(() => both.reconfigure([{ capacity: 2 }, { limit: -1 }])).toThrow(
      "FixedWindow: limit must be a finite number > 0, got -1",
    );
    expect(a.capacity).toBe(5);
    expect(() => both.reconfigure([{ capacity: 2 }])).toThrow(/an array of 2 entries/);
    const custom = {
      allow: () => true,
      consume: a.consume.bind(a),
      peek: a.peek.bind(a),
      reset() {},
      isIdle: () => true,
      wait: a.wait.bind(a),
    };
    expect(() => allOf(custom, b).reconfigure([{}, undefined])).toThrow(
      /part 0 .* has no reconfigure/,
    );
    both.reconfigure([{ capacity: 2 }, undefined]);
    expect(a.capacity).toBe(2);
    expect(b.limit).toBe(10);
    expect(both.consume(3)).toMatchObject({
      allowed: false,
      limit: 2,
      retryAfterMs: Number.POSITIVE_INFINITY,
    });
    // Nested allOf: an array again.
    const c = new SlidingWindowLog({ limit: 4, windowMs: 1000, clock });
    const nested = allOf(allOf(c), new TokenBucket({ capacity: 9, refillPerSecond: 1, clock }));
    nested.reconfigure([[{ limit: 1 }], undefined]);
    expect(c.limit).toBe(1);
    expect(nested.consume(1).allowed).toBe(true);
    expect(nested.consume(1).allowed).toBe(false);
  });
});

describe("reconfigure re-plans waiters", () => {
  test("TokenBucket: a faster rate serves a waiter sooner; a cost above the new capacity is refused", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 1, clock });
    bucket.consume(4);
    const { log, track } = settleLog(clock);
    const small = track("small", bucket.wait(1));
    const big = bucket.wait(4);
    const bigDone = track("big", big);
    await advance(100);
    bucket.reconfigure({ refillPerSecond: 10, capacity: 3 });
    // The cost 4 can never fit 3: the error a fresh wait gets.
    await expect(big).rejects.toThrow(
      new RangeError("TokenBucket.wait: cost 4 exceeds capacity 3"),
    );
    await expect(bucket.wait(4)).rejects.toThrow("TokenBucket.wait: cost 4 exceeds capacity 3");
    // 0.1 token accrued at 1/s; 0.9 more at 10/s is 90 ms.
    await advance(90);
    await Promise.all([small, bigDone]);
    expect(log).toEqual(["big!RangeError@100", "small@190"]);
  });

  test("TokenBucket: a rate made 0 refuses the waiters a fresh wait would refuse, and back", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
    bucket.consume(2);
    const pending = bucket.wait(1);
    bucket.reconfigure({ refillPerSecond: 0 });
    await expect(pending).rejects.toThrow(RateLimitError);
    await expect(pending).rejects.toThrow(
      "TokenBucket.wait: cost 1 can never be granted (a rate of 0)",
    );
    bucket.reconfigure({ refillPerSecond: 4 });
    const later = bucket.wait(1);
    await advance(250);
    await expect(later).resolves.toMatchObject({ allowed: true });
  });

  test("LeakyBucket: a slower leak refuses a waiter whose maxWaitMs it would now pass", async () => {
    const { clock, advance } = timerClock();
    const shaper = new LeakyBucket({ capacity: 5, leakPerSecond: 10, clock });
    await shaper.wait(1);
    const second = shaper.wait(1, { maxWaitMs: 200 }); // leaves at 100
    shaper.reconfigure({ leakPerSecond: 1 }); // would now leave at 1000
    await expect(second).rejects.toThrow(
      "LeakyBucket.wait: waiting 1000 ms for cost 1 exceeds maxWaitMs 200",
    );
    await advance(1);
  });

  test("FixedWindow: a waiter whose cost is above the new limit is refused, the others served", async () => {
    const { clock, advance } = timerClock();
    const window = new FixedWindow({ limit: 5, windowMs: 1000, clock });
    window.consume(5);
    const { log, track } = settleLog(clock);
    const done = Promise.all([track("four", window.wait(4)), track("one", window.wait(1))]);
    window.reconfigure({ limit: 3 });
    await advance(1000);
    await done;
    expect(log).toEqual(["four!RangeError@0", "one@1000"]);
  });

  test("allOf: waiters on the composite are re-planned", async () => {
    const { clock, advance } = timerClock();
    const a = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    const both = allOf(a, new TokenBucket({ capacity: 9, refillPerSecond: 9, clock }));
    both.consume(3);
    const waiting = both.wait(3);
    both.reconfigure([{ limit: 2 }, undefined]);
    await expect(waiting).rejects.toThrow("allOf.wait: cost 3 exceeds limit 2");
    await advance(1);
  });
});

/** Integer arithmetic only, so that both sides are exact. */
const bucketOptions = fc.record({
  capacity: fc.integer({ min: 1, max: 20 }),
  refillPerSecond: fc.integer({ min: 0, max: 5 }),
});
const ops = fc.array(
  fc.record({ dtSeconds: fc.integer({ min: 0, max: 4 }), cost: fc.integer({ min: 0, max: 12 }) }),
  { maxLength: 25 },
);

describe("reconfigure properties", () => {
  test("TokenBucket: reconfigured at t, it decides as a fresh bucket of the new options seeded with the old state at t", () => {
    fc.assert(
      fc.property(bucketOptions, bucketOptions, ops, ops, (before, after, prefix, suffix) => {
        const clock = manualClock();
        const bucket = new TokenBucket({ ...before, clock });
        for (const op of prefix) {
          clock.advance(op.dtSeconds * 1000);
          bucket.consume(op.cost);
        }
        const tokens = bucket.peek(0).remaining; // integers: exact
        const full = tokens === before.capacity;
        bucket.reconfigure(after);
        const fresh = new TokenBucket({ ...after, clock });
        const kept = full ? after.capacity : Math.min(tokens, after.capacity);
        if (kept < after.capacity) fresh.consume(after.capacity - kept);
        for (const op of suffix) {
          clock.advance(op.dtSeconds * 1000);
          expect(bucket.consume(op.cost)).toEqual(fresh.consume(op.cost));
        }
      }),
    );
  });

  test("LeakyBucket: reconfigured at t, it decides as a fresh bucket of the new options holding the old level", () => {
    fc.assert(
      fc.property(bucketOptions, bucketOptions, ops, ops, (before, after, prefix, suffix) => {
        const clock = manualClock();
        const leaky = (o: { capacity: number; refillPerSecond: number }) =>
          new LeakyBucket({ capacity: o.capacity, leakPerSecond: o.refillPerSecond, clock });
        const bucket = leaky(before);
        for (const op of prefix) {
          clock.advance(op.dtSeconds * 1000);
          bucket.consume(op.cost);
        }
        const level = before.capacity - bucket.peek(0).remaining;
        bucket.reconfigure({ capacity: after.capacity, leakPerSecond: after.refillPerSecond });
        // A level above the new capacity is kept (the step table above): no fresh bucket holds it.
        fc.pre(level <= after.capacity);
        const fresh = leaky(after);
        if (level > 0) fresh.consume(level);
        for (const op of suffix) {
          clock.advance(op.dtSeconds * 1000);
          expect(bucket.consume(op.cost)).toEqual(fresh.consume(op.cost));
        }
      }),
    );
  });

  const windowCases = [
    ["FixedWindow", FixedWindow, fixedWindowModel],
    ["SlidingWindowLog", SlidingWindowLog, slidingLogModel],
    ["SlidingWindowCounter", SlidingWindowCounter, slidingCounterModel],
  ] as const;

  test.each(windowCases)(
    "%s: a new limit judges the carried-over count as the model with that limit does",
    (_name, Class, model) => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 5 }).map((n) => n * 200),
          fc.array(
            fc.record({
              dt: fc.integer({ min: 0, max: 700 }),
              cost: fc.integer({ min: 0, max: 13 }),
              change: fc.boolean(),
            }),
            { maxLength: 40 },
          ),
          (limit, otherLimit, windowMs, steps) => {
            const clock = manualClock();
            const limiter = new Class({ limit, windowMs, clock });
            // The model with the limit read live: the state is kept; only the judge changes.
            let current = limit;
            const m = model(() => current, windowMs);
            for (const step of steps) {
              clock.advance(step.dt);
              const t = clock();
              if (step.change) {
                current = current === limit ? otherLimit : limit;
                limiter.reconfigure({ limit: current });
              }
              const expected = m(t, step.cost, true);
              const got = limiter.consume(step.cost);
              expect(got.allowed, `at ${t} cost ${step.cost} limit ${current}`).toBe(
                expected.allowed,
              );
              expect(got.remaining).toBe(expected.remaining);
            }
          },
        ),
      );
    },
  );
});
