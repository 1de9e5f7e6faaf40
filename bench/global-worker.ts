/**
 * One process of the "global limit" section (bench/global.bench.ts): `node --import tsx
 * bench/global-worker.ts <row> <redis-url> <prefix> <capacity> <refillPerSecond> <ms>`.
 * It connects, warms up on a key of its own, says `ready`, waits for `go` (the start time,
 * epoch ms, the same for all processes), then checks one hot key as fast as it can for
 * `ms` and sends its counts and per-check latencies.
 *
 * Rows: `keyed` (an in-process `KeyedLimiter(TokenBucket)` with the shared options, so N
 * processes admit N times the limit), `leased` (`LeasedTokenBucket`, `initialCredit: 0`,
 * so the exact bound holds with no credit term), `leased-paced` (the same at a steady
 * `perSecond`, the 8th argument, against a bucket the processes contend for), `redis` (`RedisTokenBucket`, one round trip
 * per check) and `rlf` (rate-limiter-flexible's `RateLimiterRedis`, one round trip per
 * check). The synchronous rows yield to the event loop every 100 checks (as a server does
 * between requests, so background lease refills can land) and also time an in-process
 * `KeyedLimiter(TokenBucket)` consume, interleaved call by call: the reference of the
 * latency targets, in the same process and run. The Redis rows keep one check in flight.
 * @module
 */
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import { fromIoredis, LeasedTokenBucket, RedisTokenBucket } from "../src/redis/index.js";
import { Histogram } from "./support/histogram.js";

/** What one process sends back. */
export interface GlobalWorkerResult {
  readonly checks: number;
  readonly admitted: number;
  /** Wall time of the measured loop (epoch ms, this process's clock). */
  readonly startMs: number;
  readonly endMs: number;
  readonly p50Ns: number;
  readonly p99Ns: number;
  /** The interleaved in-process reference (synchronous rows only). */
  readonly refP50Ns?: number;
  readonly refP99Ns?: number;
  /** Lease calls (exchanges + heartbeats) made while measured (leased row only). */
  readonly leaseCalls?: number;
  readonly tokensTaken?: number;
  readonly tokensGivenBack?: number;
}

const [row, url, prefix, capacityArg, refillArg, msArg, paceArg] = process.argv.slice(2);
const capacity = Number(capacityArg);
const refillPerSecond = Number(refillArg);
const durationMs = Number(msArg);
/** Checks per second, paced (the `leased-paced` row); 0: as fast as it can. */
const perSecond = Number(paceArg ?? 0);
const HOT = "hot";
const BLOCK = 100;

/** Runs after the parent has read the server's counters (the leased row's close). */
let onBye: () => Promise<void> = async () => {};

const nowMs = () => performance.timeOrigin + performance.now();
const hr = () => process.hrtime.bigint();
const yieldLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function waitForGo(): Promise<number> {
  return new Promise((resolve) => {
    process.once("message", (message: { go: number }) => resolve(message.go));
    process.send?.({ ready: true });
  });
}

async function untilStart(startMs: number): Promise<void> {
  const wait = startMs - nowMs();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

type SyncCheck = (key: string) => boolean;
type AsyncCheck = (key: string) => Promise<boolean>;

async function runSync(check: SyncCheck, startMs: number): Promise<GlobalWorkerResult> {
  const ref = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond }));
  const lat = new Histogram();
  const refLat = new Histogram();
  let checks = 0;
  let admitted = 0;
  let sink = 0;
  await untilStart(startMs);
  const begin = nowMs();
  const end = startMs + durationMs;
  while (nowMs() < end) {
    for (let i = 0; i < BLOCK; i++) {
      const t0 = hr();
      const ok = check(HOT);
      const t1 = hr();
      sink += ref.consume(HOT).remaining;
      const t2 = hr();
      lat.add(Number(t1 - t0));
      refLat.add(Number(t2 - t1));
      if (ok) admitted++;
    }
    checks += BLOCK;
    await yieldLoop();
  }
  const finish = nowMs();
  if (sink < 0) console.error("unreachable");
  return {
    checks,
    admitted,
    startMs: begin,
    endMs: finish,
    p50Ns: lat.quantile(0.5),
    p99Ns: lat.quantile(0.99),
    refP50Ns: refLat.quantile(0.5),
    refP99Ns: refLat.quantile(0.99),
  };
}

