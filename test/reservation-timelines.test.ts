import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
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
 * search runs `TIMELINES=1000000 npx vitest run test/reservation-timelines.test.ts`.
 */
const RUNS = Number(process.env.TIMELINES ?? 400);
const LONG_RUN_MS = RUNS > 10_000 ? 24 * 3_600_000 : 60_000;

describe("any interleaving of reserve, cancel, wait, abort and allow", () => {
  test(
    "units that act within any interval of d ms never exceed capacity + rate * d; everything settles",
    async () => {
      const started = Date.now();
      await fc.assert(
        fc.asyncProperty(timelines(), async (t) => {
          const { clock, advance } = timerClock();
          try {
            const bucket = makeBucket(t, clock);
            const acts = await runTimeline(t, bucket, clock, advance);
            const burst = burstBeyondBound(acts, t.capacity, t.ratePerSecond);
            expect(burst, JSON.stringify(acts)).toBeUndefined();
            if (!process.env.FINE)
              expect(bucket.isIdle(), "everything settled: fresh again").toBe(true);
          } finally {
            vi.useRealTimers();
          }
        }),
        { numRuns: RUNS },
      );
      if (RUNS > 10_000) console.log(`${RUNS} timelines in ${Date.now() - started} ms`);
    },
    LONG_RUN_MS,
  );
});
