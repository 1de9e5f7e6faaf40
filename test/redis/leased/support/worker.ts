// One process of the multi-process lease tests: N of these share one Redis. Reads its task
// as JSON from the LEASE_WORKER environment variable, prints "ready", waits for "go" on
// stdin, offers the load of each scenario for durationMs (paced by wall-clock time), closes
// its limiters (unused leases go back) and prints one JSON line with what it admitted.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Cluster, Redis } from "ioredis";
import { createCluster } from "redis";
import {
  fromIoredis,
  fromNodeRedis,
  LeasedTokenBucket,
  type RedisLike,
} from "../../../../src/redis/index.js";
import { readSimpleLine } from "../../../support/access-log.js";

export interface Scenario {
  readonly name: string;
  readonly prefix: string;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly initialCredit: number;
  readonly maxLeaseShare?: number;
  /** Keys drawn from in turn (pseudo-randomly when more than one). */
  readonly keys?: readonly string[];
  /** Requests per second this process offers, over all its keys. */
  readonly perSecond?: number;
  /** Replay this access log instead: lines index % processes, time compressed into durationMs. */
  readonly log?: string;
}

/** Where the shared buckets are: one redis-server, or a Redis Cluster from its seed nodes. */
export type Target =
  | { readonly kind: "server"; readonly url: string }
  | {
      readonly kind: "cluster";
      readonly library: "ioredis" | "node-redis";
      readonly seeds: readonly { readonly host: string; readonly port: number }[];
    };

export interface Task {
  readonly target: Target;
  readonly index: number;
  readonly processes: number;
  readonly durationMs: number;
  readonly scenarios: readonly Scenario[];
}

export interface ScenarioResult {
  readonly name: string;
  readonly admitted: Record<string, number>;
  readonly decisions: number;
  readonly exchanges: number;
  readonly heartbeats: number;
  /** Script calls (EVALSHA, EVAL) the client sent for this limiter: one per hash slot and batch. */
  readonly commands: number;
  /** Round trips of exchanges (per batch window, one per node that got a call). */
  readonly roundTrips: number;
  /** Decisions, exchanges and admissions after the first quarter of the run (steady state). */
  readonly steadyDecisions: number;
  readonly steadyExchanges: number;
  readonly steadyAdmitted: number;
  /** When the steady state began (wall clock ms). */
  readonly steadyFromMs: number;
  /**
   * Decisions (and admissions among them) in the aftermath of a stall of this worker's loop,
   * over the whole run: the requests that fell due while the OS did not run it, asked at once
   * when it ran again, and the denials that follow them up to the next admission (the credit
   * the burst ran out of was on its way). A loaded machine decides how many there are.
   */
  readonly aftermathDecisions: number;
  readonly aftermathAdmitted: number;
  readonly sources: Record<string, number>;
}

export interface WorkerResult {
  readonly index: number;
  readonly startMs: number;
  readonly endMs: number;
  /**
   * Steady-state intervals `[fromMs, toMs]` (wall clock) longer than {@link STALL_MS} in which
   * this worker's loop did not run (the OS did not schedule it): it asked nothing then.
   */
  readonly stalls: readonly (readonly [number, number])[];
  readonly scenarios: readonly ScenarioResult[];
}

const task = JSON.parse(process.env["LEASE_WORKER"] ?? "") as Task;

/**
 * How long a worker waits to connect and to read the cluster's slots. Four workers start at
 * once on a machine that may be busy: the clients' defaults (ioredis reads the slots within
 * 1 s, node-redis connects within 5 s) failed there against a healthy cluster. The test
 * measures the limiter, not the connection; the run starts only once every worker is ready.
 */
const CONNECT_TIMEOUT_MS = 60_000;

/** The client of the target and how to let it go. */
async function connect(target: Target): Promise<{ client: RedisLike; close: () => void }> {
  if (target.kind === "server") {
    const redis = new Redis(target.url, { connectTimeout: CONNECT_TIMEOUT_MS });
    return { client: fromIoredis(redis), close: () => redis.disconnect() };
  }
  if (target.library === "ioredis") {
    const cluster = new Cluster(
      target.seeds.map((s) => ({ host: s.host, port: s.port })),
      {
        lazyConnect: true,
        slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
        redisOptions: { connectTimeout: CONNECT_TIMEOUT_MS },
      },
    );
    cluster.on("error", () => {}); // a failed connect rejects below; commands reject on their own
    await cluster.connect();
    return { client: fromIoredis(cluster), close: () => cluster.disconnect() };
  }
  const cluster = createCluster({
    rootNodes: target.seeds.map((s) => ({ url: `redis://${s.host}:${s.port}` })),
    defaults: { socket: { connectTimeout: CONNECT_TIMEOUT_MS } },
  });
  await cluster.connect();
  return { client: fromNodeRedis(cluster), close: () => void cluster.destroy() };
}

/** `client` with a count of the script calls sent through it (nodeOf kept). */
function counted(client: RedisLike): { client: RedisLike; commands: () => number } {
  let commands = 0;
  const wrapped: RedisLike = {
    evalSha: (sha1, keys, args) => {
      commands++;
      return client.evalSha(sha1, keys, args);
    },
    evalScript: (script, keys, args) => {
      commands++;
      return client.evalScript(script, keys, args);
    },
  };
  if (client.nodeOf !== undefined) wrapped.nodeOf = client.nodeOf.bind(client);
  return { client: wrapped, commands: () => commands };
}

const connection = await connect(task.target).catch((error: unknown) => {
  // Said on stderr (the harness's), then exit 1: the harness fails the test with the exit.
  process.stderr.write(`worker ${task.index}: cannot connect to the target: ${String(error)}\n`);
  process.exit(1);
});

