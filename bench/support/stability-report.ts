/**
 * The stability check of `npm run bench -- --stability N` (and `--compare` of saved
 * results): for every target figure of the runs, each run's median, the median over the
 * runs and the largest deviation from it, and whether every run is within ±10% of it.
 * @module
 */
import { readFileSync } from "node:fs";
import { table } from "./format.js";
import type { RunResults } from "./report.js";
import { targetsOverRounds } from "./rounds.js";
import { STABLE_WITHIN, type Stability, stability } from "./spread.js";
import { times } from "./targets.js";

/** A saved run (bench/results/*.json). */
export function loadRun(path: string): RunResults {
  return JSON.parse(readFileSync(path, "utf8")) as RunResults;
}

/** The stability of the runs' target figures (core, and every other section measured). */
export function runStability(runs: readonly RunResults[]): Stability[] {
  return stability(runs.map((r) => targetsOverRounds(r).filter((t) => t.value !== undefined)));
}

/** The Markdown of the stability check. */
export function renderStability(runs: readonly RunResults[], files: readonly string[]): string {
  const rows = runStability(runs);
  const figure = (v: number | undefined) => (v === undefined ? "–" : times(v).replace(/x$/, ""));
  const judged = rows.filter((s) => s.stable !== undefined);
  const stable = judged.filter((s) => s.stable === true).length;
  return [
    `## Stability over ${runs.length} runs`,
    "",
    `Each run's figure (a ratio, or for a bound in B or µs the value itself) is its median over its rounds; ` +
      `a figure is stable when every run is within ±${STABLE_WITHIN * 100}% of the median of the runs.`,
    "",
    table(
      [
        "target",
        ...runs.map((_, i) => `run ${i + 1}`),
        "median",
        "worst deviation",
        `within ±${STABLE_WITHIN * 100}%`,
      ],
      `l${"r".repeat(runs.length + 2)}l`,
      rows.map((s) => [
        s.target,
        ...s.runs.map(figure),
        figure(s.median),
        s.deviation === undefined ? "–" : `${(s.deviation * 100).toFixed(1)}%`,
        s.stable === undefined ? "not in every run" : s.stable ? "yes" : "**no**",
      ]),
    ),
    "",
    `${stable} of ${judged.length} figures within ±${STABLE_WITHIN * 100}% of their median.`,
    "",
    ...files.map((f, i) => `Run ${i + 1}: ${f}`),
    "",
  ].join("\n");
}
