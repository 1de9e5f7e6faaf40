// Refunds through receipts (docs/semantics.md#refunds): a receipt gives back at most what its
// charge took, nothing once those units no longer count, and over any interval the units
// that still count never exceed the policy's bound.
import { inspect } from "node:util";
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
  settle,
  TokenBucket,
} from "../src/index.js";
import { type ManualClock, manualClock } from "./support/manual-clock.js";
import { burstBeyondBound } from "./support/reservation-timeline.js";

type Charging = Limiter & {
  charge(cost?: number): Receipt;
  refund(receipt: Receipt, units?: number): number;
};

/** Each algorithm at limit 4 (a bucket refilling 1 unit per 10 ms), windows of 20 ms. */
const ALGORITHMS: readonly {
  name: string;
  make: (clock: ManualClock) => Charging;
  /** The first breach of the policy's bound by the acts that still count, if any. */
  breach: (acts: readonly Act[]) => string | undefined;
}[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 4, refillPerSecond: 100, clock }),
    breach: (acts) => bucketBreach(acts, 4, 100),
  },
  {
    name: "LeakyBucket",
    make: (clock) => new LeakyBucket({ capacity: 4, leakPerSecond: 100, clock }),
    breach: (acts) => bucketBreach(acts, 4, 100),
  },
  {
    name: "FixedWindow",
    make: (clock) => new FixedWindow({ limit: 4, windowMs: 20, clock }),
    breach: (acts) => perWindowBreach(acts, 4, 20),
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 4, windowMs: 20, clock }),
    breach: (acts) => rollingBreach(acts, 4, 20),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 4, windowMs: 20, clock }),
    breach: (acts) => perWindowBreach(acts, 4, 20),
  },
];

/** A charge that was allowed: when, how much, and how much refunds gave back of it. */
interface Act {
  readonly atMs: number;
  readonly units: number;
  refunded: number;
}

const EPS = 1e-9;

function bucketBreach(acts: readonly Act[], capacity: number, rate: number): string | undefined {
  const counted = acts.map((a) => ({ atMs: a.atMs, units: a.units - a.refunded, what: "" }));
  const burst = burstBeyondBound(counted, capacity, rate);
  return burst === undefined ? undefined : JSON.stringify(burst);
}

function perWindowBreach(acts: readonly Act[], limit: number, windowMs: number) {
  const sums = new Map<number, number>();
  for (const a of acts) {
    const k = Math.floor(a.atMs / windowMs);
    sums.set(k, (sums.get(k) ?? 0) + a.units - a.refunded);
  }
  for (const [k, sum] of sums) if (sum > limit + EPS) return `window ${k}: ${sum} > ${limit}`;
  return undefined;
}

function rollingBreach(acts: readonly Act[], limit: number, windowMs: number) {
  for (const end of acts) {
    let sum = 0;
    for (const a of acts) {
      if (a.atMs > end.atMs - windowMs && a.atMs <= end.atMs) sum += a.units - a.refunded;
    }
    if (sum > limit + EPS) return `(${end.atMs - windowMs}, ${end.atMs}]: ${sum} > ${limit}`;
  }
  return undefined;
}

/** One step: time passes, then a charge, or a refund through the `pick`-th receipt. */
const steps = fc.array(
  fc.record({
    advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 15 })),
    kind: fc.constantFrom("charge", "charge", "refund"),
    cost: fc.constantFrom(0, 0.5, 1, 1, 2, 3),
    pick: fc.nat(),
    /** Units asked back: all it holds (undefined), or a part. */
    units: fc.option(fc.constantFrom(0, 0.5, 1, 2, 5), { nil: undefined }),
  }),
  { minLength: 1, maxLength: 40 },
);

