import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import {
  type Act,
  burstBeyondBound,
  makeBucket,
  runTimeline,
  timelines,
} from "./support/reservation-timeline.js";
import { timerClock } from "./support/timer-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

/**
 * Random timelines per run. CI runs a few hundred on the fixed seed (a few seconds); a long
 * search runs `TIMELINES=1000000 npx vitest run test/reservation-timelines.test.ts` (a new
 * seed each run, printed with the count and the time taken; `SEED=n` replays one).
 */
const RUNS = Number(process.env.TIMELINES ?? 400);
const LONG_RUN_MS = RUNS > 10_000 ? 24 * 3_600_000 : 60_000;

describe("any interleaving of reserve, cancel, wait, abort and allow", () => {
  test(
    "units that act within any interval of d ms never exceed capacity + rate * d; everything settles",
    async () => {
      const started = Date.now();
      const seed = Number(process.env.SEED ?? (RUNS > 10_000 ? Date.now() % 2 ** 31 : 42));
      await fc.assert(
        fc.asyncProperty(timelines(), async (t) => {
          const { clock, advance } = timerClock();
          try {
            const bucket = makeBucket(t, clock);
            const acts = await runTimeline(t, bucket, clock, advance);
            const burst = burstBeyondBound(acts, t.capacity, t.ratePerSecond);
            expect(burst, JSON.stringify(acts)).toBeUndefined();
            // At the inexact rate the last spend can leave a float residue (2 - 4e-16 tokens at
            // that instant, as on main): fresh again one ms later.
            if (t.ratePerSecond === 60 || process.env.FINE) {
              bucket.isIdle();
              await advance(1);
            }
            expect(bucket.isIdle(), "everything settled: fresh again").toBe(true);
          } finally {
            vi.useRealTimers();
          }
        }),
        { numRuns: RUNS, seed },
      );
      if (RUNS > 10_000) {
        console.log(`${RUNS} timelines (seed ${seed}) in ${Date.now() - started} ms: no burst`);
      }
    },
    LONG_RUN_MS,
  );
});

describe("cancels at one instant, in either order", () => {
  test("reservations cancelled at one instant in reverse order do not let a later one act with one made before them", () => {
    // capacity 2 at 1/s, the clock at 0: one unit taken, then a (2 units, at 1 s), b (2, at
    // 3 s) and small (0.5, at 3.5 s) reserved; b then a cancelled. Go's rule gave back 1.5
    // of b's and 1 of a's units, so d (2) acted at 3 s and e (0.5) at 3.5 s: with small,
    // 3 units within 500 ms where the bucket allows 2.5. Both order are checked.
    for (const reverse of [true, false]) {
      const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock: () => 0 });
      const acts: Act[] = [];
      expect(bucket.consume(1).allowed).toBe(true);
      acts.push({ atMs: 0, units: 1, what: "consume(1)" });
      const a = bucket.reserve(2);
      const b = bucket.reserve(2);
      const small = bucket.reserve(0.5);
      expect([a.delayMs, b.delayMs, small.delayMs]).toEqual([1000, 3000, 3500]);
      acts.push({ atMs: 3500, units: 0.5, what: "small" });
      for (const r of reverse ? [b, a] : [a, b]) r.cancel();
      const d = bucket.reserve(2);
      const e = bucket.reserve(0.5);
      acts.push(
        { atMs: d.delayMs, units: 2, what: "d" },
        { atMs: e.delayMs, units: 0.5, what: "e" },
      );
      acts.sort((x, y) => x.atMs - y.atMs);
      expect(burstBeyondBound(acts, 2, 1), JSON.stringify(acts)).toBeUndefined();
    }
  });
});

describe("everything settles", () => {
  test("a float residue of the units held does not outlive the last pending entry", async () => {
    // Found by the million-timeline run: capacity 2 at 60/s (4 ms steps). The held count
    // the bucket keeps and the ledger's own sum differed in the last bit once the last
    // reservation was cancelled (2.2e-16 held, nothing pending), so the bucket never read
    // fresh again and denied what a fresh one allows.
    const { clock, advance } = timerClock();
    try {
      const t = {
        leaky: false,
        capacity: 2,
        ratePerSecond: 60,
        steps: [
          { gapQ: 0, op: "allow", cost: 1, giveUpQ: undefined, pick: 0 },
          { gapQ: 0, op: "reserve", cost: 1, giveUpQ: undefined, pick: 0 },
          { gapQ: 1, op: "reserve", cost: 0.5, giveUpQ: undefined, pick: 0 },
          { gapQ: 0, op: "reserve", cost: 0.5, giveUpQ: undefined, pick: 0 },
          { gapQ: 0, op: "cancel", cost: 0, giveUpQ: undefined, pick: 0 },
          { gapQ: 0, op: "reserve", cost: 1, giveUpQ: undefined, pick: 0 },
          { gapQ: 0, op: "cancel", cost: 0, giveUpQ: undefined, pick: 0 },
        ],
      } as const;
      const bucket = makeBucket(t, clock);
      await runTimeline(t, bucket, clock, advance);
      await advance(100_000);
      expect(bucket.isIdle()).toBe(true);
      expect(bucket.consume(2).allowed).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("cancelling everything restores the balance exactly", () => {
  test("reservations (delay 0 included) cancelled at one instant, in any order, leave the bucket as its twin", () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 0, max: 4 }),
        fc.array(fc.constantFrom(0, 0.5, 1, 2, 3), { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
        fc.integer({ min: 0, max: 3 }),
        (leaky, rate, used, costs, shuffle, laterMs) => {
          const clock = (() => now) as () => number;
          let now = 0;
          const t = { leaky, capacity: 4, ratePerSecond: rate, steps: [] };
          const bucket = makeBucket(t, clock);
          const twin = makeBucket(t, clock);
          bucket.consume(used);
          twin.consume(used);
          now = laterMs; // cancels at or before every time to act (the first is now or later)
          const rs = costs.map((c) => bucket.reserve(c));
          const order = rs.map((r, i) => ({ r, k: shuffle[i]! })).sort((x, y) => x.k - y.k);
          for (const { r } of order) r.cancel();
          for (const cost of [0, 1, 4]) expect(bucket.peek(cost)).toEqual(twin.peek(cost));
          now += 100_000;
          expect(bucket.isIdle()).toBe(true);
        },
      ),
    );
  });
});
