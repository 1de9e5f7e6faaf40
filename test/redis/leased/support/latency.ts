// Measures a LeasedTokenBucket check against an in-process KeyedLimiter(TokenBucket)
// consume, in the same process and run, interleaved in blocks so both see the same
// machine: per-call p50/p99 (hrtime around each call, the same overhead for both), and
// Redis round trips per 1,000 decisions. Usage: REDIS_URL=... npx tsx <this file> [keys]
import { Redis } from "ioredis";
import { TokenBucket } from "../../../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../../../src/keyed/keyed-limiter.js";
import { fromIoredis, LeasedTokenBucket } from "../../../../src/redis/index.js";

const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
const keyCount = Number(process.argv[2] ?? 1);
const redis = new Redis(url);
const capacity = 1e9;
const leased = new LeasedTokenBucket({
  client: fromIoredis(redis),
  prefix: `latency:${Date.now()}:`,
  capacity,
  refillPerSecond: capacity,
});
const keyed = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond: capacity }));
const keys = Array.from({ length: keyCount }, (_, i) => `user:${i}`);

const BLOCK = 1000;
const BLOCKS = 300;
const a = new Float64Array(BLOCK * BLOCKS);
const b = new Float64Array(BLOCK * BLOCKS);
let sink = 0;
const warm = async () => {
  for (let i = 0; i < 50; i++) {
    for (let j = 0; j < BLOCK; j++) {
      const k = keys[j % keyCount] as string;
      sink += leased.consume(k).remaining + keyed.consume(k).remaining;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
};
await warm();
const before = leased.stats;
for (let block = 0; block < BLOCKS; block++) {
  for (let j = 0; j < BLOCK; j++) {
    const k = keys[j % keyCount] as string;
    const t0 = process.hrtime.bigint();
    sink += leased.consume(k).remaining;
    const t1 = process.hrtime.bigint();
    sink += keyed.consume(k).remaining;
    const t2 = process.hrtime.bigint();
    a[block * BLOCK + j] = Number(t1 - t0);
    b[block * BLOCK + j] = Number(t2 - t1);
  }
  // Let the background refills land, as a server's event loop would between requests.
  await new Promise((r) => setImmediate(r));
}
const after = leased.stats;
const pct = (xs: Float64Array, p: number) => {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor(s.length * p))] as number;
};
const decisions = BLOCK * BLOCKS;
const result = {
  keys: keyCount,
  leasedP50ns: pct(a, 0.5),
  leasedP99ns: pct(a, 0.99),
  keyedP50ns: pct(b, 0.5),
  keyedP99ns: pct(b, 0.99),
  p50Ratio: pct(a, 0.5) / pct(b, 0.5),
  p99Ratio: pct(a, 0.99) / pct(b, 0.99),
  roundTripsPer1000:
    ((after.exchanges - before.exchanges + after.heartbeats - before.heartbeats) / decisions) *
    1000,
  sink: sink > 0,
};
console.log(JSON.stringify(result));
await leased.close();
redis.disconnect();
