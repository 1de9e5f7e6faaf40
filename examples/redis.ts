// One limit shared by two app instances through Redis: instance A talks through ioredis,
// instance B through node-redis, and both draw from the same bucket of 5 per user,
// decided atomically in Redis on Redis's clock. Reads REDIS_URL (default
// redis://127.0.0.1:6379).
import { Redis } from "ioredis";
import { createClient } from "redis";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { fromIoredis, fromNodeRedis, RedisTokenBucket } from "tollgate/redis";

const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
const ioredis = new Redis(url, { lazyConnect: true });
await ioredis.connect();
const nodeRedis = createClient({ url });
await nodeRedis.connect();

const shared = { capacity: 5, refillPerSecond: 1, prefix: `example:${process.pid}:` };

// Instance A: if Redis fails or takes over 200 ms, decide locally with half the limit
// (two instances), and say so.
const instanceA = new RedisTokenBucket({
  ...shared,
  client: fromIoredis(ioredis),
  timeoutMs: 200,
  failure: new KeyedLimiter(new TokenBucket({ capacity: 2.5, refillPerSecond: 0.5 })),
  onError: ({ error, outcome }) =>
    console.warn(`redis down, answered by ${outcome}:`, error.message),
});
// Instance B: fail closed.
const instanceB = new RedisTokenBucket({
  ...shared,
  client: fromNodeRedis(nodeRedis),
  failure: "closed",
});

for (let i = 0; i < 7; i++) {
  const instance = i % 2 === 0 ? instanceA : instanceB;
  const d = await instance.consume("user:42");
  console.log(
    `request ${i} via ${i % 2 === 0 ? "A" : "B"}: allowed=${d.allowed} remaining=${d.remaining} source=${d.source}`,
  );
}
// 5 pass, the 6th and 7th are denied: the two instances share one bucket.
const denied = await instanceB.peek("user:42");
console.log(`retry after ${Math.ceil(denied.retryAfterMs / 1000)} s`);

await instanceA.reset("user:42");
ioredis.disconnect();
await nodeRedis.quit();
