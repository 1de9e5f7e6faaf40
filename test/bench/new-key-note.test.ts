import { describe, expect, test } from "vitest";
import { newKeyNote } from "../../bench/algorithms.bench.js";
import type { KeyedLimiterStats } from "../../src/keyed/keyed-limiter.js";

const BEFORE: KeyedLimiterStats = {
  created: 100,
  evictedIdle: 0,
  evictedLossy: 0,
  slots: 100,
  bytes: 0,
  refused: 0,
  restored: 0,
};

/** The stats after `calls` new keys, with `patch` applied to the deltas. */
function statsAfter(patch: Partial<KeyedLimiterStats>): KeyedLimiterStats {
  return { ...BEFORE, created: 100 + 1000, evictedLossy: 1000, ...patch };
}

describe("newKeyNote (the new-key-at-the-bound row's path check)", () => {
  test("every call created a key, evicted one in use and was allowed: no note", () => {
    expect(newKeyNote(BEFORE, statsAfter({}), 1000, 0, 100, 100)).toBeUndefined();
  });

  test.each([
    {
      name: "refused at the bound",
      stats: { created: 100, evictedLossy: 0, refused: 1000 },
      denied: 1000,
      note: "1000 of 1000 new keys were refused (full, no room made); 1000 of 1000 calls were denied",
    },
    {
      name: "keys found kept",
      stats: { created: 100 + 990 },
      denied: 0,
      note: "10 of 1000 calls found their key kept",
    },
    {
      name: "restored from a trace and denied",
      stats: { restored: 800 },
      denied: 800,
      note: "800 of 1000 new keys were restored from an evicted key's trace; 800 of 1000 calls were denied",
    },
    {
      name: "idle evictions",
      stats: { evictedIdle: 3 },
      denied: 0,
      note: "3 evictions were of idle keys, not keys in use",
    },
  ])("$name", ({ stats, denied, note }) => {
    expect(newKeyNote(BEFORE, statsAfter(stats), 1000, denied, 100, 100)).toBe(note);
  });

  test("a registry that did not stay full says so", () => {
    expect(newKeyNote(BEFORE, statsAfter({}), 1000, 0, 99, 100)).toBe("size is 99, expected 100");
  });
});