describe("a refund in the next window does not come off that window's count", () => {
  // Limit 5 per 1 s window: 5 charged in [0, 1000), 5 more in [1000, 2000); the first five
  // given back after the boundary. Before receipts a refund came off the current window,
  // so 10 were admitted in one window. The same code runs against a limiter without
  // `charge` (then it consumes, and refunds without a receipt): that is how the old code
  // was shown to admit 10.
  test("KeyedLimiter(FixedWindow), on the slab and the generic path", () => {
    for (const generic of [false, true]) {
      const clock = manualClock();
      const policy = new FixedWindow({ limit: 5, windowMs: 1000, clock });
      const keyed = generic
        ? new KeyedLimiter(() => new FixedWindow({ limit: 5, windowMs: 1000, clock }))
        : new KeyedLimiter(policy);
      const one = {
        charge: (cost: number) => keyedCharge(keyed, "k", cost),
        consume: (cost: number) => keyed.consume("k", cost),
      };
      const taken = [0, 1, 2, 3, 4].map(() => one.charge(1));
      clock.set(1000);
      let admitted = 0;
      for (let i = 0; i < 5; i++) if (one.consume(1).allowed) admitted++;
      for (const receipt of taken) {
        try {
          keyedGiveBack(keyed, "k", receipt, 1);
        } catch {
          // a refund refused changes nothing
        }
      }
      for (let i = 0; i < 5; i++) if (one.consume(1).allowed) admitted++;
      expect(admitted, generic ? "generic" : "slab").toBe(5);
    }
  });

  test("FixedWindow, in memory", () => {
    const clock = manualClock();
    const window = new FixedWindow({ limit: 5, windowMs: 1000, clock });
    const taken = [0, 1, 2, 3, 4].map(() => charge(window, 1));
    clock.set(1000);
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (window.consume(1).allowed) admitted++;
    for (const receipt of taken) giveBack(window, receipt, 1);
    for (let i = 0; i < 5; i++) if (window.consume(1).allowed) admitted++;
    expect(admitted).toBe(5);
  });
});

/** A receipt's public fields, but the key. */
function publicOf(r: Receipt) {
  const { allowed, limit, remaining, retryAfterMs, resetAfterMs } = r;
  const { units, atMs, refundableUntilMs, refunded } = r;
  return {
    allowed,
    limit,
    remaining,
    retryAfterMs,
    resetAfterMs,
    units,
    atMs,
    refundableUntilMs,
    refunded,
  };
}

/** `keyed.charge(key, cost)` when it has it, else `consume` (the old code). */
function keyedCharge(keyed: KeyedLimiter, key: string, cost: number): Receipt | undefined {
  const k = keyed as unknown as { charge?: (key: string, cost: number) => Receipt };
  if (typeof k.charge === "function") return k.charge(key, cost);
  keyed.consume(key, cost);
  return undefined;
}

/** A keyed refund through the receipt, or of `units` of `key` without one (the old code). */
function keyedGiveBack(
  keyed: KeyedLimiter,
  key: string,
  receipt: Receipt | undefined,
  units: number,
) {
  const k = keyed as unknown as { refund(a: unknown, b?: number): unknown };
  if (receipt === undefined) k.refund(key, units);
  else k.refund(receipt);
}

/** `charge(cost)` when the limiter has it, else `consume` (the old code). */
function charge(limiter: Limiter, cost: number): Receipt | undefined {
  const l = limiter as Partial<Charging>;
  if (typeof l.charge === "function") return l.charge(cost);
  limiter.consume(cost);
  return undefined;
}

/** A refund through the receipt, or of `units` without one where there is none (the old code). */
function giveBack(limiter: Limiter, receipt: Receipt | undefined, units: number): void {
  const l = limiter as { refund(cost?: unknown, units?: number): unknown };
  if (receipt === undefined) l.refund(units);
  else l.refund(receipt);
}

