// The bench's rounds (bench/support/spread.ts, rounds.ts, stability-report.ts) on fixed
// inputs: the median with min–max, the too-wide rule, the per-round ratios of a run, and
// the stability check over runs.
import { describe, expect, test } from "vitest";
import { leasedComparison } from "../../bench/support/http-section.js";
import type { Timing } from "../../bench/support/measure.js";
import type { RunResults } from "../../bench/support/report.js";
import { renderReport } from "../../bench/support/report.js";
import {
  mergeRounds,
  roundCount,
  roundView,
  targetsOverRounds,
} from "../../bench/support/rounds.js";
import {
  foldRounds,
  isWide,
  judgeSpread,
  median,
  spreadOf,
  spreadText,
  stability,
  WIDE_SPREAD,
} from "../../bench/support/spread.js";
import { renderStability } from "../../bench/support/stability-report.js";
import { ratioTarget } from "../../bench/support/targets.js";

const MACHINE = {
  node: "v20.0.0",
  v8: "11.3.0",
  cpu: "test CPU",
  cores: 2,
  platform: "linux",
  arch: "x64",
  memoryGiB: 1,
};

function timing(id: string, rounds: readonly number[]): Timing {
  return {
    id,
    name: id,
    nsPerOp: median(rounds),
    p50NsPerOp: median(rounds),
    rmePercent: 1,
    samples: 10,
    batch: 1000,
    ...(rounds.length > 1 ? { roundsNsPerOp: rounds } : {}),
  };
}

/** A core run whose rows have the given per-round values. */
function run(rows: Record<string, readonly number[]>): RunResults {
  return {
    startedAt: "2026-01-01T00:00Z",
    command: "npm run bench",
    quick: false,
    machine: MACHINE,
    method: "test",
    timings: Object.fromEntries(Object.entries(rows).map(([id, r]) => [id, timing(id, r)])),
    failures: [],
  };
}

describe("median and spread", () => {
  test.each([
    { name: "odd count", xs: [3, 1, 2], median: 2 },
    { name: "even count: the mean of the middle two", xs: [4, 1, 3, 2], median: 2.5 },
    { name: "one value", xs: [7], median: 7 },
  ])("$name", ({ xs, median: m }) => {
    expect(median(xs)).toBe(m);
  });

  test("no value is an error, not NaN", () => {
    expect(() => median([])).toThrow("median: no values");
  });

  test("min–max, the width (max - min) / median, values in round order; unmeasured rounds left out", () => {
    expect(spreadOf([1.2, undefined, 1.0, 1.1, Number.NaN])).toEqual({
      median: 1.1,
      min: 1.0,
      max: 1.2,
      width: (1.2 - 1.0) / 1.1,
      values: [1.2, 1.0, 1.1],
    });
    expect(spreadOf([undefined])).toBeUndefined();
    expect(spreadOf([5])?.width).toBe(0);
  });

  test("too wide: strictly above 20% of the median", () => {
    expect(WIDE_SPREAD).toBe(0.2);
    expect(isWide(spreadOf([0.9, 1.0, 1.1])!)).toBe(false); // exactly 20%
    expect(isWide(spreadOf([0.9, 1.0, 1.11])!)).toBe(true);
  });

  test("printed as median (min–max)", () => {
    expect(spreadText(spreadOf([1.3, 1.22, 1.41])!)).toBe("1.30x (1.22x–1.41x)");
    expect(spreadText(spreadOf([1.3])!)).toBe("1.30x");
  });
});

describe("judgeSpread: the too-wide rule", () => {
  // bound <= 1.2x; values per round; expected verdict (undefined: too wide to judge)
  const steps: [string, number[], boolean | undefined][] = [
    ["narrow, median under the bound", [1.1, 1.15, 1.19], true],
    ["narrow, bound inside min–max: the median decides (pass)", [1.15, 1.19, 1.25], true],
    ["narrow, bound inside min–max: the median decides (miss)", [1.15, 1.21, 1.25], false],
    ["wide, wholly under the bound: judged", [0.5, 0.8, 1.1], true],
    ["wide, wholly over the bound: judged", [1.3, 1.8, 2.4], false],
    ["wide, bound inside min–max: too wide to judge", [0.9, 1.1, 1.6], undefined],
  ];
  test.each(steps)("%s", (_name, values, expected) => {
    expect(judgeSpread(spreadOf(values)!, "<=", 1.2)).toBe(expected);
  });

  test("a strict bound: equality is a miss in every round", () => {
    expect(judgeSpread(spreadOf([1, 1, 1])!, "<", 1)).toBe(false);
  });
});

