/**
 * How the bench turns rounds into one figure, and says when that figure is too loose to
 * judge. Every timing row is measured once per round (each round starts a fresh process
 * per group, the groups alternating), every ratio target is computed per round from two
 * rows of that round, and the figure reported is the median over the rounds with its
 * min–max.
 *
 * The rule (stated in the report and docs/benchmarks.md): a spread is **too wide** when
 * `(max - min) / median` exceeds {@link WIDE_SPREAD} (20%, the ±10% the stability check
 * allows around a median). A target whose spread is too wide and whose bound lies inside
 * its min–max is **not judged** ("too wide to judge"): some rounds pass and some miss, by
 * more than the noise the bench accepts. A wide spread wholly on one side of the bound is
 * still judged (every round agrees). Otherwise the median decides.
 * @module
 */
import { type Comparison, judge, type Target, times } from "./targets.js";

/** `(max - min) / median` above this is too wide to judge a bound inside min–max. */
export const WIDE_SPREAD = 0.2;
/** The stability check: every headline figure within ±10% of its median over runs. */
export const STABLE_WITHIN = 0.1;

/** Median, least and greatest of some rounds' values. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** `(max - min) / median`; 0 for one value, Infinity for a median of 0 with a range. */
  readonly width: number;
  /** The values, in round order. */
  readonly values: readonly number[];
}

/** The median of `xs` (the mean of the middle two for an even count). @throws {RangeError} If empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError("median: no values");
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The spread of the finite values of `xs`, or undefined when there is none. */
export function spreadOf(xs: readonly (number | undefined)[]): Spread | undefined {
  const values = xs.filter((x): x is number => x !== undefined && Number.isFinite(x));
  if (values.length === 0) return undefined;
  const m = median(values);
  const min = Math.min(...values);
  const max = Math.max(...values);
  const width = max === min ? 0 : m === 0 ? Number.POSITIVE_INFINITY : (max - min) / Math.abs(m);
  return { median: m, min, max, width, values };
}

/** Whether a spread is wider than {@link WIDE_SPREAD}. */
export function isWide(s: Spread): boolean {
  // A hair of tolerance: 0.9 to 1.1 around 1 is 20%, not 20.000000000000007%.
  return s.width > WIDE_SPREAD + 1e-12;
}

/**
 * The verdict on a bound for a spread of values: undefined ("too wide to judge") when the
 * spread is too wide and the bound lies inside min–max, else the median's verdict.
 */
export function judgeSpread(s: Spread, comparison: Comparison, limit: number): boolean | undefined {
  const low = judge(s.min, comparison, limit);
  const high = judge(s.max, comparison, limit);
  if (isWide(s) && low !== high) return undefined;
  return judge(s.median, comparison, limit);
}

/** `1.30x (1.22x–1.41x)`, or the median alone when every value is the same. */
export function spreadText(s: Spread, format: (v: number) => string = times): string {
  // One value, or the same in every round (a figure measured once: memory, Redis).
  if (s.values.length < 2 || s.min === s.max) return format(s.median);
  return `${format(s.median)} (${format(s.min)}–${format(s.max)})`;
}

/** A target judged over rounds: the median's target, plus its spread and the verdict rule. */
export interface SpreadTarget extends Target {
  /** The per-round values (undefined when not measured). */
  readonly spread?: Spread;
  /** True when the spread is too wide to judge the bound (bound inside min–max). */
  readonly tooWide: boolean;
}

/**
 * Folds the targets of each round (same list, same order: `targets()` of each round's
 * view) into one list: value = the median over rounds, the spread beside it, and the
 * verdict by {@link judgeSpread}. `medianRound` is `targets()` of the view whose rows are
 * each row's median: its `measured` text is kept. Targets not judged by `judge` alone
 * (the share targets, the HTTP one; a `met` that is not the value against the limit) keep
 * the median round's verdict, with the spread shown.
 * @throws {Error} If the lists do not line up.
 */
export function foldRounds(
  rounds: readonly (readonly Target[])[],
  medianRound: readonly Target[],
): SpreadTarget[] {
  for (const list of rounds) {
    if (
      list.length !== medianRound.length ||
      list.some((t, i) => t.target !== medianRound[i]!.target)
    ) {
      throw new Error("foldRounds: the rounds' target lists differ");
    }
  }
  return medianRound.map((base, i) => {
    const s = spreadOf(rounds.map((list) => list[i]!.value));
    if (s === undefined || base.value === undefined) return { ...base, tooWide: false };
    const plain = base.met === judge(base.value, base.comparison, base.limit);
    const met = plain ? judgeSpread(s, base.comparison, base.limit) : base.met;
    const tooWide = plain && met === undefined;
    const many = s.values.length > 1;
    const ratio = !many
      ? base.ratio
      : base.ratio.endsWith(" the bound")
        ? `${spreadText(s, (v) => times(v / base.limit))} the bound`
        : base.ratio.endsWith("x")
          ? spreadText(s)
          : base.ratio;
    return {
      ...base,
      value: s.median,
      ratio,
      met,
      spread: s,
      tooWide,
    };
  });
}

/** One figure's stability over whole runs: each run's median, their median, the worst deviation. */
export interface Stability {
  readonly target: string;
  readonly runs: readonly (number | undefined)[];
  readonly median: number | undefined;
  /** Largest `|run / median - 1|` over the runs measured. */
  readonly deviation: number | undefined;
  /** Within ±{@link STABLE_WITHIN} of the median in every run; undefined when a run did not measure it. */
  readonly stable: boolean | undefined;
}

/**
 * The stability check over whole runs: for each target (matched by its text), each run's
 * value, the median over runs and the largest deviation from it; stable when every run is
 * within ±{@link STABLE_WITHIN} of that median.
 */
export function stability(runs: readonly (readonly Target[])[]): Stability[] {
  const names = [...new Set(runs.flatMap((list) => list.map((t) => t.target)))];
  return names.map((target) => {
    const values = runs.map((list) => {
      const v = list.find((t) => t.target === target)?.value;
      return v !== undefined && Number.isFinite(v) ? v : undefined;
    });
    const measured = values.filter((v): v is number => v !== undefined);
    if (measured.length === 0) {
      return { target, runs: values, median: undefined, deviation: undefined, stable: undefined };
    }
    const m = median(measured);
    const deviation = Math.max(
      ...measured.map((v) =>
        m === 0 ? (v === 0 ? 0 : Number.POSITIVE_INFINITY) : Math.abs(v / m - 1),
      ),
    );
    const complete = measured.length === values.length;
    return {
      target,
      runs: values,
      median: m,
      deviation,
      stable: complete ? deviation <= STABLE_WITHIN + 1e-12 : undefined,
    };
  });
}
