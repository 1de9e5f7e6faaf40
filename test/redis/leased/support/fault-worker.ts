// One process of the lease fault tests (process-faults.test.ts): one LeasedTokenBucket on a
// real Redis (a server or a cluster), offering a steady load on a few keys and, if told, a
// flood of new keys. Reads its task as JSON from FAULT_WORKER, prints "ready", waits for
// "go" on stdin, and after every tick writes what it admitted so far (per key and source)
// with a synchronous write: a line in the pipe survives a SIGKILL, so the parent knows
// what a killed process admitted (what it admitted and had not reported never reached a
// client). At the end it closes the limiter and prints "done".
import { writeSync } from "node:fs";
import { createInterface } from "node:readline";
import { Cluster, Redis } from "ioredis";
import { fromIoredis, LeasedTokenBucket, type RedisLike } from "../../../../src/redis/index.js";

export interface FaultTask {
  readonly target:
    | { readonly kind: "server"; readonly url: string }
    | { readonly kind: "cluster"; readonly seeds: readonly { host: string; port: number }[] };
  readonly prefix: string;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly initialCredit: number;
  readonly expectedProcesses?: number;
  readonly timeoutMs: number;
  readonly durationMs: number;
  /** Steady load: requests per second on each key. */
  readonly keys: Record<string, number>;
  /** A flood of new keys (one request each) between these times, this many per ms. */
  readonly flood?: { readonly fromMs: number; readonly toMs: number; readonly perMs: number };
}

/** What the worker reports: units admitted per key and source, and decisions made. */
export interface FaultReport {
  readonly admitted: Record<string, Record<string, number>>;
  readonly decisions: number;
  readonly flooded: number;
  readonly floodAdmitted: number;
  /**
   * The stalls of this worker's loop, `[fromMs, toMs]` on `Date.now()`: gaps between two
   * turns longer than {@link STALL_MS} (the loop turns every 1 ms), in which the OS ran
   * nothing of it (a loaded machine, or SIGSTOP, seen when it resumes).
   */
  readonly stalls: (readonly [number, number])[];
}

/** A gap between two turns of the loop longer than this is a stall. */
const STALL_MS = 20;

const task = JSON.parse(process.env["FAULT_WORKER"] ?? "") as FaultTask;

async function connect(): Promise<{ client: RedisLike; close: () => void }> {
  const t = task.target;
  // No offline queue: a call while disconnected fails at once (the limiter's timeout and
  // back-off decide), instead of waiting in the client and running late.
  if (t.kind === "server") {
    const redis = new Redis(t.url, { enableOfflineQueue: false, retryStrategy: () => 50 });
    redis.on("error", () => {});
    return { client: fromIoredis(redis), close: () => redis.disconnect() };
  }
  const cluster = new Cluster(
    t.seeds.map((s) => ({ host: s.host, port: s.port })),
    { lazyConnect: true, enableOfflineQueue: false },
  );
  cluster.on("error", () => {});
  await cluster.connect();
  return { client: fromIoredis(cluster), close: () => cluster.disconnect() };
}

const connection = await connect();
const limiter = new LeasedTokenBucket({
  client: connection.client,
  prefix: task.prefix,
  capacity: task.capacity,
  refillPerSecond: task.refillPerSecond,
  initialCredit: task.initialCredit,
  expectedProcesses: task.expectedProcesses,
  timeoutMs: task.timeoutMs,
  heartbeatTtlMs: 1500,
  record: true,
});

const report: { -readonly [K in keyof FaultReport]: FaultReport[K] } = {
  admitted: {},
  decisions: 0,
  flooded: 0,
  floodAdmitted: 0,
  stalls: [],
};
const issued: Record<string, number> = {};

function write(kind: string): void {
  writeSync(1, `${kind} ${JSON.stringify(report)}\n`);
}

const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\n");
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
const startMs = Date.now();
let lastTurnMs = startMs;
await new Promise<void>((resolve) => {
  const tick = () => {
    const turnMs = Date.now();
    const elapsed = turnMs - startMs;
    let changed = false;
    if (turnMs - lastTurnMs > STALL_MS) {
      report.stalls.push([lastTurnMs, turnMs]);
      changed = true;
    }
    lastTurnMs = turnMs;
    if (elapsed >= task.durationMs) {
      if (changed) write("tick");
      resolve();
      return;
    }
    for (const [key, perSecond] of Object.entries(task.keys)) {
      const due = Math.floor((elapsed * perSecond) / 1000);
      while ((issued[key] ?? 0) < due) {
        issued[key] = (issued[key] ?? 0) + 1;
        const d = limiter.consume(key);
        report.decisions++;
        if (d.allowed) {
          const byKey = (report.admitted[key] ??= {});
          byKey[d.source] = (byKey[d.source] ?? 0) + 1;
          changed = true;
        }
      }
    }
    const f = task.flood;
    if (f !== undefined && elapsed >= f.fromMs && elapsed < f.toMs) {
      const due = Math.floor((elapsed - f.fromMs) * f.perMs);
      while (report.flooded < due) {
        const d = limiter.consume(`flood:${process.pid}:${report.flooded++}`);
        if (d.allowed) report.floodAdmitted++;
        changed = true;
      }
    }
    if (changed) write("tick");
    setTimeout(tick, 1);
  };
  tick();
});
const closing = limiter.close();
// A store that does not answer cannot hold the worker: close() gives up after its calls time out.
await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 3000))]);
write("done");
lines.close();
connection.close();
process.exit(0);
