// One global limit shared by several server processes: every request, from any client, on
// any instance, draws from one Redis bucket of 10 requests, refilled at 10 per second (say,
// an upstream that takes no more). The key function returns the same key for every request.
// Two servers in this process stand for two processes; each has its own Redis connection.
// Reads REDIS_URL (default redis://127.0.0.1:6379). The demo sends 8 requests to each
// server, alternating, prints how many passed and closes everything.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { rateLimit } from "tollgate/http";
import { fromIoredis, RedisTokenBucket } from "tollgate/redis";

/** The bucket every process shares: the same options and prefix name the same Redis key. */
const bucket = { capacity: 10, refillPerSecond: 10, prefix: "example:global:" };

/** One process of the service: its own Redis connection, the same bucket and prefix. */
function createService(redis: Redis) {
  const limiter = new RedisTokenBucket({
    client: fromIoredis(redis),
    ...bucket,
    timeoutMs: 200, // a request waits at most this long for Redis
    failure: "closed", // Redis unreachable: refuse (429, Retry-After: 1), never exceed the upstream's limit
  });
  const limit = rateLimit({ limiter, policy: "global", key: () => "global" });
  const server = createServer((req, res) => limit(req, res, () => res.end("ok\n")));
  return { limiter, server, redis };
}

const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
const services = [createService(new Redis(url)), createService(new Redis(url))];
// A clean start for the demo: reset deletes the key the limiter uses for "global"
// (`<prefix><keyspace>:global`, where the keyspace is a fingerprint of the bucket's options;
// the timeout and the failure policy are not part of it). Resets are admin calls, not on a
// request's path: they go through a twin that gives a slow Redis time to answer.
const admin = new RedisTokenBucket({
  client: fromIoredis(services[0]!.redis),
  ...bucket,
  timeoutMs: 10_000,
});
await admin.reset("global");
const urls = await Promise.all(
  services.map(
    ({ server }) =>
      new Promise<string>((resolve) =>
        server.listen(0, "127.0.0.1", () => {
          resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
        }),
      ),
  ),
);

const passed = [0, 0];
for (let i = 0; i < 16; i++) {
  const response = await fetch(urls[i % 2]!);
  if (response.status === 200) passed[i % 2]!++;
  await response.arrayBuffer();
}
console.log(`instance A passed ${passed[0]}, instance B passed ${passed[1]}: about 10 together`);

await admin.reset("global");
for (const { server, redis } of services) {
  server.close();
  redis.disconnect();
}
