/**
 * Times benchmark tasks with tinybench 6, one task at a time, so each task builds its state
 * (a registry with 1M keys, say) just before it is timed and drops it right after.
 *
 * tinybench's own cost per call is tens of nanoseconds, as much as the operations measured
 * here, so every task function runs a fixed inner loop of `batch` operations and the cost
 * per operation is the mean latency of one call divided by `batch`. The mean (not the
 * median) is reported so garbage collection caused by an operation is charged to it.
 * @module
 */
import { Bench } from "tinybench";

/** Operations per timed call unless a task says otherwise. */
export const BATCH = 1000;

/** A prepared task: the timed function and an optional check run after timing. */
export interface Prepared {
  /** Runs `batch` operations (synchronously or as a promise). */
  readonly run: () => unknown;
  /**
   * Called once after timing: returns a note when the task did not take the path it was
   * meant to (for example it saw denials where every call should be allowed), else undefined.
   */
  readonly check?: () => string | undefined;
}

/** One benchmark task. */
export interface TimedTask {
  /** Stable identifier, used in the JSON results and to find reference rows. */
  readonly id: string;
  /** Human-readable name for the report. */
  readonly name: string;
  /** Operations per call of `run` (default {@link BATCH}). */
  readonly batch?: number;
  /** Builds the state outside the timed region and returns the function to time. */
  prepare(): Prepared | Promise<Prepared>;
}

/** The measurement of one task. */
export interface Timing {
  readonly id: string;
  readonly name: string;
  /** Mean nanoseconds per operation. */
  readonly nsPerOp: number;
  /** Median nanoseconds per operation over the timed calls. */
  readonly p50NsPerOp: number;
  /** Relative margin of error of the mean (95%), in percent. */
  readonly rmePercent: number;
  /** Number of timed calls (each of `batch` operations). */
  readonly samples: number;
  readonly batch: number;
  /** Set when the task's check found it did not take the intended path. */
  readonly note?: string;
  /**
   * Mean ns/op of each round, in round order, when the run had rounds (bench/support/
   * rounds.ts); `nsPerOp` is then their median.
   */
  readonly roundsNsPerOp?: readonly number[];
}

/** Time budget per task. */
export interface MeasureOptions {
  readonly timeMs: number;
  readonly warmupMs: number;
}

/** Rounds of a full run and of a quick one: every group runs once per round, in a fresh process. */
export function roundsFor(quick: boolean): number {
  return quick ? 1 : 3;
}

/** Full run and quick (smoke test) budgets, per row and round. */
export function budget(quick: boolean): MeasureOptions {
  // A full run times each row in several rounds (ROUNDS), so a row's time per round is
  // less than one long run's, and the figure is the median over the rounds.
  return quick ? { timeMs: 40, warmupMs: 20 } : { timeMs: 400, warmupMs: 150 };
}

/**
 * Times each task in turn. `onTask` is told before each task starts (for progress output).
 * @throws {Error} If a task throws or tinybench does not complete it.
 */
export async function timeTasks(
  tasks: readonly TimedTask[],
  options: MeasureOptions,
  onTask?: (index: number, task: TimedTask) => void,
): Promise<Timing[]> {
  const out: Timing[] = [];
  for (const [index, task] of tasks.entries()) {
    onTask?.(index, task);
    out.push(await timeOne(task, options));
  }
  return out;
}

async function timeOne(task: TimedTask, options: MeasureOptions): Promise<Timing> {
  const batch = task.batch ?? BATCH;
  const prepared = await task.prepare();
  const bench = new Bench({
    time: options.timeMs,
    warmup: true,
    warmupTime: options.warmupMs,
    throws: true,
  });
  bench.add(task.name, prepared.run);
  await bench.run();
  const result = bench.getTask(task.name)?.result;
  if (result === undefined || result.state !== "completed") {
    const why = result?.state === "errored" ? `: ${result.error.message}` : "";
    throw new Error(`bench task "${task.name}" ended as ${result?.state ?? "missing"}${why}`);
  }
  const note = prepared.check?.();
  const latency = result.latency;
  return {
    id: task.id,
    name: task.name,
    nsPerOp: (latency.mean * 1e6) / batch,
    p50NsPerOp: (latency.p50 * 1e6) / batch,
    rmePercent: latency.rme,
    samples: latency.samplesCount,
    batch,
    ...(note === undefined ? {} : { note }),
  };
}