describe("receipts of the five algorithms", () => {
  for (const { name, make, breach } of ALGORITHMS) {
    test(`${name}: a refund gives back at most what the charge took, nothing once its units no longer count, and what counts stays within the bound`, () => {
      fc.assert(
        fc.property(steps, (trace) => {
          const clock = manualClock();
          const limiter = make(clock);
          const receipts: { receipt: Receipt; act: Act | undefined }[] = [];
          const acts: Act[] = [];
          let t = 0;
          for (const [i, s] of trace.entries()) {
            t += s.advanceMs;
            clock.set(t);
            const where = `step ${i} at ${t} ms`;
            if (s.kind === "charge" || receipts.length === 0) {
              const receipt = limiter.charge(s.cost);
              expect(receipt.atMs, where).toBe(t);
              expect(receipt.units, where).toBe(receipt.allowed ? s.cost : 0);
              const act =
                receipt.allowed && s.cost > 0 ? { atMs: t, units: s.cost, refunded: 0 } : undefined;
              if (act !== undefined) acts.push(act);
              receipts.push({ receipt, act });
            } else {
              const { receipt, act } = receipts[s.pick % receipts.length]!;
              const before = receipt.refunded;
              const given = limiter.refund(receipt, s.units);
              expect(given, where).toBeGreaterThanOrEqual(0);
              expect(given, where).toBeLessThanOrEqual(s.units ?? receipt.units - before);
              expect(receipt.refunded, where).toBe(before + given);
              expect(receipt.refunded, where).toBeLessThanOrEqual(receipt.units);
              if (t >= receipt.refundableUntilMs) expect(given, `${where}: past its time`).toBe(0);
              if (act !== undefined) act.refunded += given;
            }
            expect(breach(acts), where).toBeUndefined();
          }
        }),
        { numRuns: 300 },
      );
    });

    /**
     * The same decision; its times may be a float step later (a log's entry charged at the
     * instant of a tombstone leaves just after it: LogRing.append), never sooner.
     */
    const sameDecision = (x: Decision, y: Decision) =>
      x.allowed === y.allowed &&
      x.limit === y.limit &&
      x.remaining === y.remaining &&
      laterByAStep(x.retryAfterMs, y.retryAfterMs) &&
      laterByAStep(x.resetAfterMs, y.resetAfterMs);

    test(`${name}: a charge given back at once through its receipt leaves the limiter as if it never was`, () => {
      fc.assert(
        fc.property(steps, fc.array(fc.nat({ max: 39 }), { maxLength: 8 }), (trace, at) => {
          const clock = manualClock();
          const a = make(clock);
          const b = make(clock);
          let t = 0;
          for (const [i, s] of trace.entries()) {
            t += s.advanceMs;
            clock.set(t);
            if (at.includes(i)) {
              const receipt = a.charge(s.cost);
              expect(a.refund(receipt), `step ${i}`).toBe(receipt.units);
            }
            if (s.kind === "charge") {
              const da = a.consume(s.cost);
              expect(sameDecision(da, b.consume(s.cost)), `step ${i}`).toBe(true);
            }
          }
          if (name === "SlidingWindowLog") clock.set(t + 1_000_000); // its tombstones left
          expect(a.isIdle()).toBe(b.isIdle());
        }),
      );
    });
  }
});

