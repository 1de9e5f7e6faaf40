// Requires the built package by its own name as CommonJS, checks a decision and that
// the subpaths share one copy of the core classes.
const tollgate = require("tollgate");
const http = require("tollgate/http");
const redis = require("tollgate/redis");
const testing = require("tollgate/testing");

const now = 0;
const bucket = new tollgate.TokenBucket({ capacity: 1, refillPerSecond: 2, clock: () => now });
const first = bucket.consume();
const second = bucket.consume();
if (!first.allowed || second.allowed || second.retryAfterMs !== 500) {
  throw new Error(`CJS smoke: unexpected decisions ${JSON.stringify([first, second])}`);
}
if (typeof http.rateLimit !== "function" || typeof redis.fromIoredis !== "function") {
  throw new Error("CJS smoke: subpath exports missing");
}
for (const name of ["fastifyRateLimit", "honoRateLimit", "koaRateLimit", "koaConcurrencyLimit"]) {
  if (typeof http[name] !== "function") throw new Error(`CJS smoke: http.${name} missing`);
}
// An unkeyed limiter from "tollgate" is recognised by "tollgate/http" (one shared class).
http.rateLimit({ limiter: new tollgate.TokenBucket({ capacity: 1, refillPerSecond: 1 }) });
const clock = testing.manualClock();
const empty = new tollgate.TokenBucket({
  capacity: 1,
  refillPerSecond: 1,
  initialTokens: 0,
  clock,
});
clock.advance(1000);
if (!empty.allow()) throw new Error("CJS smoke: tollgate/testing's manualClock");
console.log(
  `cjs ok: ${Object.keys(tollgate).length} + ${Object.keys(http).length} + ${Object.keys(redis).length} + ${Object.keys(testing).length} exports`,
);
