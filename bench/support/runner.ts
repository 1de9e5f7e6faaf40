/**
 * The body of bench/run.ts: runs the sections, prints the Markdown report to stdout and
 * writes the JSON results. A section that fails is reported (and the exit status is 1) but
 * does not stop the others.
 * @module
 */
import { readFileSync } from "node:fs";
import os from "node:os";
import { measureMemory, memoryKeys } from "../memory.js";
import { runChild } from "./child.js";
import { type CoarseStaleness, measureCoarseStaleness } from "./coarse-staleness.js";
import { type GlobalSection, runGlobalSection } from "./global-section.js";
import { GROUPS } from "./groups.js";
import { runHttpSection } from "./http-section.js";
import { machine } from "./machine.js";
import { budget, roundsFor, type Timing } from "./measure.js";
import { Progress } from "./progress.js";
import { runRedisSection } from "./redis-section.js";
import { type RunResults, renderReport } from "./report.js";
import { writeResults } from "./results.js";
import { mergeRounds, targetsOverRounds } from "./rounds.js";

/** What to run. */
export interface BenchOptions {
  /** Short runs and smaller key sets (the CI smoke test). */
  readonly quick: boolean;
  /** Sections 1-5 and 7 (the global limit). */
  readonly core: boolean;
  /** Section 6 (HTTP). */
  readonly http: boolean;
  /** Rounds of the timing groups (default: 3, or 1 with `quick`). */
  readonly rounds?: number;
  /**
   * Only these timing groups (bench/support/groups.ts ids), and no memory, Redis, global or
   * staleness section: a focused run of some targets (the others read "not measured").
   */
  readonly only?: readonly string[];
  /** Print the report (default true); `--stability` prints its own summary after each run's. */
  readonly print?: boolean;
}

function tinybenchVersion(): string {
  const file = new URL("../../node_modules/tinybench/package.json", import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

function commandLine(options: BenchOptions): string {
  if (!options.core) return `npm run bench:http${options.quick ? " -- --quick" : ""}`;
  const flags = [
    options.quick ? "--quick" : "",
    options.http && !options.quick ? "--all" : "",
    options.rounds === undefined ? "" : `--rounds ${options.rounds}`,
    options.only === undefined ? "" : `--only ${options.only.join(",")}`,
  ];
  const given = flags.filter(Boolean);
  return `npm run bench${given.length > 0 ? ` -- ${given.join(" ")}` : ""}`;
}

/** Runs the benchmark; sets `process.exitCode` to 1 if any part failed. */
export async function runBench(options: BenchOptions): Promise<RunResults & { file: string }> {
  const started = new Date();
  const loadAtStart = os.loadavg()[0] ?? 0;
  const progress = new Progress();
  const b = budget(options.quick);
  const rounds = options.rounds ?? roundsFor(options.quick);
  const perRound: Record<string, Timing>[] = [];
  const failures: { part: string; error: string }[] = [];
  let memory: RunResults["memory"];
  let redis: RunResults["redis"];
  let http: RunResults["http"];
  let global: GlobalSection | undefined;

  let coarse: CoarseStaleness | undefined;
  if (options.core) {
    // Rounds: every group once per round, each in a fresh process, the groups alternating
    // (round 1: floors, TokenBucket, ..., peers; round 2: the same ...), so a ratio of two
    // groups' rows is of two processes minutes apart at most, and a burst of load hits
    // one round of a row, not the row.
    const only = options.only;
    const groups = only === undefined ? GROUPS : GROUPS.filter((g) => only.includes(g.id));
    for (let round = 0; round < rounds; round++) {
      const timings: Record<string, Timing> = {};
      for (const [index, group] of groups.entries()) {
        const where = `round ${round + 1}/${rounds}, group ${index + 1}/${groups.length} ${group.id}`;
        progress.update(`${where}: starting`);
        try {
          const result = (await runChild(
            "support/worker.ts",
            [group.id, ...(options.quick ? ["--quick"] : [])],
            {
              onTask: (m) => progress.update(`${where}: ${m.index + 1}/${m.total} ${m.name}`),
            },
          )) as Timing[];
          for (const t of result) timings[t.id] = t;
        } catch (error) {
          failures.push({
            part: `timing group ${group.id} (round ${round + 1})`,
            error: (error as Error).message,
          });
        }
      }
      perRound.push(timings);
    }
    // A focused run (`only`): the timing groups asked for and nothing else.
    if (only === undefined) {
      progress.update("coarse clock staleness");
      try {
        coarse = await measureCoarseStaleness(options.quick);
      } catch (error) {
        failures.push({ part: "coarse clock staleness", error: (error as Error).message });
      }
      const results = await measureMemory(options.quick, (i, total, v) =>
        progress.update(`memory ${i + 1}/${total}: ${v.name}`),
      );
      for (const m of results) if (!m.ok) failures.push({ part: `memory ${m.id}`, error: m.error });
      memory = { keys: memoryKeys(options.quick), results };
      progress.update("Redis");
      try {
        redis = await runRedisSection(options.quick, (text) => progress.update(`Redis: ${text}`));
      } catch (error) {
        failures.push({ part: "Redis section", error: (error as Error).message });
      }
      progress.update("global limit");
      try {
        global = await runGlobalSection(options.quick, (text) =>
          progress.update(`global limit: ${text}`),
        );
      } catch (error) {
        failures.push({ part: "global limit section", error: (error as Error).message });
      }
    }
  }
  if (options.http) {
    progress.update("HTTP");
    try {
      http = await runHttpSection(options.quick, (text) => progress.update(`HTTP: ${text}`));
    } catch (error) {
      failures.push({ part: "HTTP section", error: (error as Error).message });
    }
  }
  progress.done();

  const results: RunResults = {
    startedAt: `${started.toISOString().slice(0, 16)}Z`,
    command: commandLine(options),
    quick: options.quick,
    machine: machine(),
    ...(options.core
      ? {
          method:
            `tinybench ${tinybenchVersion()}, mean of timed calls of 1000 checks each, ` +
            `${b.timeMs} ms per row after ${b.warmupMs} ms warm-up, each group in a fresh process, ` +
            `${rounds} round${rounds === 1 ? "" : "s"} (median, min–max)`,
        }
      : {}),
    load: { start: loadAtStart, end: os.loadavg()[0] ?? 0 },
    timings: perRound.length === 0 ? {} : mergeRounds(perRound),
    ...(coarse === undefined ? {} : { coarse }),
    failures,
    ...(memory === undefined ? {} : { memory }),
    ...(redis === undefined ? {} : { redis }),
    ...(http === undefined ? {} : { http }),
    ...(global === undefined ? {} : { global }),
  };
  if (options.print !== false) process.stdout.write(renderReport(results));
  const file = await writeResults({ ...results, targets: targetsOverRounds(results) }, started);
  if (options.print !== false) process.stdout.write(`\nRaw results: ${file}\n`);
  if (failures.length > 0) process.exitCode = 1;
  return { ...results, file };
}
