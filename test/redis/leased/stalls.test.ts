// The utilisation check of the lease process tests counts only the time some worker could
// ask: while every worker was stalled at once (the OS ran none of them), a bucket refills
// what no one can take. These are its interval sums on fixed inputs.
import { describe, expect, test } from "vitest";
import { allStalledMs, shareAdmitted, steadyUtilisation, summary } from "./support/processes.js";
import type { WorkerResult } from "./support/worker.js";

const worker = (stalls: [number, number][], admitted = 0): WorkerResult => ({
  index: 0,
  startMs: 0,
  endMs: 1000,
  stalls,
  scenarios: [
    {
      name: "hot",
      admitted: {},
      decisions: 0,
      exchanges: 0,
      heartbeats: 0,
      commands: 0,
      roundTrips: 0,
      steadyDecisions: 0,
      steadyExchanges: 0,
      steadyAdmitted: admitted,
      steadyFromMs: 0,
      aftermathDecisions: 0,
      aftermathAdmitted: 0,
      sources: {},
    },
  ],
});

describe("all workers stalled at once", () => {
  test("only the overlap of every worker's stalls counts", () => {
    const runs = allStalledMs(
      [
        worker([
          [100, 400],
          [600, 700],
        ]),
        worker([[300, 650]]),
      ],
      0,
      1000,
    );
    expect(runs).toEqual([100, 50]); // 300..400 and 600..650
  });

  test("one worker that ran the whole time leaves nothing lost", () => {
    expect(allStalledMs([worker([[0, 900]]), worker([])], 0, 1000)).toEqual([]);
  });

  test("utilisation leaves out what a stalled fleet could not take, beyond the capacity", () => {
    // 1 s at 5000/s, every worker stalled 400 ms: 2000 refilled, 1000 kept for later, 1000 lost.
    const stalled: [number, number][] = [[200, 600]];
    const u = steadyUtilisation([worker(stalled, 2000), worker(stalled, 2000)], "hot", 5000, 1000);
    expect(u).toBeCloseTo(4000 / (5000 - 1000), 9);
    expect(steadyUtilisation([worker([], 2500), worker([], 2500)], "hot", 5000, 1000)).toBe(1);
  });
});

describe("the share admitted below the limit", () => {
  test("a stall's burst and the denials until credit came are not counted against the limiter", () => {
    // 1000 decisions, 960 admitted: 100 of them a stall's aftermath, of which 70 admitted.
    const w = worker([]);
    const hot = { ...w.scenarios[0]!, admitted: { hot: 960 }, decisions: 1000 };
    const s = summary(
      [{ ...w, scenarios: [{ ...hot, aftermathDecisions: 100, aftermathAdmitted: 70 }] }],
      "hot",
    );
    expect(shareAdmitted(s, "hot")).toBeCloseTo(890 / 900, 9);
    // Without an aftermath it is the plain share: what was denied outside one still counts.
    expect(shareAdmitted(summary([{ ...w, scenarios: [hot] }], "hot"), "hot")).toBe(0.96);
  });
});
