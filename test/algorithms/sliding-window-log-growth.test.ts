/**
 * One SlidingWindowLog with a huge limit (its block doubles far, grows in place at the
 * arena's end, shrinks as entries leave) and fractional costs, against a plain array.
 */
import fc from "fast-check";
import { expect, test } from "vitest";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import "../support/fast-check-seed.js";

test("a growing log with fractional costs decides as a plain array", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          dt: fc.oneof(
            { weight: 30, arbitrary: fc.integer({ min: 0, max: 2 }) },
            { weight: 1, arbitrary: fc.integer({ min: 0, max: 1500 }) },
          ),
          quarters: fc.integer({ min: 0, max: 400 }),
          refund: fc.boolean(),
        }),
        { minLength: 500, maxLength: 3000, size: "max" },
      ),
      fc.integer({ min: 100, max: 100_000 }),
      (ops, limit) => {
        let now = 0;
        const windowMs = 1000;
        const log = new SlidingWindowLog({ limit, windowMs, clock: () => now });
        let entries: { leaveAt: number; units: number }[] = [];
        for (const [i, o] of ops.entries()) {
          now += o.dt;
          entries = entries.filter((e) => e.leaveAt > now && e.units > 0);
          const cost = o.quarters / 4;
          const used = entries.reduce((a, e) => a + e.units, 0);
          if (o.refund && i % 7 === 0) {
            let left = cost;
            for (let j = entries.length - 1; j >= 0 && left > 0; j--) {
              const g = Math.min(entries[j]!.units, left);
              entries[j]!.units -= g;
              left -= g;
            }
            expect(log.refund(cost), `op ${i}`).toBe(cost - left);
            continue;
          }
          const d = log.consume(cost);
          const allowed = cost === 0 || used + cost <= limit;
          expect(d.allowed, `op ${i} cost ${cost} used ${used}`).toBe(allowed);
          if (allowed && cost > 0) {
            const last = entries[entries.length - 1];
            if (last !== undefined && last.leaveAt === now + windowMs) last.units += cost;
            else entries.push({ leaveAt: now + windowMs, units: cost });
          }
        }
      },
    ),
    { numRuns: 60 },
  );
});
