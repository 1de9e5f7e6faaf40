/**
 * The Redis benchmark: tollgate's checks beside rate-limiter-flexible's `RateLimiterRedis`
 * and rate-limit-redis (express-rate-limit's store), and a bare `PING`, all on the same
 * ioredis connection to the same server, in one run:
 * - sequential latency: one call at a time, each timed with `process.hrtime.bigint()`;
 *   p50, p99 and mean in microseconds;
 * - throughput: `inFlight` calls kept in flight (each finished call starts the next),
 *   total calls / wall time;
 * - server CPU per check, during the throughput phase: `INFO commandstats` (the usec Redis
 *   spent inside the commands the subject sent, `CONFIG RESETSTAT` first), and `INFO cpu`
 *   (the server process's user + system time, parsing and networking included).
 * The subjects take turns in rounds (every subject once per round, in a rotated order), so a
 * change of load on the machine falls on all of them alike. Keys (`user:0` … `user:999`) are
 * generated before timing; every limit is large enough that every call is allowed, so each
 * check runs its full write path on a key that stays (the bucket refills 1 token/s, far
 * slower than it is spent; every window lasts a minute), as the peers' keys do. A warm-up loads the scripts and the connection first.
 *
 * Run: `npx tsx bench/redis.bench.ts [--quick]` (uses REDIS_URL, or starts a private
 * redis-server). `runRedisBench(url, { quick })` is the entry point for the bench runner;
 * it returns the rows and prints nothing.
 * @module
 */
import { Redis } from "ioredis";
import { RedisStore } from "rate-limit-redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { fromIoredis, RedisFixedWindow, RedisTokenBucket } from "../src/redis/index.js";
import type { RedisRow, RedisSubjectRow } from "./support/report.js";

/** What {@link runRedisBench} measures. */
export interface RedisBenchOptions {
  /** Fewer calls (a CI smoke test, not a measurement). */
  readonly quick?: boolean;
  /** Calls kept in flight in the throughput rows. @default 100 */
  readonly inFlight?: number;
}

/** The rows of the Redis section. */
export interface RedisBenchResult {
  /** Client library and what is measured, for the report. */
  readonly subject: string;
  /** The bare `PING` (reference). */
  readonly ping: RedisRow;
  /** `RedisTokenBucket.consume` (kept for the README summary). */
  readonly consume: RedisRow;
  /** Every subject, `PING` first, side by side. */
  readonly rows: readonly RedisSubjectRow[];
  readonly inFlight: number;
}

/** Row ids of {@link RedisBenchResult.rows}. */
export const REDIS_ROW_IDS = {
  ping: "ping",
  tokenBucket: "tollgate.token-bucket",
  fixedWindow: "tollgate.fixed-window",
  rlf: "rlf.redis",
  rateLimitRedis: "rate-limit-redis",
} as const;

const KEYS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);

/** Percentile `p` (0..1) of ascending `sorted`, nearest rank. */
function percentile(sorted: Float64Array, p: number): number {
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank]!;
}

/** Times `calls` sequential calls of `op` into `into` from `at`; microseconds. */
async function sequential(
  op: (i: number) => Promise<unknown>,
  calls: number,
  into: Float64Array,
  at: number,
): Promise<void> {
  for (let i = 0; i < calls; i++) {
    const start = process.hrtime.bigint();
    await op(i);
    into[at + i] = Number(process.hrtime.bigint() - start) / 1000;
  }
}

