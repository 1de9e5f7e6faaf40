// The harness of the multi-process lease tests: starts N workers (./worker.ts) against a
// target (one redis-server or a Redis Cluster), says go to all at once, collects what they
// admitted, and checks every key against the server's own record (taken, given) of its
// shared bucket, read after the run.
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { bundle } from "../../../support/bundle.js";
import type { Scenario, Target, Task, WorkerResult } from "./worker.js";

const here = dirname(fileURLToPath(import.meta.url));

/**
 * The worker, bundled once per test process (test/support/bundle.ts) and run by plain
 * node: `--import tsx` compiled every module at each of the many worker starts. Beside
 * worker.ts, so that ioredis and redis resolve from the repository's node_modules.
 */
let workerFile: string | undefined;
function worker(): string {
  if (workerFile === undefined) {
    const file = join(here, `.worker-${process.pid}.mjs`);
    writeFileSync(file, bundle({ entry: "test/redis/leased/support/worker.ts" }));
    process.once("exit", () => rmSync(file, { force: true }));
    workerFile = file;
  }
  return workerFile;
}

/** The test's own view of the target: the server's clock and the raw state of its keys. */
export interface Oracle {
  /** The server's now, ms. */
  serverMs(): Promise<number>;
  /** Every key whose name starts with `prefix` (on every master of a cluster). */
  keys(prefix: string): Promise<string[]>;
  /** The hash at `key` (from the master of its slot in a cluster). */
  hgetall(key: string): Promise<Record<string, string>>;
}

