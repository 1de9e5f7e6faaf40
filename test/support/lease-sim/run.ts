/**
 * The lease simulator's command line.
 *
 *   npx tsx test/support/lease-sim/run.ts --seed 123456          one seed, replayed, with its details
 *   npx tsx test/support/lease-sim/run.ts --seeds 1000000 [--from 1] [--workers 2]
 *
 * A long run spreads the seeds over worker processes (one per core by default), prints progress every 10 s and a
 * summary (seeds, steps, faults injected by kind, violations), and for each failing seed
 * the one-line command that replays it. Exits 1 when any seed found a violation.
 * @module
 */
import { fork } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { FAULT_KINDS, runSeed, type SeedResult } from "./simulation.js";

/** The command that replays `seed`. */
export function replayCommand(seed: number): string {
  return `npx tsx test/support/lease-sim/run.ts --seed ${seed}`;
}

interface Totals {
  seeds: number;
  steps: number;
  decisions: number;
  faults: Record<string, number>;
  violations: number;
  failing: { seed: number; first: string }[];
  fairnessRuns: number;
  worstFairness: number;
  bestFairness: number;
}

function emptyTotals(): Totals {
  return {
    seeds: 0,
    steps: 0,
    decisions: 0,
    faults: Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])),
    violations: 0,
    failing: [],
    fairnessRuns: 0,
    worstFairness: Number.POSITIVE_INFINITY,
    bestFairness: 0,
  };
}

function add(t: Totals, r: SeedResult): void {
  t.seeds++;
  t.steps += r.steps;
  t.decisions += r.decisions;
  for (const [k, n] of Object.entries(r.faults)) t.faults[k] = (t.faults[k] ?? 0) + (n as number);
  if (r.violations.length > 0) {
    t.violations += r.violations.length;
    if (t.failing.length < 50) t.failing.push({ seed: r.seed, first: r.violations[0] as string });
  }
  if (r.fairness !== undefined) {
    t.fairnessRuns++;
    for (const x of r.fairness.ratios) {
      if (x < t.worstFairness) t.worstFairness = x;
      if (x > t.bestFairness) t.bestFairness = x;
    }
  }
}

function merge(into: Totals, t: Totals): void {
  into.seeds += t.seeds;
  into.steps += t.steps;
  into.decisions += t.decisions;
  for (const [k, n] of Object.entries(t.faults)) into.faults[k] = (into.faults[k] ?? 0) + n;
  into.violations += t.violations;
  into.failing.push(...t.failing.slice(0, 50 - into.failing.length));
  // (Infinity crosses the worker's channel as null: a batch without fairness runs adds none.)
  if (t.fairnessRuns === 0) return;
  into.fairnessRuns += t.fairnessRuns;
  into.worstFairness = Math.min(into.worstFairness, t.worstFairness);
  into.bestFairness = Math.max(into.bestFairness, t.bestFairness);
}

/** Runs seeds `from` to `from + count - 1` here, reporting totals every `reportEvery` seeds. */
async function runRange(
  from: number,
  count: number,
  report: (t: Totals) => void,
  reportEvery: number,
): Promise<Totals> {
  let batch = emptyTotals();
  const all = emptyTotals();
  for (let seed = from; seed < from + count; seed++) {
    add(batch, await runSeed(seed));
    if (batch.seeds >= reportEvery) {
      merge(all, batch);
      report(batch);
      batch = emptyTotals();
    }
  }
  merge(all, batch);
  report(batch);
  return all;
}

function summary(t: Totals, elapsedMs: number): string {
  const faults = Object.entries(t.faults)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  const lines = [
    `seeds ${t.seeds}, steps ${t.steps} (decisions ${t.decisions}), ${(elapsedMs / 1000).toFixed(1)} s, ${(elapsedMs / Math.max(1, t.seeds)).toFixed(2)} ms per seed`,
    `faults injected: ${faults}`,
    `fairness runs ${t.fairnessRuns}: shares from ${t.fairnessRuns > 0 ? t.worstFairness.toFixed(2) : "-"} to ${t.fairnessRuns > 0 ? t.bestFairness.toFixed(2) : "-"} of an equal share`,
    `violations: ${t.violations}`,
  ];
  for (const f of t.failing)
    lines.push(`  seed ${f.seed}: ${f.first}\n    replay: ${replayCommand(f.seed)}`);
  return lines.join("\n");
}

function value(argv: string[], flag: string): number | undefined {
  const i = argv.indexOf(flag);
  if (i === -1) return undefined;
  const n = Number(argv[i + 1]);
  if (!Number.isInteger(n)) throw new RangeError(`${flag} must be an integer, got ${argv[i + 1]}`);
  return n;
}

async function main(argv: string[]): Promise<void> {
  const one = value(argv, "--seed");
  if (one !== undefined) {
    const r = await runSeed(one);
    console.log(`seed ${one}: ${r.config}`);
    console.log(`steps ${r.steps}, decisions ${r.decisions}, faults ${JSON.stringify(r.faults)}`);
    if (r.fairness !== undefined) console.log(`fairness ${JSON.stringify(r.fairness)}`);
    for (const v of r.violations) console.log(`violation: ${v}`);
    console.log(r.violations.length === 0 ? "no violation" : `replay: ${replayCommand(one)}`);
    process.exitCode = r.violations.length === 0 ? 0 : 1;
    return;
  }
  const seeds = value(argv, "--seeds") ?? 1000;
  const from = value(argv, "--from") ?? 1;
  const workers = value(argv, "--workers") ?? Math.min(2, availableParallelism());
  const started = Date.now();
  const total = emptyTotals();
  let lastPrint = started;
  const progress = () => {
    const now = Date.now();
    if (now - lastPrint < 10_000) return;
    lastPrint = now;
    const rate = total.seeds / ((now - started) / 1000);
    const eta = (seeds - total.seeds) / Math.max(rate, 1e-9);
    console.log(
      `${total.seeds}/${seeds} seeds, ${total.steps} steps, ${total.violations} violations, ${rate.toFixed(0)} seeds/s, about ${(eta / 60).toFixed(1)} min left`,
    );
  };
  const per = Math.ceil(seeds / workers);
  const file = fileURLToPath(import.meta.url);
  await Promise.all(
    Array.from({ length: workers }, (_, w) => {
      const start = from + w * per;
      const count = Math.max(0, Math.min(per, from + seeds - start));
      return new Promise<void>((resolve, reject) => {
        if (count === 0) return resolve();
        const worker = fork(file, ["--worker", String(start), String(count)], {
          execArgv: ["--import", "tsx"],
          stdio: ["ignore", "inherit", "inherit", "ipc"],
        });
        worker.on("message", (t: Totals) => {
          for (const f of t.failing) console.log(`violation at seed ${f.seed}: ${f.first}`);
          merge(total, t);
          progress();
        });
        worker.once("error", reject);
        worker.once("exit", (code) =>
          code === 0 ? resolve() : reject(new Error(`worker ${w} exited with ${code}`)),
        );
      });
    }),
  );
  console.log(summary(total, Date.now() - started));
  process.exitCode = total.violations === 0 ? 0 : 1;
}

if (process.argv[2] === "--worker") {
  const start = Number(process.argv[3]);
  const count = Number(process.argv[4]);
  await runRange(start, count, (t) => process.send?.(t), 200);
  process.disconnect?.();
} else if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main(process.argv.slice(2));
}