describe("rounds of a run", () => {
  test("mergeRounds: the median of each row's rounds, every round kept, notes once", () => {
    const a = { ...timing("x", [10]), note: "slow path" };
    const merged = mergeRounds([
      { x: a },
      { x: timing("x", [30]) },
      { x: { ...timing("x", [20]), note: "slow path" } },
    ]);
    expect(merged["x"]).toMatchObject({
      nsPerOp: 20,
      roundsNsPerOp: [10, 30, 20],
      samples: 30,
      note: "slow path",
    });
  });

  test("mergeRounds: a row missing from a round (its group failed) has the rounds it has", () => {
    const merged = mergeRounds([
      { x: timing("x", [10]), y: timing("y", [5]) },
      { x: timing("x", [12]) },
    ]);
    expect(merged["y"]?.roundsNsPerOp).toEqual([5]);
    expect(merged["x"]?.roundsNsPerOp).toEqual([10, 12]);
  });

  test("a round's view has that round's values", () => {
    const r = run({ a: [1, 2, 3], b: [7] });
    expect(roundCount(r)).toBe(3);
    expect(roundView(r, 1).timings["a"]?.nsPerOp).toBe(2);
    expect(roundView(r, 1).timings["b"]?.nsPerOp).toBe(7); // no rounds: its median
  });

  test("a ratio is taken per round, then the median: not the ratio of the medians", () => {
    // Round by round the hot key is 1.1x, 1.1x and 2.0x the clock read; the medians of the
    // rows (66 and 55) would say 1.2x.
    const r = run({
      "floor.performance-now": [50, 60, 30],
      "TokenBucket.keyed.allow.hot": [55, 66, 60],
    });
    const hot = targetsOverRounds(r).find((t) =>
      t.target.startsWith("KeyedLimiter(TokenBucket), 1 hot key"),
    )!;
    expect(hot.spread?.values).toEqual([1.1, 1.1, 2]);
    expect(hot.value).toBeCloseTo(1.1, 12);
    expect(hot.ratio).toBe("1.10x (1.10x–2.00x)");
    // Wide (82%) with the bound (1.2x) inside min–max: not judged.
    expect([hot.tooWide, hot.met]).toEqual([true, undefined]);
  });

  test("the report marks a too-wide target and states the rule", () => {
    const r = run({
      "floor.performance-now": [50, 60, 30],
      "TokenBucket.keyed.allow.hot": [55, 66, 60],
    });
    const text = renderReport(r);
    expect(text).toContain("| 1.10x (1.10x–2.00x) | too wide to judge |");
    expect(text).toContain("(max - min) / median exceeds 20%");
  });

  test("foldRounds refuses rounds whose targets do not line up", () => {
    const a = ratioTarget("a", 1, 1, 2);
    const b = ratioTarget("b", 1, 1, 2);
    expect(() => foldRounds([[a], [b]], [a])).toThrow(
      "foldRounds: the rounds' target lists differ",
    );
  });

  test("an absolute bound keeps its unit: the value over the bound, median (min–max)", () => {
    const r = run({ "TokenBucket.keyed.new-key": [900, 1100, 1000] });
    const t = targetsOverRounds(r).find((x) =>
      x.target.startsWith("KeyedLimiter(TokenBucket), a new key"),
    )!;
    expect(t.value).toBe(1);
    expect(t.ratio).toBe("1.000x (0.90x–1.10x) the bound");
    expect([t.tooWide, t.met]).toEqual([false, true]);
  });
});

