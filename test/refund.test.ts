import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  allOf,
  type Decision,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  type Receipt,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import { type ManualClock, manualClock } from "./support/manual-clock.js";
import {
  bucketRefundModel,
  fixedWindowRefundModel,
  type RefundModel,
  slidingCounterRefundModel,
  slidingLogRefundModel,
} from "./support/refund-models.js";

type Refundable = Limiter & {
  refund(cost?: number): number;
  charge(cost?: number): Receipt;
  clone(): Limiter;
};

/** Each algorithm at limit 5 (a bucket refilling 1 unit per ms), with its reference model. */
const ALGORITHMS: readonly {
  name: string;
  make: (clock: ManualClock) => Refundable;
  model: () => RefundModel;
}[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 1000, clock }),
    model: () => bucketRefundModel(5, 1),
  },
  {
    name: "LeakyBucket",
    make: (clock) => new LeakyBucket({ capacity: 5, leakPerSecond: 1000, clock }),
    model: () => bucketRefundModel(5, 1),
  },
  {
    name: "FixedWindow",
    make: (clock) => new FixedWindow({ limit: 5, windowMs: 10, clock }),
    model: () => fixedWindowRefundModel(5, 10),
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 5, windowMs: 10, clock }),
    model: () => slidingLogRefundModel(5, 10),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 5, windowMs: 10, clock }),
    model: () => slidingCounterRefundModel(5, 10),
  },
];

/** The algorithms that give back without a receipt (a fixed window refuses to). */
const KEYLESS = ALGORITHMS.filter((a) => a.name !== "FixedWindow");

/** One step of a trace: time passes, then a consume or a refund of `cost`. */
const step = fc.record({
  advanceMs: fc.integer({ min: 0, max: 7 }),
  kind: fc.constantFrom("consume", "refund", "pair"),
  cost: fc.integer({ min: 0, max: 6 }),
});

