import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  allOf,
  type CloneableLimiter,
  FixedWindow,
  LeakyBucket,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../../src/index.js";
import {
  bounded,
  DEFAULT_MAX_BYTES,
  NO_SWEEP,
  statsOf,
  UnboundedReference,
} from "../support/bounded-registry.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";

/**
 * The bound's promise, for every policy: under a flood of made-up keys, with any
 * `maxKeys` and either `whenFull`, the bounded registry never lets a request through that
 * the same policy without a bound (one limiter per key, never forgotten) would have
 * denied. A client cannot get a fresh limit by pushing its own key out.
 */

/** One policy under test: its limit (the largest cost it admits) and its window or refill time. */
interface PolicyCase {
  readonly name: string;
  readonly capacity: number;
  readonly windowMs: number;
  readonly make: (clock: ManualClock) => CloneableLimiter;
}

const policies: readonly PolicyCase[] = [
  {
    name: "TokenBucket",
    capacity: 5,
    windowMs: 5000,
    make: (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
  },
  {
    name: "LeakyBucket",
    capacity: 5,
    windowMs: 5000,
    make: (clock) => new LeakyBucket({ capacity: 5, leakPerSecond: 1, clock }),
  },
  {
    name: "FixedWindow",
    capacity: 5,
    windowMs: 1000,
    make: (clock) => new FixedWindow({ limit: 5, windowMs: 1000, clock }),
  },
  {
    name: "SlidingWindowLog",
    capacity: 5,
    windowMs: 1000,
    make: (clock) => new SlidingWindowLog({ limit: 5, windowMs: 1000, clock }),
  },
  {
    name: "SlidingWindowCounter",
    capacity: 5,
    windowMs: 1000,
    make: (clock) => new SlidingWindowCounter({ limit: 5, windowMs: 1000, clock }),
  },
  {
    // The README's layered example, scaled down: a burst bucket under a window.
    name: "allOf(TokenBucket, FixedWindow)",
    capacity: 5,
    windowMs: 4000,
    make: (clock) =>
      allOf(
        new TokenBucket({ capacity: 5, refillPerSecond: 5, clock }),
        new FixedWindow({ limit: 8, windowMs: 4000, clock }),
      ),
  },
  {
    name: "allOf(TokenBucket, TokenBucket)",
    capacity: 4,
    windowMs: 4000,
    make: (clock) =>
      allOf(
        new TokenBucket({ capacity: 4, refillPerSecond: 4, clock }),
        new TokenBucket({ capacity: 6, refillPerSecond: 1.5, clock }),
      ),
  },
  {
    name: "allOf(SlidingWindowLog, TokenBucket)",
    capacity: 4,
    windowMs: 2000,
    make: (clock) =>
      allOf(
        new SlidingWindowLog({ limit: 6, windowMs: 2000, clock }),
        new TokenBucket({ capacity: 4, refillPerSecond: 2, clock }),
      ),
  },
];

/** The few keys that keep coming back, against which the flood is aimed. */
const VICTIMS = ["victim-a", "victim-b", "victim-c"] as const;

/**
 * One step: time passes, then one request of a victim, or a burst of requests of fresh
 * flood keys (one request each, all at the same time).
 */
interface Step {
  readonly advanceMs: number;
  readonly victim: number | undefined;
  readonly burst: number;
  readonly cost: number;
  readonly method: "allow" | "consume";
}

function stepArb(c: PolicyCase): fc.Arbitrary<Step> {
  return fc.record({
    advanceMs: fc.oneof(
      { arbitrary: fc.constant(0), weight: 3 },
      { arbitrary: fc.integer({ min: 0, max: 50 }), weight: 2 },
      { arbitrary: fc.integer({ min: 0, max: 2 * c.windowMs }), weight: 1 },
    ),
    victim: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 1 },
      { arbitrary: fc.integer({ min: 0, max: VICTIMS.length - 1 }), weight: 2 },
    ),
    burst: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 60 })),
    cost: fc.oneof(
      fc.integer({ min: 0, max: c.capacity + 1 }),
      fc.double({ min: 0, max: c.capacity + 1, noNaN: true, noDefaultInfinity: true }),
    ),
    method: fc.constantFrom("allow", "consume"),
  });
}

describe.each(policies)("a flood of made-up keys, $name policy", (c) => {
  test.each(["evict", "refuse"] as const)(
    'whenFull "%s": nothing is allowed that the unbounded policy would deny; size and bytes stay bounded',
    (whenFull) => {
      fc.assert(
        fc.property(
          fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 50 })),
          fc.array(stepArb(c), { minLength: 1, maxLength: 60 }),
          // A small clock, and a Date.now()-sized one: a trace once lost a window's count
          // to the float step of a large reading.
          fc.constantFrom(1_000_000, 1_700_000_000_000.25, 2 ** 52),
          (maxKeys, steps, startMs) => {
            const clock = manualClock(startMs);
            const policy = c.make(clock);
            // "evict" is the default; left out, so the default is what is tested.
            const keyed = bounded(
              policy,
              whenFull === "evict" ? { ...NO_SWEEP, maxKeys } : { ...NO_SWEEP, maxKeys, whenFull },
            );
            const reference = new UnboundedReference(policy);
            let flood = 0;
            steps.forEach((step, i) => {
              clock.advance(step.advanceMs);
              const keys =
                step.victim === undefined
                  ? Array.from({ length: step.burst }, () => `flood-${flood++}`)
                  : [VICTIMS[step.victim]!];
              for (const key of keys) request(i, key);
            });

            function request(i: number, key: string): void {
              const step = steps[i]!;
              const where = `step ${i}: ${step.method}(${key}, ${step.cost}) at ${clock()} ms, maxKeys ${maxKeys}`;
              const unbounded = reference.wouldAllow(key, step.cost);
              const allowed =
                step.method === "allow"
                  ? keyed.allow(key, step.cost)
                  : keyed.consume(key, step.cost).allowed;
              if (allowed) {
                expect(unbounded, `${where}: allowed, but the unbounded policy denies it`).toBe(
                  true,
                );
                reference.admit(key, step.cost);
              }
              const stats = statsOf(keyed);
              if (stats.evictedLossy === 0 && stats.refused === 0) {
                // Until a key is dropped in use or refused, the bound changes nothing.
                expect(allowed, `${where}: nothing lost yet, so exactly the unbounded answer`).toBe(
                  unbounded,
                );
              }
              expect(keyed.size, `${where}: size`).toBeLessThanOrEqual(maxKeys);
              expect(stats.bytes, `${where}: stats.bytes`).toBeLessThanOrEqual(DEFAULT_MAX_BYTES);
            }
          },
        ),
        { numRuns: 150 },
      );
    },
  );
});