interface Running {
  readonly scenario: Scenario;
  readonly limiter: LeasedTokenBucket;
  readonly commands: () => number;
  readonly events: readonly { atMs: number; key: string }[];
  next: number;
  issued: number;
  seed: number;
  decisions: number;
  readonly admitted: Record<string, number>;
  readonly sources: Record<string, number>;
  admittedTotal: number;
  /** In a stall's aftermath: its catch-up turn ("burst"), then its denials ("denials"). */
  aftermath: "burst" | "denials" | undefined;
  aftermathDecisions: number;
  aftermathAdmitted: number;
  mark?: { decisions: number; exchanges: number; admitted: number; atMs: number };
}

function logEvents(path: string): { atMs: number; key: string }[] {
  const lines = readFileSync(path, "utf8").split("\n");
  const read = lines.map(readSimpleLine).filter((l) => l !== undefined);
  const first = Math.min(...read.map((l) => l.timeMs));
  const last = Math.max(...read.map((l) => l.timeMs));
  const scale = (task.durationMs * 0.95) / Math.max(1, last - first);
  return read
    .map((l, i) => ({ i, atMs: (l.timeMs - first) * scale, key: l.host }))
    .filter((e) => e.i % task.processes === task.index)
    .sort((a, b) => a.atMs - b.atMs);
}

const running: Running[] = task.scenarios.map((scenario) => {
  const client = counted(connection.client);
  return {
    scenario,
    commands: client.commands,
    limiter: new LeasedTokenBucket({
      client: client.client,
      prefix: scenario.prefix,
      capacity: scenario.capacity,
      refillPerSecond: scenario.refillPerSecond,
      initialCredit: scenario.initialCredit,
      maxLeaseShare: scenario.maxLeaseShare,
      record: true,
      timeoutMs: 2000,
    }),
    events: scenario.log === undefined ? [] : logEvents(scenario.log),
    next: 0,
    issued: 0,
    seed: task.index * 7919 + 1,
    decisions: 0,
    admitted: {},
    sources: {},
    admittedTotal: 0,
    aftermath: undefined,
    aftermathDecisions: 0,
    aftermathAdmitted: 0,
  };
});

function decide(r: Running, key: string): void {
  const d = r.limiter.consume(key);
  r.decisions++;
  r.sources[d.source] = (r.sources[d.source] ?? 0) + 1;
  if (d.allowed) {
    r.admitted[key] = (r.admitted[key] ?? 0) + 1;
    r.admittedTotal++;
  }
  if (r.aftermath === "denials" && d.allowed) r.aftermath = undefined;
  if (r.aftermath !== undefined) {
    r.aftermathDecisions++;
    if (d.allowed) r.aftermathAdmitted++;
  }
}

function tick(elapsedMs: number): void {
  for (const r of running) {
    const s = r.scenario;
    if (s.log !== undefined) {
      while (r.next < r.events.length && (r.events[r.next] as { atMs: number }).atMs <= elapsedMs) {
        decide(r, (r.events[r.next] as { key: string }).key);
        r.next++;
      }
      continue;
    }
    const keys = s.keys ?? [];
    const due = Math.floor((elapsedMs * (s.perSecond ?? 0)) / 1000);
    while (r.issued < due) {
      r.seed = (r.seed * 1103515245 + 12345) % 2147483648;
      decide(r, keys[(r.seed >>> 8) % keys.length] as string);
      r.issued++;
    }
  }
}

const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\n");
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
const startMs = Date.now();
/** A gap between two turns of the loop longer than this is a stall (the loop asks every 1 ms). */
const STALL_MS = 20;
const stalls: [number, number][] = [];
let lastTurnMs = startMs;
await new Promise<void>((resolve) => {
  const step = () => {
    const turnMs = Date.now();
    const stalled = turnMs - lastTurnMs > STALL_MS;
    if (stalled && running[0]?.mark !== undefined) stalls.push([lastTurnMs, turnMs]);
    if (stalled) for (const r of running) r.aftermath = "burst";
    lastTurnMs = turnMs;
    const elapsed = turnMs - startMs;
    if (elapsed >= task.durationMs) {
      resolve();
      return;
    }
    tick(elapsed);
    for (const r of running) if (r.aftermath === "burst") r.aftermath = "denials";
    if (elapsed >= task.durationMs / 4) {
      for (const r of running) {
        r.mark ??= {
          decisions: r.decisions,
          exchanges: r.limiter.stats.exchanges,
          admitted: r.admittedTotal,
          atMs: Date.now(),
        };
      }
    }
    setTimeout(step, 1);
  };
  step();
});
const endMs = Date.now();
await Promise.all(running.map((r) => r.limiter.close()));
const result: WorkerResult = {
  index: task.index,
  startMs,
  endMs,
  stalls,
  scenarios: running.map((r) => {
    const stats = r.limiter.stats;
    return {
      name: r.scenario.name,
      admitted: r.admitted,
      decisions: r.decisions,
      exchanges: stats.exchanges,
      heartbeats: stats.heartbeats,
      commands: r.commands(),
      roundTrips: stats.roundTrips,
      steadyDecisions: r.decisions - (r.mark?.decisions ?? 0),
      steadyExchanges: stats.exchanges - (r.mark?.exchanges ?? 0),
      steadyAdmitted: r.admittedTotal - (r.mark?.admitted ?? 0),
      steadyFromMs: r.mark?.atMs ?? startMs,
      aftermathDecisions: r.aftermathDecisions,
      aftermathAdmitted: r.aftermathAdmitted,
      sources: r.sources,
    };
  }),
};
process.stdout.write(`${JSON.stringify(result)}\n`);
lines.close();
connection.close();