describe("refund step tables (manual clock)", () => {
  // [atMs, op, cost, allowed (consume) or -, remaining after (peek)]
  type Row = readonly [number, "consume" | "refund", number, boolean | null, number];
  const tables: Record<string, readonly Row[]> = {
    // Capacity 5, 1 token per ms: a refund never fills above capacity.
    TokenBucket: [
      [0, "consume", 5, true, 0],
      [0, "refund", 2, null, 2],
      [0, "consume", 3, false, 2],
      [1, "consume", 3, true, 0],
      [1, "refund", 100, null, 5],
      [1, "consume", 6, false, 5],
    ],
    // The newest entries go first: 2 at 0 ms, 3 at 5 ms; a refund of 3 removes the entry
    // at 5 ms, so at 10 ms (the entry at 0 ms leaves) the log is empty.
    SlidingWindowLog: [
      [0, "consume", 2, true, 3],
      [5, "consume", 3, true, 0],
      [5, "refund", 3, null, 3],
      [10, "consume", 5, true, 0],
      [10, "refund", 1, null, 1],
      [10, "consume", 2, false, 1],
    ],
    // From the current window first, then the previous: 4 in window 0, 1 in window 1; at
    // 15 ms (half of window 0 weighs) the estimate is 4 * 0.5 + 1 = 3; a refund of 2 takes 1
    // from window 1 and 1 from window 0: 3 * 0.5 = 1.5.
    SlidingWindowCounter: [
      [0, "consume", 4, true, 1],
      [15, "consume", 1, true, 2],
      [15, "refund", 2, null, 3],
      [15, "refund", 10, null, 5],
      [15, "consume", 5, true, 0],
    ],
  };
  for (const [name, rows] of Object.entries(tables)) {
    test(`${name}: refunds give back units, never past fresh`, () => {
      const clock = manualClock();
      const limiter = ALGORITHMS.find((a) => a.name === name)!.make(clock);
      rows.forEach(([atMs, op, cost, allowed, remaining], i) => {
        clock.set(atMs);
        const where = `row ${i} at ${atMs} ms: ${op}(${cost})`;
        if (op === "consume") expect(limiter.consume(cost).allowed, where).toBe(allowed);
        else limiter.refund(cost);
        expect(limiter.peek(0).remaining, where).toBe(remaining);
      });
    });
  }

  test("LeakyBucket: a refund lowers the level, never below empty", () => {
    const clock = manualClock();
    const bucket = new LeakyBucket({ capacity: 4, leakPerSecond: 1, clock });
    expect(bucket.consume(4).allowed).toBe(true);
    bucket.refund(3);
    expect(bucket.peek(3).allowed).toBe(true);
    expect(bucket.peek(4).allowed).toBe(false);
    bucket.refund(10);
    expect(bucket.isIdle()).toBe(true);
  });

  /**
   * Idle now, or for a log once the tombstone of the entries given back has left (it
   * decides as a new one meanwhile: a receipt of those entries must find them empty).
   */
  function idleOnceGone(
    name: string,
    limiter: { isIdle(): boolean; peek(cost?: number): Decision },
    clock: ManualClock,
  ): void {
    if (name === "SlidingWindowLog") {
      expect(limiter.peek(0), name).toMatchObject({ allowed: true, resetAfterMs: 0 });
      expect(limiter.isIdle(), name).toBe(false);
      clock.advance(1_000_000);
    }
    expect(limiter.isIdle(), name).toBe(true);
  }

  test("a refund back to full leaves the limiter idle (as a new one)", () => {
    for (const { name, make } of ALGORITHMS) {
      const clock = manualClock(100);
      const limiter = make(clock);
      const receipt = limiter.charge(3);
      expect(limiter.isIdle(), name).toBe(false);
      expect(limiter.refund(receipt), name).toBe(3);
      idleOnceGone(name, limiter, clock);
    }
    for (const { name, make } of KEYLESS) {
      const clock = manualClock(100);
      const limiter = make(clock);
      limiter.consume(3);
      expect(limiter.refund(3), name).toBe(3);
      idleOnceGone(name, limiter, clock);
    }
  });

  test("FixedWindow refuses a refund without a receipt: it cannot tell which window the units came from", () => {
    const clock = manualClock();
    const window = new FixedWindow({ limit: 5, windowMs: 10, clock });
    window.consume(5);
    for (const cost of [undefined, 0, 1]) {
      expect(() => window.refund(cost)).toThrow(
        "FixedWindow.refund: give the receipt of the charge (refund(receipt, units)): a fixed window cannot tell which window the units were charged in, and units of a window that has ended are gone",
      );
    }
    expect(() => window.refund(-1)).toThrow(RangeError);
    expect(window.peek(0).remaining).toBe(0);
  });

  test("refund validates its cost as consume does", () => {
    for (const { name, make } of KEYLESS) {
      const limiter = make(manualClock());
      expect(() => limiter.refund(-1), name).toThrow(RangeError);
      expect(() => limiter.refund(Number.NaN), name).toThrow(/refund: cost must be/);
      expect(() => limiter.refund(Number.POSITIVE_INFINITY), name).toThrow(RangeError);
      expect(() => limiter.refund("1" as unknown as number), name).toThrow(TypeError);
      limiter.refund(0);
      expect(limiter.isIdle(), name).toBe(true);
    }
  });
});