/** Starts the workers, waits until all are ready, says go together, collects their results. */
export async function runWorkers(
  target: Target,
  processes: number,
  durationMs: number,
  scenarios: Scenario[],
  beforeGo: () => Promise<void> = async () => {},
): Promise<WorkerResult[]> {
  const children = Array.from({ length: processes }, (_, index) => {
    const task: Task = { target, index, processes, durationMs, scenarios };
    const child = spawn(process.execPath, [worker()], {
      env: { ...process.env, LEASE_WORKER: JSON.stringify(task) },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const lines = createInterface({ input: child.stdout });
    // A worker that exits early (it could not connect, or failed) rejects both: the test
    // fails at once with its exit code (its own words are on stderr), never waits forever.
    const exited = new Promise<never>((_, reject) =>
      child.once("exit", (code) => reject(new Error(`worker ${index} exited with ${code}`))),
    );
    const ready = Promise.race([
      new Promise<void>((resolve) => lines.once("line", () => resolve())),
      exited,
    ]);
    const result = Promise.race([
      new Promise<WorkerResult>((resolve) => {
        lines.on("line", (line) => {
          if (line.startsWith("{")) resolve(JSON.parse(line) as WorkerResult);
        });
      }),
      exited,
    ]);
    // Awaited below, after every worker is ready: until then a rejection is not unhandled.
    result.catch(() => {});
    return { child, ready, result };
  });
  try {
    await Promise.all(children.map((c) => c.ready));
  } catch (error) {
    for (const c of children) c.child.kill();
    throw error;
  }
  await beforeGo();
  for (const c of children) c.child.stdin.write("go\n");
  return Promise.all(children.map((c) => c.result));
}

/** Totals of one scenario over the workers. */
export interface Summary {
  readonly admitted: Record<string, number>;
  readonly decisions: number;
  readonly exchanges: number;
  readonly heartbeats: number;
  readonly commands: number;
  readonly roundTrips: number;
  readonly steadyDecisions: number;
  readonly steadyExchanges: number;
  /** See {@link ScenarioResult.aftermathDecisions}. */
  readonly aftermathDecisions: number;
  readonly aftermathAdmitted: number;
}

export function summary(results: readonly WorkerResult[], name: string): Summary {
  const admitted: Record<string, number> = {};
  let decisions = 0;
  let exchanges = 0;
  let heartbeats = 0;
  let commands = 0;
  let roundTrips = 0;
  let steadyDecisions = 0;
  let steadyExchanges = 0;
  let aftermathDecisions = 0;
  let aftermathAdmitted = 0;
  for (const r of results) {
    const s = r.scenarios.find((x) => x.name === name);
    if (s === undefined) throw new Error(`no scenario ${name}`);
    for (const [k, n] of Object.entries(s.admitted)) admitted[k] = (admitted[k] ?? 0) + n;
    decisions += s.decisions;
    exchanges += s.exchanges;
    heartbeats += s.heartbeats;
    commands += s.commands;
    roundTrips += s.roundTrips;
    steadyDecisions += s.steadyDecisions;
    steadyExchanges += s.steadyExchanges;
    aftermathDecisions += s.aftermathDecisions;
    aftermathAdmitted += s.aftermathAdmitted;
  }
  return {
    admitted,
    decisions,
    exchanges,
    heartbeats,
    commands,
    roundTrips,
    steadyDecisions,
    steadyExchanges,
    aftermathDecisions,
    aftermathAdmitted,
  };
}

/**
 * The share of a key below its limit that was admitted, leaving out the aftermath of each
 * worker's stalls (see {@link ScenarioResult.aftermathDecisions}): a burst the OS made by not
 * running a worker, and the denials until its credit came, are the machine's, not the
 * limiter's. On a quiet machine there is no aftermath and this is the plain share.
 */
export function shareAdmitted(s: Summary, key: string): number {
  return ((s.admitted[key] ?? 0) - s.aftermathAdmitted) / (s.decisions - s.aftermathDecisions);
}

/**
 * The records of one limiter's keys: the bucket of caller key `k` is
 * `<prefix><keyspace>:k`, the keyspace 8 hex digits (or the heartbeat set's `#processes`).
 */
async function recordsOf(
  oracle: Oracle,
  prefix: string,
): Promise<(key: string) => Promise<{ taken: number; given: number; charged: number }>> {
  const all = (await oracle.keys(prefix)).filter((k) => !k.endsWith("#processes"));
  const roots = new Set(all.map((k) => k.slice(0, prefix.length + 9)));
  expect(roots.size, `one keyspace under ${prefix}`).toBeLessThanOrEqual(1);
  const root = [...roots][0];
  const present = new Set(all);
  return async (key) => {
    if (root === undefined || !present.has(root + key)) return { taken: 0, given: 0, charged: 0 };
    const h = await oracle.hgetall(root + key);
    return {
      taken: Number(h["taken"] ?? 0),
      given: Number(h["given"] ?? 0),
      charged: Number(h["charged"] ?? 0),
    };
  };
}

/** What {@link runAndCheck} measured. */
export interface Checked {
  readonly summaries: Map<string, Summary>;
  /**
   * Seconds on the server's clock from just before "go" (every worker connected, its
   * limiters made) to after the last result (every limiter closed).
   */
  readonly T: number;
  /** Seconds from the first worker's start to the last worker's end. */
  readonly activeS: number;
  readonly report: Record<string, unknown>;
  readonly results: WorkerResult[];
}

/**
 * Runs the scenarios on `processes` workers and checks every key against the server's
 * record: net taken (taken - given) within the shared bucket's bound
 * `capacity + refillPerSecond x T`; admitted within net taken plus what was charged (credit
 * charged to the bucket: every admission is accounted for), and within the bound plus
 * N x initialCredit.
 */
export async function runAndCheck(
  target: Target,
  oracle: Oracle,
  processes: number,
  durationMs: number,
  scenarios: Scenario[],
): Promise<Checked> {
  let startServer = 0;
  const results = await runWorkers(target, processes, durationMs, scenarios, async () => {
    startServer = await oracle.serverMs();
  });
  const T = ((await oracle.serverMs()) - startServer) / 1000;
  const activeS =
    (Math.max(...results.map((r) => r.endMs)) - Math.min(...results.map((r) => r.startMs))) / 1000;
  const report: Record<string, unknown> = { T, activeS };
  const summaries = new Map<string, Summary>();
  for (const scenario of scenarios) {
    const s = summary(results, scenario.name);
    summaries.set(scenario.name, s);
    const bound = scenario.capacity + scenario.refillPerSecond * T;
    const credit = processes * scenario.initialCredit;
    const keys = new Set(Object.keys(s.admitted));
    for (const k of scenario.keys ?? []) keys.add(k);
    const recordOf = await recordsOf(oracle, scenario.prefix);
    let worst = Number.NEGATIVE_INFINITY;
    let worstOverBound = Number.NEGATIVE_INFINITY;
    // All records at once: the client pipelines them (one at a time took seconds for the
    // log's thousands of keys).
    const records = new Map(
      await Promise.all([...keys].map(async (key) => [key, await recordOf(key)] as const)),
    );
    for (const key of keys) {
      const admitted = s.admitted[key] ?? 0;
      const r = records.get(key)!;
      const net = r.taken - r.given;
      expect(
        net,
        `${scenario.name} ${key}: net taken within the bucket's bound`,
      ).toBeLessThanOrEqual(bound + 1e-6);
      expect(
        admitted,
        `${scenario.name} ${key}: admitted within net taken + charged`,
      ).toBeLessThanOrEqual(net + r.charged + 1e-6);
      expect(
        admitted,
        `${scenario.name} ${key}: admitted within the bound + credit`,
      ).toBeLessThanOrEqual(bound + credit + 1e-6);
      worst = Math.max(worst, admitted - net);
      worstOverBound = Math.max(worstOverBound, admitted - bound);
    }
    report[scenario.name] = {
      decisions: s.decisions,
      admitted: Object.values(s.admitted).reduce((a, b) => a + b, 0),
      keys: keys.size,
      worstAdmittedOverNetTaken: worst,
      worstAdmittedMinusBound: worstOverBound,
      // Every script call, heartbeats included, as the client sent it.
      commandsPer1000: (s.commands / s.decisions) * 1000,
      exchangesPer1000: (s.exchanges / s.decisions) * 1000,
      roundTripsPer1000: ((s.roundTrips + s.heartbeats) / s.decisions) * 1000,
      steadyRoundTripsPer100: (s.steadyExchanges / s.steadyDecisions) * 100,
    };
  }
  return { summaries, T, activeS, report, results };
}

/**
 * Utilisation of a saturated hot key at steady load (after each worker's first quarter):
 * an exact bucket, saturated, is empty at the window's start and admits exactly
 * `refillPerSecond` per second of it, less what no one could take: while every worker was
 * stalled at once (the OS ran none of them, as on a loaded machine) for `L` ms, the bucket
 * refilled `refillPerSecond * L / 1000` and kept at most `capacity` of it for later.
 */
export function steadyUtilisation(
  results: readonly WorkerResult[],
  name: string,
  refillPerSecond: number,
  capacity: number,
): number {
  const runs = results.map((r) => r.scenarios.find((x) => x.name === name));
  const steadyFrom = Math.max(...runs.map((x) => x?.steadyFromMs ?? 0));
  const end = Math.max(...results.map((r) => r.endMs));
  const steadyAdmitted = runs.reduce((a, x) => a + (x?.steadyAdmitted ?? 0), 0);
  let lost = 0;
  for (const ms of allStalledMs(results, steadyFrom, end)) {
    const refilled = (refillPerSecond * ms) / 1000;
    if (refilled > capacity) lost += refilled - capacity;
  }
  return steadyAdmitted / ((refillPerSecond * (end - steadyFrom)) / 1000 - lost);
}

/** The lengths (ms) of the runs of milliseconds in `[from, to)` in which every worker was stalled. */
export function allStalledMs(results: readonly WorkerResult[], from: number, to: number): number[] {
  const span = Math.max(0, Math.ceil(to - from));
  const stalled = new Uint8Array(span);
  for (const r of results) {
    for (const [a, b] of r.stalls) {
      for (
        let t = Math.max(0, Math.ceil(a - from));
        t < Math.min(span, Math.floor(b - from));
        t++
      ) {
        stalled[t]!++;
      }
    }
  }
  const runs: number[] = [];
  let length = 0;
  for (let t = 0; t <= span; t++) {
    if (t < span && stalled[t] === results.length) length++;
    else if (length > 0) {
      runs.push(length);
      length = 0;
    }
  }
  return runs;
}
