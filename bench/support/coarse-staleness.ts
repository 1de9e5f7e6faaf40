/**
 * How stale the coarse clock's readings are (docs/semantics.md#the-coarse-clock): the
 * difference `performance.now() - clock()` sampled at the checks of a keyed limiter on
 * `coarseClock()`, in three settings:
 * - a server-like loop: batches of checks, each batch its own macrotask (`setImmediate`),
 *   so the refresh timer runs between them;
 * - one synchronous loop of many checks that never yields (the timer cannot run; only the
 *   read count refreshes);
 * - the first check after the event loop was stalled by a synchronous task (the bound
 *   breaks: the reading is as old as the stall).
 * @module
 */
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { coarseClock } from "../../src/core/coarse-clock.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { median } from "./spread.js";

/** What the measurement found, ms. */
export interface CoarseStaleness {
  readonly refreshMs: number;
  readonly maxReads: number;
  /** Server-like loop: checks per macrotask, samples, staleness quantiles and maximum. */
  readonly loop: {
    readonly batch: number;
    readonly samples: number;
    readonly p50Ms: number;
    readonly p99Ms: number;
    readonly maxMs: number;
  };
  /** One synchronous loop of `checks` checks: staleness p99 and maximum. */
  readonly sync: { readonly checks: number; readonly p99Ms: number; readonly maxMs: number };
  /** The first check after a synchronous stall of `stallMs`. */
  readonly stall: { readonly stallMs: number; readonly firstMs: number };
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Measures for about `durationMs` (plus the synchronous loop and the stall). */
export async function measureCoarseStaleness(quick: boolean): Promise<CoarseStaleness> {
  const clock = coarseClock();
  const keyed = new KeyedLimiter(
    new TokenBucket({ capacity: 1e12, refillPerSecond: 1e-3, clock }),
    { maxKeys: 1 },
  );
  const durationMs = quick ? 300 : 2000;
  const batch = 200;
  const samples: number[] = [];
  let sink = 0;
  const end = performance.now() + durationMs;
  while (performance.now() < end) {
    for (let i = 0; i < batch; i++) {
      if (keyed.allow("10.0.0.1")) sink++;
      if (i % 20 === 0) samples.push(performance.now() - clock());
    }
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  samples.sort((a, b) => a - b);

  const checks = quick ? 100_000 : 1_000_000;
  const syncSamples: number[] = [];
  for (let i = 0; i < checks; i++) {
    if (keyed.allow("10.0.0.1")) sink++;
    if ((i & 255) === 0) syncSamples.push(performance.now() - clock());
  }
  syncSamples.sort((a, b) => a - b);

  // A busy server again (the clock read in every macrotask, its timer running), then one
  // macrotask that stalls the event loop; the first check after it.
  const busyEnd = performance.now() + 20;
  while (performance.now() < busyEnd) {
    for (let i = 0; i < batch; i++) if (keyed.allow("10.0.0.1")) sink++;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const stallMs = 50;
  const stallEnd = performance.now() + stallMs;
  while (performance.now() < stallEnd) sink++;
  const firstMs = performance.now() - clock();
  clock.stop();
  if (sink === -1) console.error("unreachable");
  return {
    refreshMs: clock.refreshMs,
    maxReads: clock.maxReads,
    loop: {
      batch,
      samples: samples.length,
      p50Ms: median(samples),
      p99Ms: quantile(samples, 0.99),
      maxMs: samples.at(-1) ?? 0,
    },
    sync: { checks, p99Ms: quantile(syncSamples, 0.99), maxMs: syncSamples.at(-1) ?? 0 },
    stall: { stallMs, firstMs },
  };
}