describe("refund properties against the reference models", () => {
  for (const { name, make, model } of KEYLESS) {
    test(`${name} decides as its model through consumes and refunds`, () => {
      fc.assert(
        fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
          const clock = manualClock();
          const limiter = make(clock);
          const m = model();
          let t = 0;
          for (const [i, s] of steps.entries()) {
            t += s.advanceMs;
            clock.set(t);
            if (s.kind === "refund") {
              limiter.refund(s.cost);
              m.refund(t, s.cost);
            } else {
              const got = limiter.consume(s.cost);
              const want = m.decide(t, s.cost, true);
              expect(got.allowed, `step ${i}`).toBe(want.allowed);
              if (s.kind === "pair" && got.allowed) {
                limiter.refund(s.cost);
                m.refund(t, s.cost);
              }
            }
            expect(limiter.peek(0).remaining, `step ${i}`).toBe(m.decide(t, 0, false).remaining);
          }
        }),
      );
    });

    test(`${name}: consume(c) then refund(c) at the same instant equals no consume`, () => {
      fc.assert(
        fc.property(
          fc.array(step, { maxLength: 40 }),
          fc.array(fc.nat({ max: 39 }), { maxLength: 10 }),
          (steps, at) => {
            const clock = manualClock();
            const a = make(clock);
            const b = make(clock);
            let t = 0;
            for (const [i, s] of steps.entries()) {
              t += s.advanceMs;
              clock.set(t);
              if (at.includes(i)) {
                // a takes and gives back at once; b does nothing: both must then agree.
                if (a.consume(s.cost).allowed) a.refund(s.cost);
              }
              if (s.kind === "refund") {
                a.refund(s.cost);
                b.refund(s.cost);
              } else {
                const da = a.consume(s.cost);
                const db = b.consume(s.cost);
                expect(da.allowed, `step ${i}`).toBe(db.allowed);
                expect(da.remaining, `step ${i}`).toBe(db.remaining);
                expect(da.retryAfterMs, `step ${i}`).toBeCloseTo(db.retryAfterMs, 6);
              }
            }
            if (name === "SlidingWindowLog") {
              // A log keeps a tombstone where whole entries were given back, until they
              // would have left (their receipts may still come): it decides as b does,
              // to resetAfterMs, and is idle once that time has passed.
              // (Times may be a float step later: an entry charged at a tombstone's
              // instant leaves just after it.)
              for (const cost of [0, 1]) {
                const [x, y] = [a.peek(cost), b.peek(cost)];
                expect([x.allowed, x.remaining]).toEqual([y.allowed, y.remaining]);
                expect(x.resetAfterMs).toBeGreaterThanOrEqual(y.resetAfterMs);
                expect(x.resetAfterMs - y.resetAfterMs).toBeLessThanOrEqual(1e-9);
              }
              clock.set(t + 1_000_000);
            }
            expect(a.isIdle()).toBe(b.isIdle());
          },
        ),
      );
    });

    test(`${name}: refunds never make the state fresher than fresh`, () => {
      fc.assert(
        fc.property(
          fc.array(step, { maxLength: 40 }),
          fc.integer({ min: 1, max: 50 }),
          (steps, big) => {
            const clock = manualClock();
            const limiter = make(clock);
            let t = 0;
            for (const s of steps) {
              t += s.advanceMs;
              clock.set(t);
              if (s.kind === "refund") limiter.refund(s.cost * big);
              else limiter.consume(s.cost);
              const fresh = make(clock);
              for (const cost of [0, 1, 5, 6]) {
                // Never more room than a fresh limiter: whatever fresh denies, it denies.
                if (!fresh.peek(cost).allowed) expect(limiter.peek(cost).allowed).toBe(false);
              }
              expect(limiter.peek(0).remaining).toBeLessThanOrEqual(fresh.peek(0).remaining);
            }
          },
        ),
      );
    });
  }
});

