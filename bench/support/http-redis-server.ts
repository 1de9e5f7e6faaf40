/**
 * Child process of the HTTP section's Redis rows: the same node:http "hello" server as
 * bench/http.bench.ts, with `tollgate/http`'s `rateLimit` in front of a `RedisTokenBucket`
 * (one round trip to Redis per request) or, with `leased`, a `LeasedTokenBucket` (decisions
 * in process from leases of the shared bucket), or, with `memory`, the in-process
 * `KeyedLimiter(TokenBucket)` beside a connected ioredis client it never uses (what the
 * leased row's process holds besides its limiter: the reference that tells the limiter's
 * cost from the client's), or, with `none`, no limiter beside such a client (the baseline
 * of both); every request allowed. Started as
 * `node --import tsx bench/support/http-redis-server.ts <redis-url> [redis|leased|memory|none]`;
 * reports its port over IPC.
 * @module
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { rateLimit } from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { fromIoredis, LeasedTokenBucket, RedisTokenBucket } from "../../src/redis/index.js";
import { STEADY_BUCKET, VARYING_BUCKET } from "./http-buckets.js";

const url = process.argv[2];
const kind = process.argv[3] ?? "redis";
if (url === undefined || !["redis", "leased", "memory", "none"].includes(kind)) {
  throw new Error("usage: http-redis-server.ts <redis-url> [redis|leased|memory|none]");
}
const redis = new Redis(url);
const options = {
  client: fromIoredis(redis),
  prefix: `tollgate-http-bench:${process.pid}:`,
  // An in-process row's numbers (bench/http.bench.ts), so the rows compare alike: the
  // Redis row the `memory` row's; the leased row the `memory-varying` row's, whose
  // remaining changes per request as a lease's does (the same header shape).
  ...(kind === "leased" ? VARYING_BUCKET : STEADY_BUCKET),
};
const limiter =
  kind === "leased"
    ? new LeasedTokenBucket(options)
    : kind === "memory"
      ? new KeyedLimiter(new TokenBucket(VARYING_BUCKET))
      : kind === "redis"
        ? new RedisTokenBucket(options)
        : undefined;
const hello = (res: ServerResponse) => {
  res.setHeader("Content-Type", "text/plain");
  res.end("hello\n");
};
const limit = limiter === undefined ? undefined : rateLimit({ limiter, windowSeconds: 60 });
const server = createServer((req, res) => {
  if (limit === undefined) hello(res);
  else limit(req, res, () => hello(res));
});
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
