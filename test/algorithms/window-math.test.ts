import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  counterDecision,
  counterEstimate,
  counterEstimateAt,
  fixedWindowDecision,
  logDecision,
  logExactEntries,
  logLeaveAt,
} from "../../src/algorithms/window-math.js";
import { fits } from "../../src/core/numeric.js";

const INF = Number.POSITIVE_INFINITY;

describe("fixedWindowDecision", () => {
  test.each([
    // limit 10, the window ends 400 ms from now
    { name: "fresh window", cost: 1, used: 0, d: [true, 9, 0, 400] },
    { name: "free probe on a fresh window is fresh", cost: 0, used: 0, d: [true, 10, 0, 0] },
    { name: "free probe on a used window", cost: 0, used: 3, d: [true, 7, 0, 400] },
    { name: "exactly fills", cost: 4, used: 6, d: [true, 0, 0, 400] },
    { name: "denied: retry when the window ends", cost: 5, used: 6, d: [false, 4, 400, 400] },
    { name: "denied on an empty window: never", cost: 11, used: 0, d: [false, 10, INF, 0] },
    { name: "fraction within the tolerance fits", cost: 1 + 5e-10, used: 9, d: [true, 0, 0, 400] },
  ])("$name", ({ cost, used, d }) => {
    const [allowed, remaining, retryAfterMs, resetAfterMs] = d;
    expect(fixedWindowDecision(cost, used, 400, 10)).toEqual({
      allowed,
      limit: 10,
      remaining,
      retryAfterMs,
      resetAfterMs,
    });
  });
});

describe("logExactEntries", () => {
  test.each([
    { name: "small limits keep 64", limit: 1, n: 64 },
    { name: "fractional limit rounds up", limit: 64.5, n: 65 },
    { name: "large limit", limit: 1000, n: 1000 },
    { name: "capped at 2^24", limit: 1e15, n: 2 ** 24 },
  ])("$name", ({ limit, n }) => {
    expect(logExactEntries(limit)).toBe(n);
  });
});

describe("logLeaveAt", () => {
  test("below exactEntries an entry keeps its exact time", () => {
    expect(logLeaveAt(100.25, 63, 1000, 64)).toBe(1100.25);
  });

  test("from exactEntries on, the stamp is the end of its granule of windowMs / exactEntries", () => {
    // granules of 1000 / 64 = 15.625 ms: 100 lies in [93.75, 109.375)
    expect(logLeaveAt(100, 64, 1000, 64)).toBe(109.375 + 1000);
    // a granule boundary is its own end
    expect(logLeaveAt(109.375, 200, 1000, 64)).toBe(109.375 + 1000);
  });
});

describe("logDecision", () => {
  // limit 3, window 1000, 64 exact entries; now 5000; the newest entry leaves at 5600
  const at = (cost: number, available: number, size: number, newest: number, retry: number) =>
    logDecision(cost, available, 5000, 3, 1000, 64, size, newest, retry);

  test.each([
    {
      name: "allowed: fresh again when the new entry leaves",
      d: at(1, 2, 1, 5600, Number.NaN),
      want: [true, 1, 0, 1000],
    },
    {
      name: "allowed beyond exactEntries: the new entry's granule stamp",
      d: at(0.01, 2, 64, 5600, Number.NaN),
      want: [true, 1, 0, 1000],
    },
    {
      name: "free probe: until the newest entry leaves",
      d: at(0, 2, 1, 5600, Number.NaN),
      want: [true, 2, 0, 600],
    },
    {
      name: "free probe on an empty log is fresh",
      d: at(0, 3, 0, Number.NEGATIVE_INFINITY, Number.NaN),
      want: [true, 3, 0, 0],
    },
    {
      name: "denied: until the entry that frees enough leaves",
      d: at(2, 1, 2, 5600, 5250),
      want: [false, 1, 250, 600],
    },
    {
      name: "denied above the limit: never (the retry time is not read)",
      d: at(4, 3, 0, Number.NEGATIVE_INFINITY, Number.NaN),
      want: [false, 3, INF, 0],
    },
  ])("$name", ({ d, want }) => {
    const [allowed, remaining, retryAfterMs, resetAfterMs] = want;
    expect(d).toEqual({ allowed, limit: 3, remaining, retryAfterMs, resetAfterMs });
  });

  test("an allowed cost beyond exactEntries resets at its granule stamp, not windowMs later", () => {
    // granules of 1000 / 64 = 15.625 ms: 5000.5 ends its granule at 5015.625
    const d = logDecision(0.01, 2, 5000.5, 3, 1000, 64, 64, 5600, Number.NaN);
    expect(d.resetAfterMs).toBe(5015.625 + 1000 - 5000.5);
  });
});

