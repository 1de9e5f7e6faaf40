// Imports the built package by its own name (through package.json "exports") as ESM
// and checks decisions on every entry point. Run under Node, Bun and Deno by
// scripts/smoke/run.mjs.
import * as tollgate from "tollgate";
import * as http from "tollgate/http";
import * as redis from "tollgate/redis";
import * as testing from "tollgate/testing";

const { TokenBucket, KeyedLimiter, RateLimitError } = tollgate;
let now = 0;
const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock: () => now });
const results = [bucket.allow(), bucket.allow(), bucket.allow()];
now = 1000;
const d = bucket.consume();
if (results.join() !== "true,true,false" || !d.allowed || d.remaining !== 0) {
  throw new Error(`ESM smoke: unexpected decisions ${results.join()} ${JSON.stringify(d)}`);
}
if (typeof RateLimitError !== "function") throw new Error("ESM smoke: RateLimitError missing");
const keyed = new KeyedLimiter(
  new TokenBucket({ capacity: 1, refillPerSecond: 1, clock: () => now }),
);
if (!keyed.allow("a") || keyed.allow("a") || !keyed.allow("b")) throw new Error("ESM smoke: keyed");
const headers = http.rateLimitHeaders(
  { allowed: false, limit: 10, remaining: 0, retryAfterMs: 1000.0000000000031, resetAfterMs: 5000 },
  { policy: "default", windowSeconds: 1 },
);
if (headers["Retry-After"] !== "1")
  throw new Error(`ESM smoke: headers ${JSON.stringify(headers)}`);
if (
  typeof redis.RedisTokenBucket !== "function" ||
  !(
    new redis.RateLimitStoreError("x", {
      cause: null,
      operation: "consume",
      timedOut: false,
    }) instanceof Error
  )
) {
  throw new Error("ESM smoke: tollgate/redis exports");
}
// The framework adapters, and an unkeyed limiter from "tollgate" recognised by
// "tollgate/http" (one global limit: the classes are shared between the entry points).
const adapters = {
  fastifyRateLimit: http.fastifyRateLimit,
  honoRateLimit: http.honoRateLimit,
  koaRateLimit: http.koaRateLimit,
  koaConcurrencyLimit: http.koaConcurrencyLimit,
  withRateLimit: http.withRateLimit,
};
for (const [name, adapter] of Object.entries(adapters)) {
  if (typeof adapter !== "function") throw new Error(`ESM smoke: http.${name} missing`);
}
if (http.fastifyRateLimit[Symbol.for("skip-override")] !== true) {
  throw new Error("ESM smoke: fastifyRateLimit is encapsulated");
}
const global = await http.withRateLimit(() => new Response("ok"), {
  limiter: new TokenBucket({ capacity: 1, refillPerSecond: 1, clock: () => now }),
})(new Request("http://localhost/"));
if (global.status !== 200 || global.headers.get("ratelimit") === null) {
  throw new Error(`ESM smoke: an unkeyed limiter as a global limit gave ${global.status}`);
}
// tollgate/testing's clock drives a bucket that starts empty.
const clock = testing.manualClock(5000);
const empty = new TokenBucket({ capacity: 2, refillPerSecond: 4, initialTokens: 0, clock });
const before = empty.allow();
clock.advance(250);
if (before || !empty.allow() || clock.nowMs !== 5250) {
  throw new Error("ESM smoke: tollgate/testing's manualClock with initialTokens");
}
console.log(
  `esm ok: ${Object.keys(tollgate).length} + ${Object.keys(http).length} + ${Object.keys(redis).length} + ${Object.keys(testing).length} exports`,
);
