// One limit shared by two app instances through Redis: instance A talks through ioredis,
// instance B through node-redis, and both draw from the same bucket of 5 per user,
// decided atomically in Redis on Redis's clock. Then a refund, a block seen by both
// instances, and a limit changed live. Reads REDIS_URL (default redis://127.0.0.1:6379).
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

// A request that turned out cheaper gives units back: in Redis, for both instances.
await instanceA.refund("user:42", 2);
console.log(`after a refund of 2: remaining=${(await instanceB.peek("user:42", 0)).remaining}`);

// A ban after abuse, set by A and enforced by B (the block lives in the key's value).
await instanceA.block("user:42", 60_000);
const banned = await instanceB.consume("user:42");
console.log(
  `blocked: allowed=${banned.allowed} retry after ${Math.ceil(banned.retryAfterMs / 1000)} s`,
);
await instanceA.reset("user:42"); // lifts the block and forgets the usage

// A limit changed live, keeping every key's state (each process reconfigures its own limiter).
await instanceA.consume("user:42", 3);
instanceA.reconfigure({ capacity: 10 });
instanceB.reconfigure({ capacity: 10 });
const raised = await instanceB.peek("user:42", 0);
console.log(`after reconfigure: limit=${raised.limit} remaining=${raised.remaining}`);
// after a refund of 2: remaining=2; blocked: allowed=false retry after 60 s;
// after reconfigure: limit=10 remaining=2 (the 2 tokens left are kept, then refill to 10)

await instanceA.reset("user:42");
ioredis.disconnect();
await nodeRedis.quit();