/** Wall seconds for `calls` calls with `inFlight` calls outstanding at all times. */
async function throughput(op: (i: number) => Promise<unknown>, calls: number, inFlight: number) {
  let next = 0;
  const worker = async () => {
    while (next < calls) await op(next++);
  };
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** `INFO commandstats`: calls and usec by command name (lowercase). */
async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const text = String(await redis.info("commandstats"));
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    stats.set(m[1]!.toLowerCase(), { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return stats;
}

/** The server's CPU time so far (user + system), in microseconds, from `INFO cpu`. */
async function serverCpuUs(redis: Redis): Promise<number> {
  const text = String(await redis.info("cpu"));
  const read = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(text)?.[1]);
  return (read("used_cpu_user") + read("used_cpu_sys")) * 1e6;
}

interface Subject {
  readonly id: string;
  readonly label: string;
  /** The top-level commands this subject sends, whose commandstats usec count as its cost. */
  readonly commands: readonly string[];
  readonly op: (i: number) => Promise<unknown>;
}

/** Measures every subject on one ioredis connection to `url`. */
export async function runRedisBench(
  url: string,
  options: RedisBenchOptions = {},
): Promise<RedisBenchResult> {
  const quick = options.quick ?? false;
  const inFlight = options.inFlight ?? 100;
  const rounds = quick ? 1 : 8;
  const sequentialCalls = quick ? 200 : 2_500;
  const parallelCalls = quick ? 400 : 10_000;
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  const prefix = `tollgate-bench:${process.pid}:`;
  try {
    const client = fromIoredis(redis);
    const bucket = new RedisTokenBucket({
      client,
      prefix: `${prefix}tb:`,
      capacity: 1e12,
      refillPerSecond: 1,
    });
    const window = new RedisFixedWindow({
      client,
      prefix: `${prefix}fw:`,
      limit: 1e12,
      windowMs: 60_000,
    });
    const rlf = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${prefix}rlf`,
      points: 1e12,
      duration: 60,
    });
    const store = new RedisStore({
      prefix: `${prefix}rlr:`,
      sendCommand: (command: string, ...args: string[]) =>
        redis.call(command, ...args) as Promise<never>,
    });
    store.init({ windowMs: 60_000 } as never);
    const key = (i: number) => KEYS[i % KEYS.length]!;
    const subjects: Subject[] = [
      {
        id: REDIS_ROW_IDS.ping,
        label: "bare `PING` (reference)",
        commands: ["ping"],
        op: () => redis.ping(),
      },
      {
        id: REDIS_ROW_IDS.tokenBucket,
        label: "tollgate `RedisTokenBucket.consume`",
        commands: ["evalsha", "eval"],
        op: (i) => bucket.consume(key(i)),
      },
      {
        id: REDIS_ROW_IDS.fixedWindow,
        label: "tollgate `RedisFixedWindow.consume`",
        commands: ["evalsha", "eval"],
        op: (i) => window.consume(key(i)),
      },
      {
        id: REDIS_ROW_IDS.rlf,
        label: "rate-limiter-flexible `RateLimiterRedis.consume`",
        commands: ["evalsha", "eval"],
        op: (i) => rlf.consume(key(i)),
      },
      {
        id: REDIS_ROW_IDS.rateLimitRedis,
        label: "rate-limit-redis `RedisStore.increment`",
        commands: ["evalsha", "eval"],
        op: (i) => store.increment(key(i)),
      },
    ];
    // Warm-up: connection, script caches, JIT.
    for (let i = 0; i < (quick ? 50 : 2000); i++) for (const s of subjects) await s.op(i);

    const latency = subjects.map(() => new Float64Array(rounds * sequentialCalls));
    const acc = subjects.map(() => ({ seconds: 0, calls: 0, usec: 0, counted: 0, cpuUs: 0 }));
    for (let round = 0; round < rounds; round++) {
      for (let j = 0; j < subjects.length; j++) {
        const n = (j + round) % subjects.length;
        await sequential(subjects[n]!.op, sequentialCalls, latency[n]!, round * sequentialCalls);
      }
      for (let j = 0; j < subjects.length; j++) {
        const n = (j + round) % subjects.length;
        const s = subjects[n]!;
        await redis.config("RESETSTAT");
        const cpuBefore = await serverCpuUs(redis);
        const seconds = await throughput(s.op, parallelCalls, inFlight);
        const cpuAfter = await serverCpuUs(redis);
        const stats = await commandStats(redis);
        const a = acc[n]!;
        a.seconds += seconds;
        a.calls += parallelCalls;
        a.cpuUs += cpuAfter - cpuBefore;
        for (const command of s.commands) {
          const found = stats.get(command);
          if (found === undefined) continue;
          a.usec += found.usec;
          a.counted += found.calls;
        }
      }
    }
    const rows: RedisSubjectRow[] = subjects.map((s, n) => {
      const us = latency[n]!;
      const meanUs = us.reduce((x, y) => x + y, 0) / us.length;
      us.sort();
      const a = acc[n]!;
      return {
        id: s.id,
        name: s.label,
        p50Us: percentile(us, 0.5),
        p99Us: percentile(us, 0.99),
        meanUs,
        opsPerSecond: a.calls / a.seconds,
        serverUsPerCall: a.counted > 0 ? a.usec / a.counted : Number.NaN,
        serverCpuUsPerCall: a.cpuUs / a.calls,
      };
    });
    for (const k of KEYS) {
      await bucket.reset(k);
      await window.reset(k);
    }
    await redis.eval(
      "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end",
      0,
      `${prefix}*`,
    );
    const byId = (id: string) => rows.find((r) => r.id === id)!;
    return {
      subject:
        "ioredis 6, one connection: tollgate, rate-limiter-flexible, rate-limit-redis and PING",
      ping: byId(REDIS_ROW_IDS.ping),
      consume: byId(REDIS_ROW_IDS.tokenBucket),
      rows,
      inFlight,
    };
  } finally {
    redis.disconnect();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { benchRedis } = await import("./support/redis-server.js");
  const available = await benchRedis();
  if (!available.ok) {
    console.error(`redis bench skipped: ${available.reason}`);
    process.exit(0);
  }
  try {
    const r = await runRedisBench(available.redis.url, { quick: process.argv.includes("--quick") });
    console.log(`${r.subject} (${available.redis.origin}), ${r.inFlight} in flight`);
    console.log(
      "| op | p50 µs | p99 µs | mean µs | ops/s | server µs/call (commandstats) | server CPU µs/call |\n|---|---|---|---|---|---|---|",
    );
    for (const x of r.rows) {
      console.log(
        `| ${x.name} | ${x.p50Us.toFixed(1)} | ${x.p99Us.toFixed(1)} | ${x.meanUs.toFixed(1)} | ${Math.round(x.opsPerSecond)} | ${x.serverUsPerCall.toFixed(2)} | ${x.serverCpuUsPerCall.toFixed(2)} |`,
      );
    }
  } finally {
    await available.redis.stop();
  }
}
