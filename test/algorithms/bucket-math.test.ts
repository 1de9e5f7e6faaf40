import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { tokensAfter } from "../../src/algorithms/bucket-math.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { allOf } from "../../src/composite/all-of.js";
import type { Clock } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";

// Every user of bucket-math.ts: the two buckets, and the keyed slabs (one bucket, allOf).
interface Target {
  readonly name: string;
  make(clock: Clock, capacity: number, ratePerSecond: number): (cost: number) => boolean;
  consume(clock: Clock, capacity: number, ratePerSecond: number): (cost: number) => Decision;
}
type Decision = ReturnType<TokenBucket["consume"]>;

const token = (clock: Clock, capacity: number, refillPerSecond: number) =>
  new TokenBucket({ capacity, refillPerSecond, clock });
const leaky = (clock: Clock, capacity: number, leakPerSecond: number) =>
  new LeakyBucket({ capacity, leakPerSecond, clock });
// The second part is looser, so the first one binds: the bound below is the first's.
const both = (clock: Clock, capacity: number, rate: number) =>
  allOf(token(clock, capacity, rate), leaky(clock, capacity * 2, rate * 2));

const TARGETS: readonly Target[] = [
  {
    name: "TokenBucket",
    make: (clock, c, r) => {
      const b = token(clock, c, r);
      return (cost) => b.allow(cost);
    },
    consume: (clock, c, r) => {
      const b = token(clock, c, r);
      return (cost) => b.consume(cost);
    },
  },
  {
    name: "LeakyBucket",
    make: (clock, c, r) => {
      const b = leaky(clock, c, r);
      return (cost) => b.allow(cost);
    },
    consume: (clock, c, r) => {
      const b = leaky(clock, c, r);
      return (cost) => b.consume(cost);
    },
  },
  {
    name: "KeyedLimiter(TokenBucket) slab",
    make: (clock, c, r) => {
      const k = new KeyedLimiter(token(clock, c, r));
      return (cost) => k.allow("k", cost);
    },
    consume: (clock, c, r) => {
      const k = new KeyedLimiter(token(clock, c, r));
      return (cost) => k.consume("k", cost);
    },
  },
  {
    name: "KeyedLimiter(LeakyBucket) slab",
    make: (clock, c, r) => {
      const k = new KeyedLimiter(leaky(clock, c, r));
      return (cost) => k.allow("k", cost);
    },
    consume: (clock, c, r) => {
      const k = new KeyedLimiter(leaky(clock, c, r));
      return (cost) => k.consume("k", cost);
    },
  },
  {
    name: "KeyedLimiter(allOf of buckets) multi-bucket slab",
    make: (clock, c, r) => {
      const k = new KeyedLimiter(both(clock, c, r));
      return (cost) => k.allow("k", cost);
    },
    consume: (clock, c, r) => {
      const k = new KeyedLimiter(both(clock, c, r));
      return (cost) => k.consume("k", cost);
    },
  },
];

describe("tokensAfter", () => {
  test("keeps the overdraft within the tolerance instead of clamping it at 0", () => {
    expect(tokensAfter(1, 0.25)).toBe(0.75);
    expect(tokensAfter(0, 2 ** -30)).toBe(-(2 ** -30));
    expect(tokensAfter(1, 1)).toBe(0);
  });
});

describe.each(TARGETS)("the fit tolerance is forgiven once, not per request: $name", (target) => {
  test("regression: after capacity 1 was spent, all 1,000,000 allow(1e-9) were granted", () => {
    const clock = manualClock();
    const allow = target.make(clock, 1, 0);
    expect(allow(1)).toBe(true);
    let granted = 0;
    for (let i = 0; i < 1_000_000; i++) if (allow(1e-9)) granted++;
    expect(granted, "one request's tolerance, as the window limiters").toBe(1);
    expect(allow(0), "a free probe is still allowed").toBe(true);
  });

  test("regression: a capacity of 1e-9 never ran out", () => {
    const clock = manualClock();
    const allow = target.make(clock, 1e-9, 0);
    let granted = 0;
    for (let i = 0; i < 1000; i++) if (allow(1e-9)) granted++;
    expect(granted, "the capacity, then one request within the tolerance").toBe(2);
  });

  test("regression: an overdraft reads remaining 0, counts in retry and reset, and a free probe is allowed", () => {
    const clock = manualClock();
    // 2^20 + 2^-12 fits 2^20 within the tolerance (1e-9 * cost ~ 1.05e-3): overdraft 2^-12.
    // At 3000/s no time below lands within cleanMs's snapping distance of an integer.
    const rate = 3000;
    const consume = target.consume(clock, 2 ** 20, rate);
    const overdraft = 2 ** -12;
    const ms = (units: number) => (units * 1000) / rate;
    const full = ms(2 ** 20 + overdraft);
    expect(full, "the overdraft shows in the time to full").not.toBe(ms(2 ** 20));
    const steps: [number, Partial<Decision>][] = [
      [2 ** 20 + overdraft, { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: full }],
      [0, { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: full }],
      [1, { allowed: false, remaining: 0, retryAfterMs: ms(1 + overdraft), resetAfterMs: full }],
      [2 ** -31, { allowed: false, remaining: 0, retryAfterMs: ms(overdraft + 2 ** -31) }],
    ];
    for (const [i, [cost, expected]] of steps.entries()) {
      expect(consume(cost), `step ${i}: consume(${cost})`).toMatchObject(expected);
    }
    clock.advance(ms(overdraft)); // repaid: 0 tokens, and 2^-31 fits within the tolerance
    expect(consume(2 ** -31), "after the overdraft is repaid").toMatchObject({ allowed: true });
  });

  test("property: allowed cost over any interval d <= capacity + rate*d/1000 + 1e-9*max(1, cost), one request's tolerance", () => {
    // Dyadic costs and capacities, rates in eighths per ms and integer times: every sum is
    // exact, so the bound needs no slack. Costs of 2^-30 and 2^-31 are below the 1e-9
    // tolerance: clamping the overdraft at 0 granted every one of them once the bucket was empty.
    const tiny = fc.constantFrom(2 ** -30, 2 ** -31, 3 * 2 ** -31);
    const cost = fc.oneof(
      tiny,
      tiny,
      fc.constantFrom(0, 0.5, 1, 2),
      fc.integer({ min: 0, max: 6 }),
    );
    const capacity = fc.oneof(fc.integer({ min: 1, max: 5 }), tiny, fc.constant(1.5));
    const rate = fc.constantFrom(0, 0, 125, 250, 1000, 2000);
    const step = fc.record({ dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 20 })), cost });
    fc.assert(
      fc.property(capacity, rate, fc.array(step, { maxLength: 120 }), (cap, r, timeline) => {
        const clock = manualClock();
        const allow = target.make(clock, cap, r);
        const log: [number, number][] = [];
        let maxCost = 0;
        for (const s of timeline) {
          clock.advance(s.dt);
          if (s.cost > maxCost) maxCost = s.cost;
          const allowed = allow(s.cost);
          if (s.cost === 0) expect(allowed, "a free probe is always allowed").toBe(true);
          if (allowed) log.push([clock(), s.cost]);
        }
        const tolerance = 1e-9 * Math.max(1, maxCost);
        for (let i = 0; i < log.length; i++) {
          let sum = 0;
          for (let j = i; j < log.length; j++) {
            sum += log[j]![1];
            const d = log[j]![0] - log[i]![0];
            expect(sum, `requests ${i}..${j}`).toBeLessThanOrEqual(
              cap + (r * d) / 1000 + tolerance,
            );
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
