/**
 * The "global limit" benchmark: N = 4 child processes (bench/global-worker.ts) share one
 * limit on one hot key against one Redis, each checking as fast as it can, one row at a
 * time:
 * - `keyed`: an in-process `KeyedLimiter(TokenBucket)` per process (not shared: N times the
 *   limit goes through; the reference for cost);
 * - `leased`: `LeasedTokenBucket` (leases from the shared bucket, decisions in process);
 * - `redis`: `RedisTokenBucket`, one round trip per check;
 * - `rlf`: rate-limiter-flexible's `RateLimiterRedis`, one round trip per check.
 *
 * Columns: per-check p50/p99 (the median over processes), checks/s (all processes), Redis
 * commands and round trips per 1,000 checks (`CONFIG RESETSTAT` before the row, `INFO
 * commandstats` after; commands include those a script runs, round trips count the script
 * calls `EVAL*`/`FCALL*` and every other top-level command), and admitted against the exact
 * bound of one shared bucket, `capacity + refillPerSecond x T`, T from the first process's
 * start to the last one's end.
 *
 * Run: `npx tsx bench/global.bench.ts [--quick]` (REDIS_URL, or a private redis-server).
 * `runGlobalBench(url, { quick })` is the entry point for the bench runner.
 * @module
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import type { GlobalWorkerResult } from "./global-worker.js";

/** The processes sharing the limit. */
export const GLOBAL_PROCESSES = 4;
/** The shared bucket: a burst of 2000, 5000 per second (saturated by every row). */
export const GLOBAL_CAPACITY = 2000;
export const GLOBAL_REFILL_PER_SECOND = 5000;

/**
 * The paced row's shared bucket and load: each process offers 4,000 checks per second (at
 * a steady pace) against one bucket of 1,000 refilled at 2,000 per second, so the key is
 * saturated and its processes contend for it: Redis commands per 1,000 checks and the
 * share of the exact bound admitted are the efficiency targets.
 */
export const PACED_CAPACITY = 1000;
export const PACED_REFILL_PER_SECOND = 2000;
export const PACED_PER_SECOND = 4000;

/** The rows, in report order; a row with its own bucket says so. */
export const GLOBAL_ROWS: readonly {
  readonly id: string;
  readonly name: string;
  readonly capacity?: number;
  readonly refillPerSecond?: number;
  /** Checks per second per process, paced; absent: as fast as it can. */
  readonly perSecond?: number;
}[] = [
  { id: "keyed", name: "in-process KeyedLimiter(TokenBucket), per process (N x the limit)" },
  { id: "leased", name: "LeasedTokenBucket (leases, initialCredit 0)" },
  {
    id: "leased-paced",
    name: `LeasedTokenBucket, ${PACED_PER_SECOND}/s per process against ${PACED_REFILL_PER_SECOND}/s (capacity ${PACED_CAPACITY})`,
    capacity: PACED_CAPACITY,
    refillPerSecond: PACED_REFILL_PER_SECOND,
    perSecond: PACED_PER_SECOND,
  },
  { id: "redis", name: "RedisTokenBucket, one round trip per check" },
  { id: "rlf", name: "rate-limiter-flexible RateLimiterRedis (fixed window)" },
];

/** One row of the section. */
export interface GlobalRow {
  readonly id: string;
  readonly name: string;
  readonly checks: number;
  readonly admitted: number;
  /** T in seconds: first start to last end over the processes. */
  readonly seconds: number;
  readonly checksPerSecond: number;
  /** Medians over the processes. */
  readonly p50Ns: number;
  readonly p99Ns: number;
  /** The interleaved in-process reference, medians over the processes (sync rows). */
  readonly refP50Ns?: number;
  readonly refP99Ns?: number;
  readonly commandsPer1000: number;
  readonly roundTripsPer1000: number;
  /** `capacity + refillPerSecond x T` (for `rlf`, its fixed window's own bound is noted). */
  readonly bound: number;
  /** Lease calls per 1,000 checks counted by the limiters themselves (leased row). */
  readonly leaseCallsPer1000?: number;
}

/** What {@link runGlobalBench} returns. */
export interface GlobalResults {
  readonly processes: number;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly durationMs: number;
  readonly rows: readonly GlobalRow[];
}

const SCRIPT_CALLS = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"]);
/** Commands a script runs (counted as commands, not round trips) and the bench's own. */
const IN_SCRIPT = new Set([
  "hget",
  "hmget",
  "hset",
  "hgetall",
  "hincrbyfloat",
  "hincrby",
  "pexpire",
  "pexpireat",
  "expire",
  "time",
  "zadd",
  "zremrangebyscore",
  "zcard",
  "zrem",
  "incrby",
  "incr",
  "get",
  "set",
  "pttl",
  "ttl",
  "del",
]);
const OWN = new Set(["info", "config"]);

/** `INFO commandstats` as command name -> calls. */
function commandStats(info: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const line of info.split("\n")) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (m) calls.set(m[1]!.toLowerCase(), Number(m[2]));
  }
  return calls;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Starts the N processes of `row`, starts them together, and collects their results. */
