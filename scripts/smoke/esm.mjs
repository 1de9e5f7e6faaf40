// Imports the built package by its own name (through package.json "exports") as ESM
// and checks a decision. Run under Node, Bun and Deno by scripts/smoke/run.mjs.
import * as tollgate from "tollgate";

const { TokenBucket, RateLimitError } = tollgate;
let now = 0;
const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock: () => now });
const results = [bucket.allow(), bucket.allow(), bucket.allow()];
now = 1000;
const d = bucket.consume();
if (results.join() !== "true,true,false" || !d.allowed || d.remaining !== 0) {
  throw new Error(`ESM smoke: unexpected decisions ${results.join()} ${JSON.stringify(d)}`);
}
if (typeof RateLimitError !== "function") throw new Error("ESM smoke: RateLimitError missing");
console.log(`esm ok: ${Object.keys(tollgate).length} exports`);
