import { describe, expect, test } from "vitest";
import type { GlobalRow } from "../../bench/global.bench.js";
import {
  globalSection,
  globalTargets,
  httpLeasedTarget,
} from "../../bench/support/global-section.js";
import type { RunResults } from "../../bench/support/report.js";
import { verdict } from "../../bench/support/targets.js";

const MACHINE = {
  node: "v20",
  v8: "11",
  cpu: "cpu",
  cores: 2,
  platform: "linux",
  arch: "x64",
  memoryGiB: 4,
};

function leasedRow(patch: Partial<GlobalRow> = {}): GlobalRow {
  return {
    id: "leased",
    name: "LeasedTokenBucket",
    checks: 100_000,
    admitted: 6_950,
    seconds: 1,
    checksPerSecond: 100_000,
    p50Ns: 150,
    p99Ns: 1200,
    refP50Ns: 100,
    refP99Ns: 400,
    commandsPer1000: 0.5,
    roundTripsPer1000: 0.1,
    bound: 7000,
    ...patch,
  };
}

function run(row: GlobalRow | undefined, http?: Record<string, number>): RunResults {
  return {
    startedAt: "2026-01-01T00:00Z",
    command: "npm run bench",
    quick: false,
    machine: MACHINE as unknown as RunResults["machine"],
    method: "test",
    timings: {},
    failures: [],
    global: {
      origin: "test",
      processes: 4,
      capacity: 2000,
      refillPerSecond: 5000,
      durationMs: 1000,
      rows: row === undefined ? [] : [row],
    },
    ...(http === undefined
      ? {}
      : {
          http: {
            rows: Object.entries(http).map(([id, rps]) => ({
              id,
              name: id,
              requestsPerSecond: rps,
              p50Ms: 1,
              p99Ms: 2,
              non2xx: 0,
              errors: 0,
            })),
            connections: 100,
            durationSeconds: 10,
            notes: [],
          },
        }),
  };
}

const verdicts = (r: RunResults) => globalTargets(r).map((t) => verdict(t, false));

describe("the global limit's targets", () => {
  test("step table: each target passes at its bound and misses just past it", () => {
    const cases: [Partial<GlobalRow>, number, string][] = [
      [{}, 0, "pass"],
      [{ p50Ns: 150 }, 0, "pass"], // 1.5x exactly
      [{ p50Ns: 151 }, 0, "miss"],
      [{ p99Ns: 1201 }, 1, "miss"],
      [{ roundTripsPer1000: 10 }, 2, "pass"],
      [{ roundTripsPer1000: 10.01 }, 2, "miss"],
      [{ admitted: 7000 }, 3, "pass"],
      [{ admitted: 7001 }, 3, "miss"],
      [{ admitted: 6930 }, 4, "pass"], // 99.0%
      [{ admitted: 6929 }, 4, "miss"],
    ];
    for (const [patch, index, expected] of cases) {
      expect([patch, verdicts(run(leasedRow(patch)))[index]]).toEqual([patch, expected]);
    }
  });

  test("the paced row: at most 10 Redis commands per 1,000 checks, at least 98% of the bound", () => {
    const paced = (patch: Partial<GlobalRow>) =>
      leasedRow({
        id: "leased-paced",
        commandsPer1000: 6.5,
        admitted: 2950,
        bound: 3000,
        ...patch,
      });
    const cases: [Partial<GlobalRow>, number, string][] = [
      [{}, 5, "pass"],
      [{ commandsPer1000: 10 }, 5, "pass"],
      [{ commandsPer1000: 10.1 }, 5, "miss"],
      [{ admitted: 2940 }, 6, "pass"], // 98.0%
      [{ admitted: 2939 }, 6, "miss"],
    ];
    for (const [patch, index, expected] of cases) {
      expect([patch, verdicts(run(paced(patch)))[index]]).toEqual([patch, expected]);
    }
  });

  test("a run without the leased rows measures nothing and judges nothing", () => {
    expect(verdicts(run(undefined))).toEqual(Array(7).fill("not measured"));
    expect(globalTargets(run(undefined)).every((t) => t.section === "global")).toBe(true);
  });

  test("HTTP: req/s lost with leases over req/s lost in process, each beside a Redis client", () => {
    const rows = (leased: number) => ({
      none: 20_000, // the bare server without a client: not the baseline
      "memory-varying": 19_900,
      "none-redis-client": 10_000,
      "memory-redis-client": 9_000,
      leased,
    });
    const t = httpLeasedTarget(run(leasedRow(), rows(8_900)));
    expect(t.value).toBeCloseTo(1.1, 10); // 1,100 lost against 1,000
    expect(t.target).toContain("each beside a Redis client");
    expect(verdict(t, false)).toBe("pass");
    expect(verdict(httpLeasedTarget(run(leasedRow(), rows(8_800))), false)).toBe("miss");
    // Without the rows beside a client it is not measured, never judged against the others.
    for (const id of ["none-redis-client", "memory-redis-client"] as const) {
      const { [id]: _, ...without } = rows(8_900);
      expect(httpLeasedTarget(run(leasedRow(), without)).value).toBeUndefined();
    }
    expect(httpLeasedTarget(run(leasedRow())).value).toBeUndefined();
  });

  test("the section prints the row with its share of the bound", () => {
    const text = globalSection(run(leasedRow())).join("\n");
    expect(text).toContain("## 7. Global limit: 4 processes, one Redis");
    expect(text).toContain(
      "| LeasedTokenBucket | 150 ns | 1,200 ns | 100,000 | 0.5 | 0.10 | 6,950 / 7,000 = 99.3% |",
    );
  });
});