describe("receipt step tables (manual clock)", () => {
  test("TokenBucket: nothing once the refill has repaid the charge", () => {
    // Capacity 4 at 1 token per 10 ms: a charge of 2 at 0 ms is repaid by 20 ms (the bucket
    // is full again); at 15 ms half a token of it is still owed.
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 100, clock });
    const r = bucket.charge(2);
    expect(r.refundableUntilMs).toBe(20);
    clock.set(15);
    expect(bucket.refund(r)).toBe(0.5);
    clock.set(16);
    expect(bucket.refund(r)).toBe(0);
    expect(bucket.isIdle()).toBe(true);
  });

  test("TokenBucket: a refund of an earlier charge shortens what a later one may count on", () => {
    // Capacity 10 at 1 token per ms. x (6) at 0, y (4) at 0: the bucket is empty, full
    // again at 10 ms. x given back at 0 ms (6): full at 4 ms. At 5 ms z takes all 10. y's
    // own charge was repaid by 4 ms: giving back 4 now would let 14 act at 5 ms.
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 1000, clock });
    const x = bucket.charge(6);
    const y = bucket.charge(4);
    expect(bucket.refund(x)).toBe(6);
    clock.set(5);
    expect(bucket.consume(10).allowed).toBe(true);
    expect(bucket.refund(y)).toBe(0);
    expect(bucket.consume(4).allowed).toBe(false);
  });

  test("FixedWindow: the window charged, and only while it lasts", () => {
    const clock = manualClock(5);
    const window = new FixedWindow({ limit: 4, windowMs: 20, clock });
    const r = window.charge(3);
    expect(r).toMatchObject({
      allowed: true,
      units: 3,
      atMs: 5,
      refundableUntilMs: 20,
      refunded: 0,
    });
    expect(window.refund(r, 1)).toBe(1);
    expect(window.refund(r, 5)).toBe(2); // what it still holds
    expect(window.refund(r)).toBe(0);
    const s = window.charge(4);
    clock.set(20);
    expect(window.refund(s)).toBe(0);
    expect(window.consume(4).allowed).toBe(true);
  });

  test("a reset or a reconfigure since the charge leaves nothing to give back", () => {
    for (const { name, make } of ALGORITHMS) {
      const clock = manualClock();
      const limiter = make(clock);
      const r = limiter.charge(2);
      limiter.reset();
      limiter.consume(4);
      expect(limiter.refund(r), name).toBe(0);
      const s = limiter.charge(0);
      expect(s.units, name).toBe(0);
      expect(limiter.refund(s), name).toBe(0);
    }
    const clock = manualClock();
    const window = new FixedWindow({ limit: 4, windowMs: 20, clock });
    const r = window.charge(2);
    window.reconfigure({ limit: 3 });
    expect(window.refund(r)).toBe(0);
  });

  test("a denial's receipt takes and gives back nothing", () => {
    for (const { name, make } of ALGORITHMS) {
      const limiter = make(manualClock());
      const denied = limiter.charge(5);
      expect(denied, name).toMatchObject({ allowed: false, units: 0, refunded: 0 });
      expect(denied.refundableUntilMs, name).toBe(denied.atMs);
      expect(limiter.refund(denied), name).toBe(0);
    }
  });

  test("a receipt is refunded only through the limiter that issued it", () => {
    const clock = manualClock();
    const a = new TokenBucket({ capacity: 4, refillPerSecond: 1, clock });
    const b = new TokenBucket({ capacity: 4, refillPerSecond: 1, clock });
    const r = a.charge(2);
    expect(() => b.refund(r)).toThrow(
      "TokenBucket.refund: the receipt is another limiter's: refund it through that one",
    );
    expect(() => a.refund({ ...r })).toThrow(
      "TokenBucket.refund: receipt must be what this limiter's charge() returned, got an object",
    );
    expect(() => a.refund(r, -1)).toThrow(RangeError);
    expect(a.peek(0).remaining).toBe(2);
  });

  test("allOf: each part by its own receipt; every clock read before any part gives back", () => {
    let bad = false;
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 4, refillPerSecond: 0, clock });
    const window = new FixedWindow({
      limit: 4,
      windowMs: 20,
      clock: () => (bad ? Number.NaN : clock()),
    });
    const both = allOf(bucket, window);
    const r = both.charge(3);
    expect(r).toMatchObject({
      allowed: true,
      units: 3,
      refundableUntilMs: Number.POSITIVE_INFINITY,
    });
    bad = true;
    expect(() => both.refund(r, 1)).toThrow(RangeError);
    expect(bucket.peek(0).remaining, "the bucket gave nothing back").toBe(1);
    bad = false;
    clock.set(20);
    // The window has ended: its part gives nothing; the bucket (rate 0) gives back all.
    expect(both.refund(r)).toBe(0);
    expect(bucket.peek(0).remaining).toBe(4);
  });
});

