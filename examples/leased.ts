// One global limit at in-process speed: two LeasedTokenBucket instances (standing for two
// processes, each with its own Redis connection) share one bucket of 20 per key in Redis,
// refilled at 10 per second. Each decides synchronously from a lease of tokens taken from
// that bucket in the background, so together they admit what one shared bucket would.
// Reads REDIS_URL (default redis://127.0.0.1:6379).
import { Redis } from "ioredis";
import { fromIoredis, LeasedTokenBucket } from "tollgate/redis";

const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
const connections = [new Redis(url), new Redis(url)];
const prefix = `example:leased:${Date.now()}:`; // the same in every process of the service
const limiters = connections.map(
  (redis) =>
    new LeasedTokenBucket({
      client: fromIoredis(redis),
      prefix,
      capacity: 20,
      refillPerSecond: 10,
      initialCredit: 0, // deny a new key until its first lease: never above the shared bucket
      timeoutMs: 200,
    }),
);

// 40 requests from one client, alternating between the two processes, 5 ms apart: no await
// on the decision itself, only the pause between requests (when leases arrive).
const sources: Record<string, number> = {};
let allowed = 0;
for (let i = 0; i < 40; i++) {
  const decision = limiters[i % 2]!.consume("user:42"); // synchronous
  if (decision.allowed) allowed++;
  const label = `${decision.source}:${decision.allowed ? "allowed" : "denied"}`;
  sources[label] = (sources[label] ?? 0) + 1;
  await new Promise((resolve) => setTimeout(resolve, 5));
}
console.log(`allowed ${allowed} of 40 (the shared bucket holds 20, plus 10/s over ~0.2 s)`);
console.log("decisions by source:", sources);
console.log("lease calls of the first process:", limiters[0]!.stats.exchanges);

// close() gives unused tokens back to the shared bucket.
await Promise.all(limiters.map((limiter) => limiter.close()));
for (const redis of connections) redis.disconnect();
if (allowed > 20 + 10 * 1) throw new Error("more than the shared bucket allows");