describe("stability over runs", () => {
  test("each run's figure, the median over runs, the worst deviation, within ±10%", () => {
    const runs = [
      [ratioTarget("hot", 1.0, 1, 2), ratioTarget("wide", 1.0, 1, 2)],
      [ratioTarget("hot", 1.1, 1, 2), ratioTarget("wide", 1.3, 1, 2)],
      [ratioTarget("hot", 1.05, 1, 2), ratioTarget("wide", 1.0, 1, 2)],
    ];
    const [hot, wide] = stability(runs);
    expect(hot).toMatchObject({
      target: "hot",
      runs: [1.0, 1.1, 1.05],
      median: 1.05,
      stable: true,
    });
    expect(hot!.deviation).toBeCloseTo(0.05 / 1.05, 12);
    expect(wide).toMatchObject({ median: 1.0, stable: false });
    expect(wide!.deviation).toBeCloseTo(0.3, 12);
  });

  test("exactly 10% off the median is within", () => {
    const [s] = stability([
      [ratioTarget("t", 0.9, 1, 2)],
      [ratioTarget("t", 1, 1, 2)],
      [ratioTarget("t", 1.1, 1, 2)],
    ]);
    expect(s?.stable).toBe(true);
  });

  test("a figure missing from a run is not judged stable or not", () => {
    const [s] = stability([[ratioTarget("t", 1, 1, 2)], [ratioTarget("t", undefined, 1, 2)]]);
    expect(s).toMatchObject({ runs: [1, undefined], stable: undefined });
  });

  test("the stability table: one column per run and a count of stable figures", () => {
    const a = run({ "floor.performance-now": [50], "TokenBucket.keyed.allow.hot": [55] });
    const b = run({ "floor.performance-now": [50], "TokenBucket.keyed.allow.hot": [70] });
    const text = renderStability([a, a, b], ["a.json", "a.json", "b.json"]);
    expect(text).toContain(
      "| target | run 1 | run 2 | run 3 | median | worst deviation | within ±10% |",
    );
    expect(text).toContain(
      "| KeyedLimiter(TokenBucket), 1 hot key: at most 1.2x performance.now() | 1.10 | 1.10 | 1.40 | 1.10 | 27.3% | **no** |",
    );
    expect(text).toMatch(/0 of 1 figures within ±10% of their median\./);
    expect(text).toContain("Run 3: b.json");
  });
});

describe("the leased HTTP row against the in-process row of the same header shape", () => {
  const row = (id: string, cpu: number[], rps: number[]) => ({
    id,
    name: id,
    requestsPerSecond: median(rps),
    p50Ms: 1,
    p99Ms: 2,
    non2xx: 0,
    errors: 0,
    cpuUsPerRequest: median(cpu),
    cpuUsPerRequestRounds: cpu,
    requestsPerSecondRounds: rps,
  });

  test("per round: CPU per request and req/s as median (min–max), the extra µs", () => {
    const text = leasedComparison([
      row("memory", [16, 16, 16], [60_000, 60_000, 60_000]),
      row("memory-varying", [20, 18, 19], [50_000, 52_000, 51_000]),
      row("leased", [22, 18, 20.9], [45_000, 52_000, 51_000]),
    ]);
    expect(text).toBe(
      "LeasedTokenBucket against the in-process row with the same headers (remaining changing " +
        "per request in both), per round over 3 interleaved rounds: server CPU per request " +
        "1.10x (1.000x–1.10x) (+1.9 µs, +0.0 to +2.0), req/s 1.000x (0.90x–1.000x).",
    );
  });

  test("beside a process that holds a Redis client too, a second comparison follows", () => {
    const text = leasedComparison([
      row("memory-varying", [20, 18, 19], [50_000, 52_000, 51_000]),
      row("leased", [22, 18, 20.9], [45_000, 52_000, 51_000]),
      row("memory-redis-client", [22, 18, 19], [45_000, 52_000, 51_000]),
    ]);
    expect(text).toBe(
      "LeasedTokenBucket against the in-process row with the same headers (remaining changing " +
        "per request in both), per round over 3 interleaved rounds: server CPU per request " +
        "1.10x (1.000x–1.10x) (+1.9 µs, +0.0 to +2.0), req/s 1.000x (0.90x–1.000x). Against " +
        "the same in-process row beside an idle Redis client (ioredis, connected), the rest of " +
        "what the leased row's process holds: server CPU per request 1.000x (1.000x–1.10x) " +
        "(+0.0 µs, +0.0 to +1.9), req/s 1.000x.",
    );
  });

  test("a spread over 20% says it is too wide to judge; no varying row, no comparison", () => {
    const wide = leasedComparison([
      row("memory-varying", [10, 10, 10], [50_000, 50_000, 50_000]),
      row("leased", [10, 13, 16], [50_000, 50_000, 50_000]),
    ]);
    expect(wide).toContain("The spread is too wide to judge");
    expect(leasedComparison([row("memory", [1], [1]), row("leased", [1], [1])])).toBeUndefined();
  });
});