describe("KeyedLimiter receipts decide and give back as a limiter of its own", () => {
  const POLICIES: readonly { name: string; make: (clock: ManualClock) => Charging }[] = [
    ...ALGORITHMS,
    {
      name: "allOf(TokenBucket, FixedWindow)",
      make: (clock) =>
        allOf(
          new TokenBucket({ capacity: 4, refillPerSecond: 100, clock }),
          new FixedWindow({ limit: 3, windowMs: 20, clock }),
        ) as unknown as Charging,
    },
  ];
  for (const { name, make } of POLICIES) {
    for (const generic of [false, true]) {
      test(`${name}${generic ? " (generic path)" : ""}`, () => {
        fc.assert(
          fc.property(
            steps,
            fc.array(fc.constantFrom("a", "b"), { minLength: 40, maxLength: 40 }),
            (trace, keys) => {
              const clock = manualClock();
              const keyed = generic
                ? new KeyedLimiter(() => make(clock))
                : new KeyedLimiter(make(clock) as Charging & { clone(): Limiter });
              const own = new Map<string, Charging>();
              const receipts: { key: string; keyed: Receipt; own: Receipt }[] = [];
              let t = 0;
              for (const [i, s] of trace.entries()) {
                t += s.advanceMs;
                clock.set(t);
                const key = keys[i]!;
                let limiter = own.get(key);
                if (limiter === undefined) {
                  limiter = make(clock);
                  own.set(key, limiter);
                }
                const where = `step ${i} at ${t} ms`;
                if (s.kind === "charge" || receipts.length === 0) {
                  const a = keyed.charge(key, s.cost);
                  const b = limiter.charge(s.cost);
                  expect(publicOf(a), where).toEqual(publicOf(b));
                  expect(a.key, where).toBe(key);
                  receipts.push({ key, keyed: a, own: b });
                } else {
                  const r = receipts[s.pick % receipts.length]!;
                  const ownLimiter = own.get(r.key)!;
                  const a = keyed.refund(r.keyed, s.units);
                  const b = ownLimiter.refund(r.own, s.units);
                  expect(a, where).toBe(b);
                  expect(r.keyed.refunded, where).toBe(r.own.refunded);
                }
                for (const k of ["a", "b"]) {
                  const l = own.get(k);
                  if (l !== undefined) expect(keyed.peek(k, 1), `${where} ${k}`).toEqual(l.peek(1));
                }
              }
            },
          ),
          { numRuns: 150 },
        );
      });
    }
  }

  test("a reset of the key, a clear or a reconfigure since the charge leaves nothing to give back", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 4, refillPerSecond: 0, clock }));
    const r = keyed.charge("k", 2);
    const other = keyed.charge("j", 2);
    keyed.reset("k");
    keyed.consume("k", 4);
    expect(keyed.refund(r)).toBe(0);
    expect(keyed.refund(other, 1), "another key's receipt still counts").toBe(1);
    keyed.reconfigure({ capacity: 5 });
    expect(keyed.refund(other)).toBe(0);
    const s = keyed.charge("j", 1);
    keyed.clear();
    expect(keyed.refund(s)).toBe(0);
  });

  test("a FixedWindow policy refuses a refund without a receipt", () => {
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 1000 }));
    keyed.consume("k");
    expect(() => keyed.refund("k")).toThrow(
      "KeyedLimiter.refund: give the receipt of the charge (refund(receipt, units)): the policy has a FixedWindow, which cannot tell which window the units were charged in",
    );
  });
});

