/**
 * The Redis benchmark: `RedisTokenBucket.consume` next to a bare `PING` on the
 * same ioredis connection, so the ratio shows what the script adds to a round trip.
 * - sequential latency: one call at a time, each timed with `process.hrtime.bigint()`;
 *   p50, p99 and mean in microseconds;
 * - throughput: `inFlight` calls kept in flight (each finished call starts the next),
 *   total calls / wall time.
 * Keys (`user:0` … `user:999`) are generated before timing; the bucket is large enough
 * that every call is allowed, so each consume runs the full write path (HSET + PEXPIREAT).
 * A warm-up loads the script and the connection first.
 *
 * Run: `npx tsx bench/redis.bench.ts [--quick]` (uses REDIS_URL, or starts a private
 * redis-server). `runRedisBench(url, { quick })` is the entry point for the bench runner;
 * it returns the rows and prints nothing.
 * @module
 */
import { Redis } from "ioredis";
import { fromIoredis, RedisTokenBucket } from "../src/redis/index.js";
import type { RedisRow } from "./support/report.js";

/** What {@link runRedisBench} measures. */
export interface RedisBenchOptions {
  /** Fewer calls (a CI smoke test, not a measurement). */
  readonly quick?: boolean;
  /** Calls kept in flight in the throughput rows. @default 100 */
  readonly inFlight?: number;
}

/** The rows of the Redis section. */
export interface RedisBenchResult {
  /** Client library and operation measured, for the report. */
  readonly subject: string;
  readonly ping: RedisRow;
  readonly consume: RedisRow;
  readonly inFlight: number;
}

const KEYS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);

/** Percentile `p` (0..1) of ascending `sorted`, nearest rank. */
function percentile(sorted: Float64Array, p: number): number {
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank]!;
}

/** Times `calls` sequential calls of `op`; microseconds. */
async function sequential(op: (i: number) => Promise<unknown>, calls: number) {
  const us = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const start = process.hrtime.bigint();
    await op(i);
    us[i] = Number(process.hrtime.bigint() - start) / 1000;
  }
  const mean = us.reduce((a, b) => a + b, 0) / calls;
  us.sort();
  return { p50Us: percentile(us, 0.5), p99Us: percentile(us, 0.99), meanUs: mean };
}

/** Calls per second with `inFlight` calls outstanding at all times, `calls` in total. */
async function throughput(op: (i: number) => Promise<unknown>, calls: number, inFlight: number) {
  let next = 0;
  const worker = async () => {
    while (next < calls) await op(next++);
  };
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return calls / seconds;
}

/** Measures PING and consume on one ioredis connection to `url`. */
export async function runRedisBench(
  url: string,
  options: RedisBenchOptions = {},
): Promise<RedisBenchResult> {
  const quick = options.quick ?? false;
  const inFlight = options.inFlight ?? 100;
  const calls = quick ? 300 : 20_000;
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  try {
    const limiter = new RedisTokenBucket({
      client: fromIoredis(redis),
      prefix: `tollgate-bench:${process.pid}:`,
      capacity: 1e12,
      refillPerSecond: 1e6,
    });
    const ping = () => redis.ping();
    const consume = (i: number) => limiter.consume(KEYS[i % KEYS.length]!);
    // Warm-up: connection, script cache, JIT.
    for (let i = 0; i < (quick ? 50 : 2000); i++) {
      await ping();
      await consume(i);
    }
    // Same connection, same keys; PING first, then consume, for each measure.
    const pingSeq = await sequential(ping, calls);
    const consumeSeq = await sequential(consume, calls);
    const pingOps = await throughput(ping, calls * 2, inFlight);
    const consumeOps = await throughput(consume, calls * 2, inFlight);
    for (const key of KEYS) await limiter.reset(key);
    return {
      subject: "ioredis 6, RedisTokenBucket.consume vs PING, one connection",
      ping: { ...pingSeq, opsPerSecond: pingOps },
      consume: { ...consumeSeq, opsPerSecond: consumeOps },
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
    const row = (name: string, x: RedisRow) =>
      `| ${name} | ${x.p50Us.toFixed(1)} | ${x.p99Us.toFixed(1)} | ${x.meanUs.toFixed(1)} | ${Math.round(x.opsPerSecond)} |`;
    console.log(`${r.subject} (${available.redis.origin}), ${r.inFlight} in flight`);
    console.log("| op | p50 µs | p99 µs | mean µs | ops/s |\n|---|---|---|---|---|");
    console.log(row("PING", r.ping));
    console.log(row("consume", r.consume));
    console.log(
      `consume/PING: p50 ${(r.consume.p50Us / r.ping.p50Us).toFixed(2)}x, throughput ${(r.consume.opsPerSecond / r.ping.opsPerSecond).toFixed(2)}x`,
    );
  } finally {
    await available.redis.stop();
  }
}