describe("allOf refund", () => {
  test("a refund goes to every part", () => {
    const clock = manualClock();
    const second = new TokenBucket({ capacity: 3, refillPerSecond: 0, clock });
    const hour = new SlidingWindowLog({ limit: 10, windowMs: 3_600_000, clock });
    const both = allOf(second, hour);
    expect(both.consume(3).allowed).toBe(true);
    expect(both.refund(2)).toBe(2);
    expect(second.peek(0).remaining).toBe(2);
    expect(hour.peek(0).remaining).toBe(9);
    both.refund(5);
    // The log's tombstone of the entry given back lasts its hour; then both are idle.
    expect(both.peek(0)).toMatchObject({ allowed: true, resetAfterMs: 0 });
    clock.advance(3_600_000);
    expect(both.isIdle()).toBe(true);
  });

  test("a refund without a receipt is refused before any part when a part is a FixedWindow", () => {
    const clock = manualClock();
    const second = new TokenBucket({ capacity: 3, refillPerSecond: 0, clock });
    const hour = new FixedWindow({ limit: 10, windowMs: 3_600_000, clock });
    const both = allOf(second, hour);
    const receipt = both.charge(3);
    expect(() => both.refund(1)).toThrow(
      /allOf.refund: part 1 \(an object\) gives back only through a receipt/,
    );
    expect(second.peek(0).remaining).toBe(0);
    expect(both.refund(receipt, 2)).toBe(2);
    expect([second.peek(0).remaining, hour.peek(0).remaining]).toEqual([2, 9]);
    expect(both.refund(receipt)).toBe(1);
    expect(both.refund(receipt)).toBe(0);
    expect(both.isIdle()).toBe(true);
  });

  test("a composite refund whose second part's clock reads NaN gives nothing back to the first", () => {
    let bad = false;
    const clock = manualClock();
    const first = new TokenBucket({ capacity: 3, refillPerSecond: 0, clock });
    const second = new TokenBucket({
      capacity: 3,
      refillPerSecond: 0,
      clock: () => (bad ? Number.NaN : clock()),
    });
    const both = allOf(first, second);
    expect(both.consume(2).allowed).toBe(true);
    bad = true;
    expect(() => both.refund(1)).toThrow(RangeError);
    bad = false;
    expect([first.peek(0).remaining, second.peek(0).remaining]).toEqual([1, 1]);
  });

  test("a part without refund() throws before any part is refunded", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 0, clock });
    const inner = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    const custom: Limiter = {
      allow: (c) => inner.allow(c),
      consume: (c) => inner.consume(c),
      peek: (c) => inner.peek(c),
      reset: () => inner.reset(),
      isIdle: () => inner.isIdle(),
      wait: (c, o) => inner.wait(c, o),
    };
    const both = allOf(bucket, custom);
    both.consume(2);
    expect(() => both.refund(1)).toThrow(/allOf.refund: part 1 has no refund\(\)/);
    expect(bucket.peek(0).remaining).toBe(1);
  });
});

describe("refunds and waiters", () => {
  test("a token bucket refund serves its waiters first-in, first-out, never past capacity", async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 0.001, clock });
    bucket.consume(4);
    const order: string[] = [];
    const first = bucket.wait(3).then(() => order.push("first"));
    const second = bucket.wait(1).then(() => order.push("second"));
    // 1 unit back: the first (3) is not due, so the second (1) may not jump it.
    bucket.refund(1);
    await Promise.resolve();
    expect(order).toEqual([]);
    expect(bucket.consume(1).allowed).toBe(false);
    bucket.refund(100);
    await Promise.all([first, second]);
    expect(order).toEqual(["first", "second"]);
    // Capacity 4 and waiters took 4: nothing is left, however much was refunded.
    expect(bucket.peek(0).remaining).toBe(0);
    expect(bucket.consume(1).allowed).toBe(false);
  });

  test("a window refund grants the head waiter, in order, never above the limit", async () => {
    const clock = manualClock();
    const window = new FixedWindow({ limit: 3, windowMs: 60_000, clock });
    const receipt = window.charge(3);
    const order: number[] = [];
    const a = window.wait(2).then(() => order.push(2));
    const b = window.wait(1).then(() => order.push(1));
    window.refund(receipt, 1); // the head needs 2: nobody moves, and the 1 behind it may not jump
    await Promise.resolve();
    expect(order).toEqual([]);
    window.refund(receipt, 2);
    await Promise.all([a, b]);
    expect(order).toEqual([2, 1]);
    expect(window.peek(0).remaining).toBe(0);
  });
});

