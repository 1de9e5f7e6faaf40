/**
 * Section 6 (`npm run bench:http`): the HTTP experiment of bench/http.bench.ts (node:http,
 * autocannon, each server in its own process), reported beside the source article's
 * figures. When that harness has no `tollgate/redis` rows, this module adds them the same
 * way: a server in a second process (bench/support/http-redis-server.ts) rate limiting
 * every request through `RedisTokenBucket` (one round trip per request), then one through
 * `LeasedTokenBucket` (decisions in process from leases), on the bench's Redis, each warmed
 * up for 1 s, then measured for the same duration and connections.
 * @module
 */
import { fork } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { runHttpBench } from "../http.bench.js";
import { runChild } from "./child.js";
import { budget, type Timing } from "./measure.js";
import { benchRedis } from "./redis-server.js";
import type { HttpResults, HttpRow } from "./report.js";

/** The part of autocannon's result used here. */
interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

/** The Redis-limited server child: its URL, a CPU probe and a stop function. */
interface RedisServerChild {
  readonly url: string;
  /** The child's CPU time (µs) and requests served so far. */
  cpu(): Promise<{ cpuUs: number; requests: number }>;
  stop(): void;
}

/** The Redis-backed rows: server kind (bench/support/http-redis-server.ts), id and name. */
const REDIS_ROWS = [
  { kind: "redis", id: "redis", name: "tollgate/http + tollgate/redis RedisTokenBucket (allowed)" },
  {
    kind: "leased",
    id: "leased",
    name: "tollgate/http + tollgate/redis LeasedTokenBucket (allowed)",
  },
] as const;

/** Starts the Redis-limited server of `kind` for `redisUrl`. */
function startRedisServer(redisUrl: string, kind: string): Promise<RedisServerChild> {
  const file = fileURLToPath(new URL("./http-redis-server.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = fork(file, [redisUrl, kind], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const onExit = (code: number | null) =>
      reject(new Error(`http bench: the Redis server exited (${code})`));
    child.once("error", reject);
    child.once("exit", onExit);
    child.once("message", (message: { port: number }) => {
      resolve({
        url: `http://127.0.0.1:${message.port}/`,
        cpu: () =>
          new Promise((done) => {
            child.once("message", done);
            child.send("cpu");
          }),
        stop: () => {
          child.off("exit", onExit);
          child.kill();
        },
      });
    });
  });
}

/** Measures the `tollgate/redis` rows, or says why they were skipped. */
async function redisRows(
  quick: boolean,
  durationSeconds: number,
  connections: number,
  progress: (text: string) => void,
): Promise<HttpRow[] | { skipped: string }> {
  const available = await benchRedis();
  if (!available.ok) return { skipped: available.reason };
  try {
    const rows: HttpRow[] = [];
    for (const row of REDIS_ROWS) {
      rows.push(
        await redisRow(available.redis.url, row, quick, durationSeconds, connections, progress),
      );
    }
    return rows;
  } finally {
    await available.redis.stop();
  }
}

/** Measures one Redis-backed row against the Redis at `redisUrl`. */
async function redisRow(
  redisUrl: string,
  row: (typeof REDIS_ROWS)[number],
  quick: boolean,
  durationSeconds: number,
  connections: number,
  progress: (text: string) => void,
): Promise<HttpRow> {
  const rounds = quick ? 1 : 2;
  const server = await startRedisServer(redisUrl, row.kind);
  try {
    const samples: AutocannonResult[] = [];
    let cpuUs = 0;
    let requests = 0;
    for (let round = 1; round <= rounds; round++) {
      progress(`${row.id}, round ${round}/${rounds}`);
      await autocannon({ url: server.url, connections, duration: 1 }); // warm-up
      const before = await server.cpu();
      samples.push(await autocannon({ url: server.url, connections, duration: durationSeconds }));
      const after = await server.cpu();
      cpuUs += after.cpuUs - before.cpuUs;
      requests += after.requests - before.requests;
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      id: row.id,
      name: row.name,
      requestsPerSecond: mean(samples.map((s) => s.requests.average)),
      p50Ms: mean(samples.map((s) => s.latency.p50)),
      p99Ms: mean(samples.map((s) => s.latency.p99)),
      non2xx: samples.reduce((a, s) => a + s.non2xx, 0),
      errors: samples.reduce((a, s) => a + s.errors + s.timeouts, 0),
      cpuUsPerRequest: cpuUs / requests,
    };
  } finally {
    server.stop();
  }
}

/** Runs the HTTP rows (full: 100 connections, 10 s per variant after a warm-up). */
export async function runHttpSection(
  quick: boolean,
  progress: (text: string) => void,
): Promise<HttpResults | { skipped: string }> {
  progress("middleware alone (tinybench)");
  const timings = (await runChild("support/worker.ts", [
    "http.middleware",
    ...(quick ? ["--quick"] : []),
  ])) as Timing[];
  const baseline = timings.find((t) => t.id === "http.baseline");
  const middleware = timings.find((t) => t.id === "http.middleware");
  const results = await runHttpBench({ quick, progress });
  const rows: HttpRow[] = [...results.rows];
  const notes = [...results.notes];
  if (!rows.some((row) => row.id === "redis")) {
    const redis = await redisRows(quick, results.durationSeconds, results.connections, progress);
    if ("skipped" in redis) notes.push(`The tollgate/redis rows were skipped: ${redis.skipped}.`);
    else {
      rows.push(...redis);
      notes.push(
        "The tollgate/redis rows ran after the others (bench/support/http-section.ts), against " +
          "a private redis-server on the same machine: RedisTokenBucket makes one round trip " +
          "per request; LeasedTokenBucket decides in process from leases refilled in the background.",
      );
    }
  }
  if (baseline !== undefined && middleware !== undefined) {
    const b = budget(quick);
    notes.push(
      `The middleware alone, without sockets (tinybench, ${b.timeMs} ms per row, in a fresh ` +
        `process): ${((middleware.nsPerOp - baseline.nsPerOp) / 1000).toFixed(2)} µs of CPU per ` +
        `request (a fresh \`ServerResponse\` plus the middleware: ${(middleware.nsPerOp / 1000).toFixed(2)} µs; ` +
        `the \`ServerResponse\` alone: ${(baseline.nsPerOp / 1000).toFixed(2)} µs).`,
    );
  }
  return {
    rows,
    connections: results.connections,
    durationSeconds: results.durationSeconds,
    notes,
    ...(baseline !== undefined && middleware !== undefined
      ? { middlewareNs: middleware.nsPerOp - baseline.nsPerOp }
      : {}),
  };
}