describe("counterEstimate", () => {
  test("prev weighs by the part of it still inside the last windowMs", () => {
    // window [1000, 2000), now 1250: 3/4 of the previous window still counts
    expect(counterEstimate(8, 1, 2000, 1250, 1000)).toBe(7);
    expect(counterEstimate(0, 1, 2000, 1250, 1000)).toBe(1);
  });

  test("counterEstimateAt follows the windows with no further traffic", () => {
    // index 1 = [1000, 2000), prev 8, curr 4
    expect(counterEstimateAt(1250, 1, 8, 4, 1000)).toBe(10);
    expect(counterEstimateAt(2250, 1, 8, 4, 1000)).toBe(3); // curr is now prev, weight 3/4
    expect(counterEstimateAt(3000, 1, 8, 4, 1000)).toBe(0);
  });
});

describe("counterDecision", () => {
  test.each([
    // limit 10, window 1000, index 1 = [1000, 2000), now 1250
    {
      name: "allowed: curr counts until the next window ends",
      args: [1, 8, 1],
      want: [true, 2, 0, 1750],
    },
    {
      name: "free probe with only prev: until this window ends",
      args: [0, 8, 0],
      want: [true, 4, 0, 750],
    },
    {
      name: "denied: retry once prev's weight has fallen enough",
      args: [4, 8, 2], // estimate 8 * 3/4 + 2 = 8; fits once 8 * (W - e) / W <= 4
      want: [false, 2, 250, 1750],
    },
    {
      name: "denied by curr alone: in the next window",
      args: [4, 0, 8], // next window: fits once 8 * (W - e) / W <= 6, at e = 250
      want: [false, 2, 1000, 1750],
    },
    { name: "cost above limit: never", args: [11, 0, 0], want: [false, 10, INF, 0] },
  ])("$name", ({ args, want }) => {
    const [cost, prev, curr] = args as [number, number, number];
    const [allowed, remaining, retryAfterMs, resetAfterMs] = want;
    expect(counterDecision(cost, 1, prev, curr, 1250, 10, 1000)).toEqual({
      allowed,
      limit: 10,
      remaining,
      retryAfterMs,
      resetAfterMs,
    });
  });

  test("retryAfterMs is the earliest time the cost fits with no further traffic", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }), // limit
        fc.integer({ min: 1, max: 1000 }), // windowMs
        fc.integer({ min: 0, max: 100 }), // prev
        fc.integer({ min: 0, max: 100 }), // curr
        fc.integer({ min: 0, max: 999 }), // ms into the window (mod windowMs)
        fc.integer({ min: 1, max: 100 }), // cost (capped at limit)
        (limit, windowMs, prevRaw, currRaw, eRaw, costRaw) => {
          const e = eRaw % windowMs;
          const cost = Math.min(costRaw, limit);
          const prev = Math.min(prevRaw, limit);
          const curr = Math.min(currRaw, limit);
          const index = 7;
          const now = index * windowMs + e;
          const d = counterDecision(cost, index, prev, curr, now, limit, windowMs);
          if (d.allowed) return;
          const at = now + d.retryAfterMs;
          const fitsAt = (t: number) =>
            fits(cost, limit - counterEstimateAt(t, index, prev, curr, windowMs));
          expect(fitsAt(at), `fits at +${d.retryAfterMs}`).toBe(true);
          if (d.retryAfterMs > 1e-3) {
            expect(fitsAt(at - 1e-3), `not at +${d.retryAfterMs - 1e-3}`).toBe(false);
          }
        },
      ),
    );
  });
});
