import fc from "fast-check";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Clock } from "../../src/core/limiter.js";

/**
 * Random timelines of `reserve`, `cancel`, `wait`, aborts and `allow` on one bucket, the
 * acts they produce, and a simple reference check of those acts: units that act within any
 * interval of length d never exceed `capacity + rate * d` (plus the 1e-9 tolerance).
 *
 * Times are counted in quarter units: a quarter of the time one unit takes to refill
 * (`250 / rate` ms). For the exact rates every time, delay and unit count is then exact in
 * binary floating point, so a cancel can land exactly on a reservation's time to act; the
 * rate of 60/s uses 4 ms steps (about a quarter unit), with rounding everywhere.
 */

/** One caller action, `gapQ` quarter units after the previous one. */
export interface TimelineStep {
  readonly gapQ: number;
  /**
   * `cancel` gives up an earlier reservation or wait still pending (the `pick`-th of them,
   * modulo their number), at this step's instant: several in a row with a gap of 0 cancel
   * at one instant in any order, which a timer per reservation cannot (timers armed for one
   * instant fire in the order they were armed).
   */
  readonly op: "reserve" | "wait" | "allow" | "cancel";
  readonly cost: number;
  /**
   * For a reservation: `cancel()` this many quarter units after it (0: at once, in the same
   * instant); for a wait: abort it then. Undefined: never given up.
   */
  readonly giveUpQ: number | undefined;
  /** For `cancel`: which pending reservation or wait (modulo their number). */
  readonly pick: number;
}

/** A bucket and what its callers do. */
export interface Timeline {
  readonly leaky: boolean;
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly steps: readonly TimelineStep[];
}

/** Units that acted (a granted wait, a reservation not cancelled in time, an allow). */
export interface Act {
  readonly atMs: number;
  readonly units: number;
  /** `step 3 reserve` etc., for failure messages. */
  readonly what: string;
}

/** Rates whose quarter unit is a whole number of ms; 60/s is the inexact one. */
const RATES = [1, 2, 10, 50, 125, 250, 60] as const;

/** Milliseconds per quarter unit at `ratePerSecond`. */
export function quarterMs(ratePerSecond: number): number {
  if (process.env.FINE) return 1;
  return ratePerSecond === 60 ? 4 : 250 / ratePerSecond;
}

/** Timelines of up to `maxSteps` steps, both buckets, capacities 1 to 4. */
export function timelines(maxSteps = 24): fc.Arbitrary<Timeline> {
  // A third of the timelines run mostly at one instant, a third spread out, and a third
  // are reserves and cancels (and a few allows) all at one instant on small buckets, as
  // with a clock standing still: there cancels meet in every order.
  return fc.oneof(
    timelinesOf(maxSteps, false),
    timelinesOf(maxSteps, true),
    stillCancels(Math.min(maxSteps, 12)),
  );
}

/** Reserves, cancels and allows of small costs, all at one instant. */
function stillCancels(maxSteps: number): fc.Arbitrary<Timeline> {
  return fc.record({
    leaky: process.env.ONLY === "leaky" ? fc.constant(true) : fc.constant(false),
    capacity: fc.integer({ min: 1, max: 3 }),
    ratePerSecond: fc.constantFrom(1, 2, 10),
    steps: fc.array(
      fc.record({
        gapQ: fc.constant(0),
        op: fc.constantFrom("reserve", "reserve", "reserve", "cancel", "cancel", "allow"),
        cost: fc.constantFrom(0.5, 1, 2, 2),
        giveUpQ: fc.constant(undefined),
        pick: fc.nat({ max: 11 }),
      }),
      { minLength: 4, maxLength: maxSteps },
    ),
  });
}

function timelinesOf(maxSteps: number, still: boolean): fc.Arbitrary<Timeline> {
  const gap = process.env.FINE ? 1500 : 12;
  return fc.record({
    leaky:
      process.env.ONLY === "token"
        ? fc.constant(false)
        : process.env.ONLY === "leaky"
          ? fc.constant(true)
          : fc.boolean(),
    capacity: process.env.FINE ? fc.constant(2) : fc.integer({ min: 1, max: 4 }),
    ratePerSecond: process.env.FINE ? fc.constant(1) : fc.constantFrom(...RATES),
    steps: fc.array(
      fc.record({
        gapQ: still
          ? fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, fc.integer({ min: 0, max: gap }))
          : fc.oneof(fc.constant(0), fc.integer({ min: 0, max: gap })),
        op: fc.constantFrom("reserve", "reserve", "reserve", "wait", "allow", "cancel", "cancel"),
        cost: fc.constantFrom(0, 0.5, 1, 1, 1, 1.5, 2, 3),
        giveUpQ: fc.option(
          fc.oneof(fc.constant(0), fc.integer({ min: 0, max: process.env.FINE ? 3000 : 16 })),
          {
            nil: undefined,
            freq: 3,
          },
        ),
        pick: fc.nat({ max: 23 }),
      }),
      { minLength: 1, maxLength: maxSteps },
    ),
  });
}