async function runRow(
  row: (typeof GLOBAL_ROWS)[number],
  url: string,
  prefix: string,
  durationMs: number,
  beforeGo: () => Promise<void>,
  afterResults: () => Promise<void>,
): Promise<GlobalWorkerResult[]> {
  const file = fileURLToPath(new URL("./global-worker.ts", import.meta.url));
  const children = Array.from({ length: GLOBAL_PROCESSES }, () =>
    fork(
      file,
      [
        row.id,
        url,
        prefix,
        String(row.capacity ?? GLOBAL_CAPACITY),
        String(row.refillPerSecond ?? GLOBAL_REFILL_PER_SECOND),
        String(durationMs),
        String(row.perSecond ?? 0),
      ],
      { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
    ),
  );
  const results = children.map(
    (child) =>
      new Promise<GlobalWorkerResult>((resolve, reject) => {
        child.on("message", (m: { result?: GlobalWorkerResult }) => {
          if (m.result !== undefined) resolve(m.result);
        });
        child.once("error", reject);
        child.once("exit", (code) =>
          reject(new Error(`global bench: ${row.id} process exited with status ${code}`)),
        );
      }),
  );
  try {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve, reject) => {
            child.once("message", () => resolve());
            child.once("exit", () =>
              reject(new Error(`global bench: ${row.id} process did not start`)),
            );
          }),
      ),
    );
    // All warmed up and ready: start together, a little ahead so every process is waiting.
    await beforeGo();
    const go = performance.timeOrigin + performance.now() + 200;
    for (const child of children) child.send({ go });
    const all = await Promise.all(results);
    await afterResults();
    // Let them close (a leased limiter gives its tokens back) and exit.
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            child.removeAllListeners("exit");
            child.once("exit", () => resolve());
            child.send({ bye: true });
          }),
      ),
    );
    return all;
  } finally {
    for (const child of children) {
      child.removeAllListeners("exit");
      if (child.exitCode === null) child.kill();
    }
  }
}

/** Measures every row against the Redis at `url`. */
export async function runGlobalBench(
  url: string,
  options: { readonly quick?: boolean; readonly progress?: (text: string) => void } = {},
): Promise<GlobalResults> {
  const quick = options.quick === true;
  const durationMs = quick ? 1000 : 8000;
  const admin = new Redis(url, { lazyConnect: true });
  await admin.connect();
  const rows: GlobalRow[] = [];
  try {
    for (const row of GLOBAL_ROWS) {
      options.progress?.(`${row.id}: ${GLOBAL_PROCESSES} processes, ${durationMs} ms`);
      const prefix = `tollgate-global-bench:${process.pid}:${row.id}:`;
      let info = "";
      const parts = await runRow(
        row,
        url,
        prefix,
        durationMs,
        async () => {
          await admin.config("RESETSTAT");
        },
        async () => {
          info = (await admin.info("commandstats")) as string;
        },
      );
      const stats = commandStats(info);
      let commands = 0;
      let roundTrips = 0;
      for (const [name, calls] of stats) {
        if (OWN.has(name.split("|")[0]!)) continue;
        commands += calls;
        if (SCRIPT_CALLS.has(name) || !IN_SCRIPT.has(name)) roundTrips += calls;
      }
      const checks = parts.reduce((a, p) => a + p.checks, 0);
      const admitted = parts.reduce((a, p) => a + p.admitted, 0);
      const seconds =
        (Math.max(...parts.map((p) => p.endMs)) - Math.min(...parts.map((p) => p.startMs))) / 1000;
      const leaseCalls = parts.reduce((a, p) => a + (p.leaseCalls ?? 0), 0);
      const refs = parts.filter((p) => p.refP50Ns !== undefined);
      rows.push({
        id: row.id,
        name: row.name,
        checks,
        admitted,
        seconds,
        checksPerSecond: checks / seconds,
        p50Ns: median(parts.map((p) => p.p50Ns)),
        p99Ns: median(parts.map((p) => p.p99Ns)),
        ...(refs.length > 0
          ? {
              refP50Ns: median(refs.map((p) => p.refP50Ns!)),
              refP99Ns: median(refs.map((p) => p.refP99Ns!)),
            }
          : {}),
        commandsPer1000: (commands / checks) * 1000,
        roundTripsPer1000: (roundTrips / checks) * 1000,
        bound:
          (row.capacity ?? GLOBAL_CAPACITY) +
          (row.refillPerSecond ?? GLOBAL_REFILL_PER_SECOND) * seconds,
        ...(row.id.startsWith("leased") ? { leaseCallsPer1000: (leaseCalls / checks) * 1000 } : {}),
      });
      const keys = await admin.keys(`${prefix}*`);
      if (keys.length > 0) await admin.del(...keys);
    }
  } finally {
    admin.disconnect();
  }
  return {
    processes: GLOBAL_PROCESSES,
    capacity: GLOBAL_CAPACITY,
    refillPerSecond: GLOBAL_REFILL_PER_SECOND,
    durationMs,
    rows,
  };
}

/** Command line: prints the rows as a Markdown table. */
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { benchRedis } = await import("./support/redis-server.js");
  const available = await benchRedis();
  if (!available.ok) {
    console.error(`global bench skipped: ${available.reason}`);
    process.exit(0);
  }
  try {
    const r = await runGlobalBench(available.redis.url, {
      quick: process.argv.includes("--quick"),
      progress: (text) => process.stderr.write(`${text}\n`),
    });
    console.log(JSON.stringify(r, null, 2));
  } finally {
    await available.redis.stop();
  }
}
