/**
 * Child process of the HTTP section's Redis row: the same node:http "hello" server as
 * bench/http.bench.ts, with `tollgate/http`'s `rateLimit` in front of a `RedisTokenBucket`
 * (one round trip to Redis per request, every request allowed). Started as
 * `node --import tsx bench/support/http-redis-server.ts <redis-url>`; reports its port over IPC.
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { rateLimit } from "../../src/http/index.js";
import { fromIoredis, RedisTokenBucket } from "../../src/redis/index.js";

const url = process.argv[2];
if (url === undefined) throw new Error("usage: http-redis-server.ts <redis-url>");
const redis = new Redis(url);
const limiter = new RedisTokenBucket({
  client: fromIoredis(redis),
  prefix: `tollgate-http-bench:${process.pid}:`,
  capacity: 1e12,
  refillPerSecond: 1e-3,
});
const limit = rateLimit({ limiter, windowSeconds: 60 });
const server = createServer((req, res) =>
  limit(req, res, () => {
    res.setHeader("Content-Type", "text/plain");
    res.end("hello\n");
  }),
);
// CPU per request, with the protocol of bench/http.bench.ts: any message asks for it.
let requests = 0;
server.on("request", () => {
  requests++;
});
process.on("message", () => {
  const cpu = process.cpuUsage();
  process.send?.({ cpuUs: cpu.user + cpu.system, requests });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
