/**
 * The rounds of one run: each timing row's per-round values folded into its median
 * (measure.ts `Timing.roundsNsPerOp`), a run seen as one round (a view whose rows are that
 * round's values), and the targets judged over the rounds (bench/support/spread.ts).
 * @module
 */
import type { Timing } from "./measure.js";
import type { RunResults } from "./report.js";
import { foldRounds, median, type SpreadTarget } from "./spread.js";
import { targets } from "./targets.js";

/**
 * Folds each round's timings (by row id) into one timing per row: ns/op, p50 and margin the
 * medians over the rounds the row was measured in, `roundsNsPerOp` every round's ns/op (in
 * round order), the samples summed, the notes of every round (each once).
 */
export function mergeRounds(
  rounds: readonly Readonly<Record<string, Timing>>[],
): Record<string, Timing> {
  const ids = [...new Set(rounds.flatMap((r) => Object.keys(r)))];
  const out: Record<string, Timing> = {};
  for (const id of ids) {
    const seen = rounds.map((r) => r[id]).filter((t): t is Timing => t !== undefined);
    const first = seen[0]!;
    const notes = [...new Set(seen.map((t) => t.note).filter((n): n is string => n !== undefined))];
    out[id] = {
      id,
      name: first.name,
      nsPerOp: median(seen.map((t) => t.nsPerOp)),
      p50NsPerOp: median(seen.map((t) => t.p50NsPerOp)),
      rmePercent: median(seen.map((t) => t.rmePercent)),
      samples: seen.reduce((a, t) => a + t.samples, 0),
      batch: first.batch,
      roundsNsPerOp: seen.map((t) => t.nsPerOp),
      ...(notes.length === 0 ? {} : { note: notes.join("; ") }),
    };
  }
  return out;
}

/** How many rounds the run's timings have (1 for a run without per-round values). */
export function roundCount(r: RunResults): number {
  return Math.max(1, ...Object.values(r.timings).map((t) => t.roundsNsPerOp?.length ?? 1));
}

/** The run as round `i` alone: every row's ns/op that round's (its median where it has none). */
export function roundView(r: RunResults, i: number): RunResults {
  const timings: Record<string, Timing> = {};
  for (const [id, t] of Object.entries(r.timings)) {
    timings[id] = { ...t, nsPerOp: t.roundsNsPerOp?.[i] ?? t.nsPerOp };
  }
  return { ...r, timings };
}

/**
 * The targets over the run's rounds: each one's per-round value (a ratio of two rows of
 * the same round), their median and min–max, and the verdict by the spread rule.
 */
export function targetsOverRounds(r: RunResults): SpreadTarget[] {
  const n = roundCount(r);
  const base = targets(r);
  if (n === 1) return base.map((t) => ({ ...t, tooWide: false }));
  return foldRounds(
    Array.from({ length: n }, (_, i) => targets(roundView(r, i))),
    base,
  );
}
