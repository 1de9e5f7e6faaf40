/**
 * A keyed `allOf` of sliding logs and a token bucket (one layout: every key's parts in one
 * group, the logs in one arena) against one class `allOf` per key, driven by fast-check:
 * every decision and refund must be the same.
 */
import fc from "fast-check";
import { expect, test } from "vitest";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { type AllOf, allOf } from "../../src/composite/all-of.js";
import type { Receipt } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import "../support/fast-check-seed.js";

const op = fc.record({
  kind: fc.constantFrom("consume", "peek", "charge", "refund", "refundReceipt", "reset"),
  key: fc.nat(12),
  cost: fc.integer({ min: 0, max: 6 }),
  pick: fc.nat(),
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 900 })),
});

test("keyed allOf decides as one class allOf per key", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 30 }),
      fc.integer({ min: 1, max: 30 }),
      fc.array(op, { minLength: 1, maxLength: 500, size: "max" }),
      (a, b, ops) => {
        let now = 0;
        const clock = () => now;
        const make = () =>
          allOf(
            new SlidingWindowLog({ limit: a, windowMs: 300, clock }),
            new SlidingWindowLog({ limit: b, windowMs: 1000, clock }),
            new TokenBucket({ capacity: a + b, refillPerSecond: 20, clock }),
          );
        const keyed = new KeyedLimiter(make(), { sweepIntervalMs: Number.POSITIVE_INFINITY });
        const each = new Map<string, AllOf>();
        const one = (k: string) => {
          let l = each.get(k);
          if (l === undefined) each.set(k, (l = make()));
          return l;
        };
        const receipts: [Receipt, Receipt, string][] = [];
        for (const [i, o] of ops.entries()) {
          now += o.dt;
          const k = `k${o.key}`;
          const where = `op ${i} ${JSON.stringify(o)} at ${now}`;
          switch (o.kind) {
            case "consume":
              expect(keyed.consume(k, o.cost), where).toEqual(one(k).consume(o.cost));
              break;
            case "peek":
              expect(keyed.peek(k, o.cost), where).toEqual(one(k).peek(o.cost));
              break;
            case "charge": {
              const x = keyed.charge(k, o.cost);
              const y = one(k).charge(o.cost);
              expect(x.allowed, where).toBe(y.allowed);
              expect(x.remaining, where).toBe(y.remaining);
              receipts.push([x, y, k]);
              break;
            }
            case "refund":
              expect(keyed.refund(k, o.cost), where).toBe(one(k).refund(o.cost));
              break;
            case "refundReceipt": {
              if (receipts.length === 0) break;
              const [x, y, key] = receipts[o.pick % receipts.length]!;
              const units = o.cost === 0 ? undefined : o.cost;
              expect(keyed.refund(x, units), where).toBe(one(key).refund(y, units));
              break;
            }
            case "reset":
              keyed.reset(k);
              one(k).reset();
              break;
          }
        }
      },
    ),
    { numRuns: 150 },
  );
});
