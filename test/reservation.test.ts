import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { manualClock } from "./support/manual-clock.js";
import { timerClock } from "./support/timer-clock.js";
import { leakyBucketModel, tokenBucketModel } from "./support/wait-model.js";

afterEach(() => {
  vi.useRealTimers();
});

/** Integer gaps in ms, integer costs; rates of 1, 1/2 or 1/4 unit per ms keep values exact. */
const timeline = fc.array(
  fc.record({ gapMs: fc.integer({ min: 0, max: 30 }), cost: fc.integer({ min: 0, max: 6 }) }),
  { minLength: 1, maxLength: 40 },
);
const rates = fc.constantFrom(1000, 500, 250);
const capacities = fc.integer({ min: 1, max: 8 });

describe("reservations against naive models", () => {
  test("TokenBucket.reserve: the debt model's delays, for any timeline", () => {
    fc.assert(
      fc.property(capacities, rates, timeline, (capacity, rate, steps) => {
        const clock = manualClock();
        const bucket = new TokenBucket({ capacity, refillPerSecond: rate, clock });
        const model = tokenBucketModel(capacity, rate);
        let t = 0;
        steps.forEach(({ gapMs, cost }, i) => {
          t += gapMs;
          clock.set(t);
          const want = model(t, cost);
          const got = bucket.reserve(cost);
          expect({ ok: got.ok, delayMs: got.delayMs }, `step ${i} at ${t}`).toEqual(want);
        });
      }),
    );
  });

  test("LeakyBucket.reserve: the shaping queue's delays and refusals, for any timeline", () => {
    fc.assert(
      fc.property(capacities, rates, timeline, (capacity, rate, steps) => {
        const clock = manualClock();
        const bucket = new LeakyBucket({ capacity, leakPerSecond: rate, clock });
        const model = leakyBucketModel(capacity, rate);
        let t = 0;
        steps.forEach(({ gapMs, cost }, i) => {
          t += gapMs;
          clock.set(t);
          const want = model(t, cost);
          const got = bucket.reserve(cost);
          expect({ ok: got.ok, delayMs: got.delayMs }, `step ${i} at ${t}`).toEqual(want);
        });
      }),
    );
  });

  test("wait resolves exactly when reserve says, first-in, first-out", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        capacities,
        rates,
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 12 }),
        async (leaky, capacity, rate, costs) => {
          const { clock, advance } = timerClock();
          try {
            const make = () =>
              leaky
                ? new LeakyBucket({ capacity: 8, leakPerSecond: rate, clock })
                : new TokenBucket({ capacity, refillPerSecond: rate, clock });
            const waiter = make();
            const twin = make();
            const due: number[] = [];
            const resolvedAt: (number | string)[] = [];
            costs.forEach((cost, i) => {
              const r = twin.reserve(cost);
              due.push(r.ok ? r.delayMs : Number.NaN);
              waiter.wait(cost).then(
                () => {
                  resolvedAt[i] = clock();
                },
                () => {
                  resolvedAt[i] = "refused";
                },
              );
            });
            await advance(200);
            // A timer fires at the whole ms at or after the due time.
            expect(resolvedAt).toEqual(
              due.map((d) => (Number.isNaN(d) ? "refused" : Math.ceil(d))),
            );
          } finally {
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
