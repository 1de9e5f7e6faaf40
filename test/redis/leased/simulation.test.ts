import { describe, expect, test } from "vitest";
import { replayCommand } from "../../support/lease-sim/run.js";
import { FAULT_KINDS, runSeed, type SeedResult } from "../../support/lease-sim/simulation.js";

// The lease simulator over fixed seeds: each seed draws a configuration, a store (the
// MemoryLeaseStore, or the Redis scripts' answers behind the real RedisLeaseStore) and its
// faults, and checks the invariants of docs/distributed.md#invariants after every step.
// A long run is `npx tsx test/support/lease-sim/run.ts --seeds 1000000`; a failing seed
// prints the command that replays it.

const SEEDS = 240;

describe("the lease simulator", () => {
  test(`${SEEDS} seeds of faults find no violation`, async () => {
    const failures: string[] = [];
    const faults = new Map<string, number>();
    let steps = 0;
    let fairnessRuns = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const r: SeedResult = await runSeed(seed);
      steps += r.steps;
      if (r.fairness !== undefined) fairnessRuns++;
      for (const [kind, n] of Object.entries(r.faults))
        faults.set(kind, (faults.get(kind) ?? 0) + n);
      if (r.violations.length > 0) {
        failures.push(
          `seed ${seed} (${r.config}): ${r.violations[0]}\n  replay: ${replayCommand(seed)}`,
        );
      }
    }
    expect(failures, failures.join("\n")).toEqual([]);
    // The seeds exercise what they claim to: every kind of fault, and the fairness phase.
    for (const kind of FAULT_KINDS) expect(faults.get(kind) ?? 0, kind).toBeGreaterThan(0);
    expect(fairnessRuns).toBeGreaterThanOrEqual(3);
    expect(steps).toBeGreaterThan(SEEDS * 500);
  }, 120_000);

  test("small limits shared fairly after faults: capacity 100, 50 per second, 4 processes", async () => {
    const failures: string[] = [];
    const ratios: number[] = [];
    for (let seed = 1; seed <= 16; seed++) {
      const r = await runSeed(seed, {
        fairness: "always",
        config: { capacity: 100, refillPerSecond: 50, processes: 4 },
      });
      ratios.push(...(r.fairness?.ratios ?? []));
      if (r.violations.length > 0) {
        failures.push(`seed ${seed}: ${r.violations[0]}\n  (config overridden: see this test)`);
      }
    }
    expect(failures, failures.join("\n")).toEqual([]);
    expect(ratios.length).toBe(16 * 4);
    expect(Math.min(...ratios)).toBeGreaterThanOrEqual(0.6);
    expect(Math.max(...ratios)).toBeLessThanOrEqual(1.4);
  });

  test("a seed replays: the same steps, decisions and faults", async () => {
    const a = await runSeed(17);
    const b = await runSeed(17);
    expect(b).toEqual(a);
  });
});