describe("settle: charge the estimate up front, settle the difference after", () => {
  test("gives back what the request did not use, or takes the excess; a denial settles nothing", () => {
    const clock = manualClock();
    const perUser = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 0, clock }));
    const r = perUser.charge("u", 8);
    expect(settle(perUser, r, 3)).toEqual({ refunded: 5, excess: undefined });
    expect(perUser.peek("u", 0).remaining).toBe(7);
    const s = perUser.charge("u", 4);
    expect(settle(perUser, s, 6).excess).toMatchObject({ allowed: true, remaining: 1 });
    const t = perUser.charge("u", 5);
    expect(t.allowed).toBe(false);
    expect(settle(perUser, t, 5)).toEqual({ refunded: 0, excess: undefined });
    expect(() => settle(perUser, r, -1)).toThrow(
      "settle: actualUnits must be a finite number >= 0, got -1",
    );
  });

  test("regression: settling one receipt twice took its excess twice; the second settle is refused", () => {
    const clock = manualClock();
    const budget = new KeyedLimiter(new TokenBucket({ capacity: 1000, refillPerSecond: 0, clock }));
    const r = budget.charge("u", 100);
    expect(settle(budget, r, 300).excess).toMatchObject({ allowed: true, remaining: 700 });
    expect(() => settle(budget, r, 300)).toThrow(
      "settle: this receipt was settled already: settle each charge once, with the request's whole cost",
    );
    expect(budget.peek("u", 0).remaining).toBe(700);
  });

  test("a receipt is plain data in JSON and in a log line, not its limiter", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }));
    const r = keyed.charge("u", 2);
    const fields = {
      allowed: true,
      limit: 10,
      remaining: 8,
      retryAfterMs: 0,
      resetAfterMs: 2000,
      key: "u",
      units: 2,
      atMs: 0,
      refundableUntilMs: 2000,
      refunded: 0,
    };
    expect(JSON.parse(JSON.stringify(r))).toEqual(fields);
    expect(inspect(r)).not.toContain("KeyedLimiter");
    expect(
      JSON.parse(
        JSON.stringify(
          allOf(
            new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
            new FixedWindow({ limit: 5, windowMs: 1000, clock }),
          ).charge(2),
        ),
      ),
    ).toHaveProperty("units", 2);
  });

  test("an unkeyed fixed window: what was not used comes back only while its window lasts", () => {
    const clock = manualClock();
    const window = new FixedWindow({ limit: 10, windowMs: 1000, clock });
    const early = window.charge(6);
    clock.set(1000);
    expect(settle(window, early, 1).refunded).toBe(0);
    const late = window.charge(6);
    expect(settle(window, late, 1).refunded).toBe(5);
  });
});

/** `x` is `y` or at most a few float steps later (never sooner). */
function laterByAStep(x: number, y: number): boolean {
  return x === y || (x > y && x - y <= Math.abs(y) * 2 ** -50);
}

describe("a key's receipts from before restore() give nothing back", () => {
  // Restoring an empty state wrote the guard an entry ending now, so it did not hold, and
  // the old receipt gave back the unit of the request charged after the restore.
  const policies: [string, () => Limiter & { clone(): Limiter }][] = [
    ["SlidingWindowLog", () => new SlidingWindowLog({ limit: 1, windowMs: 50, clock })],
    ["SlidingWindowCounter", () => new SlidingWindowCounter({ limit: 1, windowMs: 50, clock })],
    ["TokenBucket", () => new TokenBucket({ capacity: 1, refillPerSecond: 1, clock })],
  ];
  let now = 1000;
  function clock(): number {
    return now;
  }
  test.each(policies)("%s, restoring an empty key's snapshot", (_name, make) => {
    now = 1000;
    const keyed = new KeyedLimiter(make());
    const receipt = keyed.charge("a");
    keyed.restore("a", keyed.snapshot("empty"));
    expect(keyed.consume("a").allowed).toBe(true);
    expect(keyed.refund(receipt)).toBe(0);
    expect(keyed.consume("a").allowed).toBe(false);
  });
});