/** The bucket a timeline runs on. */
export function makeBucket(t: Timeline, clock: Clock): TokenBucket | LeakyBucket {
  return t.leaky
    ? new LeakyBucket({ capacity: t.capacity, leakPerSecond: t.ratePerSecond, clock })
    : new TokenBucket({ capacity: t.capacity, refillPerSecond: t.ratePerSecond, clock });
}

/**
 * Runs `t` on `bucket` (its clock driven by fake timers: `advance` moves them), then waits
 * until everything has settled, and returns the acts in time order.
 */
export async function runTimeline(
  t: Timeline,
  bucket: TokenBucket | LeakyBucket,
  clock: Clock,
  advance: (ms: number) => Promise<void>,
): Promise<Act[]> {
  const q = quarterMs(t.ratePerSecond);
  const acts: Act[] = [];
  /** Reservations made: each acts at its time unless cancelled at or before it. */
  const reserved: { actAtMs: number; units: number; what: string; cancelled: boolean }[] = [];
  /** What a `cancel` step may give up: pending reservations and waits, in order made. */
  const pending: { giveUp: () => void; done: () => boolean }[] = [];
  for (const [i, { gapQ, op, cost, giveUpQ, pick }] of t.steps.entries()) {
    await advance(gapQ * q);
    const now = clock();
    const what = `step ${i} ${op}(${cost})`;
    if (op === "allow") {
      if (bucket.allow(cost)) acts.push({ atMs: now, units: cost, what });
    } else if (op === "cancel") {
      const live = pending.filter((p) => !p.done());
      if (live.length > 0) live[pick % live.length]!.giveUp();
    } else if (op === "reserve") {
      const r = bucket.reserve(cost);
      if (!r.ok) continue;
      const entry = { actAtMs: now + r.delayMs, units: cost, what, cancelled: false };
      reserved.push(entry);
      let given = false;
      const cancel = () => {
        // A caller that cancels at or before its time to act does not act.
        if (!given && clock() <= entry.actAtMs) entry.cancelled = true;
        given = true;
        r.cancel();
      };
      pending.push({ giveUp: cancel, done: () => given || clock() > entry.actAtMs });
      if (giveUpQ === 0) cancel();
      else if (giveUpQ !== undefined) setTimeout(cancel, giveUpQ * q);
    } else {
      const controller = new AbortController();
      let settled = false;
      bucket.wait(cost, { signal: controller.signal }).then(
        () => {
          settled = true;
          acts.push({ atMs: clock(), units: cost, what });
        },
        () => {
          settled = true;
        },
      );
      pending.push({ giveUp: () => controller.abort(), done: () => settled });
      if (giveUpQ === 0) controller.abort();
      else if (giveUpQ !== undefined) setTimeout(() => controller.abort(), giveUpQ * q);
    }
  }
  // Long enough for every pending entry (at most 24 steps of cost 3: 288 quarter units).
  await advance(process.env.FINE ? 100_000 : 400 * q);
  for (const r of reserved)
    if (!r.cancelled) acts.push({ atMs: r.actAtMs, units: r.units, what: r.what });
  return acts.sort((a, b) => a.atMs - b.atMs);
}

/**
 * The slack of the check: the documented float tolerance of a fit (`1e-9 * max(1, cost)`);
 * at the inexact rate also one ms of refill, since a waiter's timer fires at the whole ms at
 * or after its due time (a waiter due at 8.33 ms acts at 9 ms, while a reservation behind it
 * still acts at its exact time).
 */
export function slackUnits(capacity: number, ratePerSecond: number): number {
  const exact = ratePerSecond !== 60;
  return 1e-9 * Math.max(1, capacity) + (exact ? 0 : ratePerSecond / 1000);
}

/**
 * The reference check: the first interval `[from, to]` (between two acts, sorted by time) in
 * which the acts' units exceed `capacity + rate * (to - from) / 1000` plus the tolerance, or
 * undefined when there is none.
 */
export function burstBeyondBound(
  acts: readonly Act[],
  capacity: number,
  ratePerSecond: number,
): { fromMs: number; toMs: number; units: number; boundUnits: number } | undefined {
  for (let i = 0; i < acts.length; i++) {
    let units = 0;
    // Acts at the same instant as acts[i] but listed before it count too.
    let start = i;
    while (start > 0 && acts[start - 1]!.atMs === acts[i]!.atMs) start--;
    if (start !== i) continue;
    for (let j = i; j < acts.length; j++) {
      units += acts[j]!.units;
      if (j + 1 < acts.length && acts[j + 1]!.atMs === acts[j]!.atMs) continue;
      const boundUnits = capacity + (ratePerSecond * (acts[j]!.atMs - acts[i]!.atMs)) / 1000;
      if (units > boundUnits + slackUnits(capacity, ratePerSecond)) {
        return { fromMs: acts[i]!.atMs, toMs: acts[j]!.atMs, units, boundUnits };
      }
    }
  }
  return undefined;
}