describe("KeyedLimiter.refund", () => {
  for (const { name, make } of KEYLESS) {
    test(`${name}: the slab gives back as a limiter of its own, bit for bit`, () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(step, fc.constantFrom("a", "b")), { maxLength: 50 }),
          (steps) => {
            const clock = manualClock();
            const keyed = new KeyedLimiter(make(clock));
            const own = new Map<string, Refundable>();
            let t = 0;
            for (const [s, key] of steps) {
              t += s.advanceMs;
              clock.set(t);
              let limiter = own.get(key);
              if (limiter === undefined) {
                limiter = make(clock);
                own.set(key, limiter);
              }
              if (s.kind === "refund") {
                keyed.refund(key, s.cost);
                limiter.refund(s.cost);
              } else {
                expect(keyed.consume(key, s.cost)).toEqual(limiter.consume(s.cost));
                if (s.kind === "pair") {
                  keyed.refund(key, s.cost);
                  limiter.refund(s.cost);
                }
              }
              expect(keyed.peek(key, 1)).toEqual(limiter.peek(1));
            }
          },
        ),
      );
    });
  }

  test("an allOf policy refunds every part of the key", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      allOf(
        new TokenBucket({ capacity: 3, refillPerSecond: 0, clock }),
        new SlidingWindowLog({ limit: 10, windowMs: 1000, clock }),
      ),
    );
    keyed.consume("k", 3);
    keyed.refund("k", 2);
    expect(keyed.peek("k", 0).remaining).toBe(2);
    keyed.refund("k", 10);
    // The log's tombstone of the entry given back keeps the key until it would have left.
    expect(keyed.peek("k", 0)).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(keyed.sweep()).toBe(0);
    clock.advance(1000);
    expect(keyed.sweep()).toBe(1);
  });

  test("a refund of a key the registry does not hold creates nothing", () => {
    for (const { name, make } of KEYLESS) {
      const keyed = new KeyedLimiter(make(manualClock()));
      keyed.refund("stranger", 3);
      expect(keyed.size, name).toBe(0);
      expect(keyed.stats.created, name).toBe(0);
    }
    const generic = new KeyedLimiter(() => new TokenBucket({ capacity: 2, refillPerSecond: 0 }));
    generic.refund("stranger", 1);
    expect(generic.size).toBe(0);
  });

  test("the generic path refunds the key's limiter; one without refund() is a TypeError", () => {
    const clock = manualClock();
    const generic = new KeyedLimiter(
      () => new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }),
    );
    generic.consume("k", 2);
    generic.refund("k", 1);
    expect(generic.peek("k").allowed).toBe(true);
    const inner = new FixedWindow({ limit: 1, windowMs: 1000, clock });
    const bare = new KeyedLimiter(() => ({
      allow: (c?: number) => inner.allow(c),
      consume: (c?: number) => inner.consume(c),
      peek: (c?: number) => inner.peek(c),
      reset: () => inner.reset(),
      isIdle: () => inner.isIdle(),
      wait: (c?: number) => inner.wait(c),
    }));
    bare.consume("k");
    expect(() => bare.refund("k")).toThrow(
      /refund: the limiter of the policy function has no refund\(\)/,
    );
  });

  test("refund validates the key and the cost", () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1 }));
    expect(() => keyed.refund("k", -1)).toThrow(RangeError);
    expect(() => keyed.refund(1 as unknown as string)).toThrow(TypeError);
    expect(() => keyed.refund("k", "2" as unknown as number)).toThrow(TypeError);
  });

  test("a waiting bucket key: a refund serves its waiters in order, never past capacity", async () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 4, refillPerSecond: 0.001, clock }));
    keyed.consume("k", 4);
    const order: string[] = [];
    const first = keyed.wait("k", 3).then(() => order.push("first"));
    const second = keyed.wait("k", 1).then(() => order.push("second"));
    keyed.refund("k", 1);
    await Promise.resolve();
    expect(order).toEqual([]);
    keyed.refund("k", 100);
    await Promise.all([first, second]);
    expect(order).toEqual(["first", "second"]);
    expect(keyed.consume("k", 1).allowed).toBe(false);
  });

  test("a waiting window key: a refund wakes the head waiter", async () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 60_000, clock }));
    const receipt = keyed.charge("k", 2);
    let granted = false;
    const waiting = keyed.wait("k", 2).then(() => {
      granted = true;
    });
    expect(keyed.refund(receipt, 1)).toBe(1);
    await Promise.resolve();
    expect(granted).toBe(false);
    expect(keyed.refund(receipt, 1)).toBe(1);
    await waiting;
    expect(keyed.peek("k", 0).remaining).toBe(0);
  });
});