/** `perSecond` checks a second, at a steady pace (whatever is due every millisecond). */
async function runPaced(check: SyncCheck, startMs: number): Promise<GlobalWorkerResult> {
  const lat = new Histogram();
  let checks = 0;
  let admitted = 0;
  await untilStart(startMs);
  const begin = nowMs();
  const end = startMs + durationMs;
  for (let now = nowMs(); now < end; now = nowMs()) {
    const due = Math.floor(((now - begin) * perSecond) / 1000);
    while (checks < due) {
      const t0 = hr();
      const ok = check(HOT);
      lat.add(Number(hr() - t0));
      checks++;
      if (ok) admitted++;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return {
    checks,
    admitted,
    startMs: begin,
    endMs: nowMs(),
    p50Ns: lat.quantile(0.5),
    p99Ns: lat.quantile(0.99),
  };
}

async function runAsync(check: AsyncCheck, startMs: number): Promise<GlobalWorkerResult> {
  const lat = new Histogram();
  let checks = 0;
  let admitted = 0;
  await untilStart(startMs);
  const begin = nowMs();
  const end = startMs + durationMs;
  while (nowMs() < end) {
    const t0 = hr();
    const ok = await check(HOT);
    lat.add(Number(hr() - t0));
    checks++;
    if (ok) admitted++;
  }
  return {
    checks,
    admitted,
    startMs: begin,
    endMs: nowMs(),
    p50Ns: lat.quantile(0.5),
    p99Ns: lat.quantile(0.99),
  };
}

async function main(): Promise<GlobalWorkerResult> {
  if (row === "keyed") {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond }));
    for (let i = 0; i < 50_000; i++) keyed.allow(`warm:${i % 10}`);
    return runSync((k) => keyed.allow(k), await waitForGo());
  }
  const redis = new Redis(url as string, { lazyConnect: true });
  await redis.connect();
  try {
    if (row === "leased" || row === "leased-paced") {
      const leased = new LeasedTokenBucket({
        client: fromIoredis(redis),
        prefix,
        capacity,
        refillPerSecond,
        initialCredit: 0,
      });
      for (let i = 0; i < 200; i++) {
        for (let j = 0; j < BLOCK; j++) leased.allow(`warm:${process.pid}`);
        await yieldLoop();
      }
      const before = leased.stats;
      const check: SyncCheck = (k) => leased.allow(k);
      const go = await waitForGo();
      const result = row === "leased" ? await runSync(check, go) : await runPaced(check, go);
      const after = leased.stats;
      // Counted before close(): its give-back is not part of the steady state.
      const leaseCalls = after.exchanges - before.exchanges + after.heartbeats - before.heartbeats;
      onBye = () => leased.close();
      return {
        ...result,
        leaseCalls,
        tokensTaken: after.tokensTaken - before.tokensTaken,
        tokensGivenBack: after.tokensGivenBack - before.tokensGivenBack,
      };
    }
    if (row === "redis") {
      const limiter = new RedisTokenBucket({
        client: fromIoredis(redis),
        prefix,
        capacity,
        refillPerSecond,
      });
      for (let i = 0; i < 200; i++) await limiter.consume(`warm:${process.pid}`);
      return await runAsync(async (k) => (await limiter.consume(k)).allowed, await waitForGo());
    }
    if (row === "rlf") {
      // A fixed window of refillPerSecond points per second: rate-limiter-flexible has no
      // token bucket on Redis. Its bound over T seconds is points x windows touched.
      const limiter = new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: `${prefix}rlf`,
        points: refillPerSecond,
        duration: 1,
      });
      for (let i = 0; i < 200; i++) await limiter.consume(`warm:${process.pid}`).catch(() => {});
      return await runAsync(
        (k) =>
          limiter.consume(k).then(
            () => true,
            (reason: unknown) => {
              if (reason instanceof Error) throw reason;
              return false;
            },
          ),
        await waitForGo(),
      );
    }
    throw new Error(`global-worker: unknown row ${row}`);
  } catch (error) {
    redis.disconnect();
    throw error;
  }
}

try {
  const result = await main();
  process.once("message", async () => {
    await onBye();
    process.exit(0);
  });
  process.send?.({ result });
} catch (error) {
  console.error(error);
  process.exit(1);
}
