// The dual-package hazard, under Node: limiters made by the CommonJS build (a CommonJS
// config module) given to the ESM build's middleware, and the other way round. Each build
// has its own classes, so `instanceof` cannot recognise the other's; the brand can.
import { createRequire } from "node:module";
import * as esm from "tollgate";
import * as esmHttp from "tollgate/http";

const require = createRequire(import.meta.url);
const cjs = require("tollgate");
const cjsHttp = require("tollgate/http");

if (cjs.TokenBucket === esm.TokenBucket) throw new Error("dual smoke: one copy, nothing to test");

/** Statuses of `n` requests through `wrap(handler, options)` with `limiter`, and the errors. */
async function statuses(http, limiter, n) {
  const errors = [];
  const handler = http.withRateLimit(() => new Response("ok"), {
    limiter,
    remoteAddress: () => "203.0.113.9",
    onError: (error, info) => errors.push(`${info.kind}: ${error.message}`),
  });
  const seen = [];
  for (let i = 0; i < n; i++) seen.push((await handler(new Request("http://localhost/"))).status);
  if (errors.length > 0) throw new Error(`dual smoke: onError called: ${errors[0]}`);
  return seen.join(",");
}

const frozen = () => 0;
const cases = [
  ["a CJS TokenBucket into ESM withRateLimit is one global limit", esmHttp, cjs],
  ["an ESM TokenBucket into CJS withRateLimit is one global limit", cjsHttp, esm],
];
for (const [name, http, lib] of cases) {
  const bucket = new lib.TokenBucket({ capacity: 2, refillPerSecond: 1, clock: frozen });
  const got = await statuses(http, bucket, 3);
  if (got !== "200,200,429") throw new Error(`dual smoke: ${name}: got ${got}`);
}
const composite = cjs.allOf(
  new cjs.TokenBucket({ capacity: 1, refillPerSecond: 1, clock: frozen }),
  new cjs.FixedWindow({ limit: 5, windowMs: 60_000, clock: frozen }),
);
const got = await statuses(esmHttp, composite, 2);
if (got !== "200,429")
  throw new Error(`dual smoke: a CJS allOf into ESM withRateLimit: got ${got}`);

// An ESM KeyedLimiter copying a CJS TokenBucket decides as one copying an ESM one.
let now = 0;
const clock = () => now;
const mixed = new esm.KeyedLimiter(new cjs.TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
const same = new esm.KeyedLimiter(new esm.TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
for (let i = 0; i < 20; i++) {
  now += 300;
  const key = i % 3 === 0 ? "a" : "b";
  const a = JSON.stringify(mixed.consume(key, 1));
  const b = JSON.stringify(same.consume(key, 1));
  if (a !== b) throw new Error(`dual smoke: KeyedLimiter(CJS TokenBucket) step ${i}: ${a} vs ${b}`);
}
console.log("dual package ok: CJS and ESM limiters recognised by either build's middleware");
