/**
 * How a flood of new keys treats innocent new keys under `whenFull: "evict"`: a registry
 * full of keys in use, then a flood of fresh keys within one second, each taking one unit
 * (`--use=one`) or its whole limit (`--use=all`), with one innocent one-request key after
 * every ten flood keys. Prints, per policy and flood size, the share of innocent keys denied
 * (a policy without a bound would allow every one), the share of new keys that started from
 * a trace entry (`stats.restored`), and the cost per new key. docs/keyed.md#the-trace-table
 * quotes a run.
 *
 * Run: `npx tsx bench/flood.ts [--max-keys=1000000] [--floods=1,3] [--use=one|all]`.
 * @module
 */

import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import type { Limiter } from "../src/core/limiter.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const maxKeys = Number(arg("max-keys", "1000000"));
const floods = arg("floods", "1,3").split(",").map(Number);
const useAll = arg("use", "one") === "all";

let t = 1_000_000;
const clock = () => t;
const LIMIT = 10;
const HOUR = 3_600_000;
const policies: Record<string, () => Limiter & { clone(): Limiter }> = {
  TokenBucket: () => new TokenBucket({ capacity: LIMIT, refillPerSecond: 1, clock }),
  FixedWindow: () => new FixedWindow({ limit: LIMIT, windowMs: HOUR, clock }),
  SlidingWindowCounter: () => new SlidingWindowCounter({ limit: LIMIT, windowMs: HOUR, clock }),
  SlidingWindowLog: () => new SlidingWindowLog({ limit: LIMIT, windowMs: HOUR, clock }),
  "allOf(TokenBucket, FixedWindow)": () =>
    allOf(
      new TokenBucket({ capacity: LIMIT, refillPerSecond: 1, clock }),
      new FixedWindow({ limit: LIMIT, windowMs: HOUR, clock }),
    ),
};

console.log(
  `maxKeys ${maxKeys}, flood keys take ${useAll ? "their whole limit" : "one unit"} (of ${LIMIT})`,
);
console.log("policy | flood | innocent denied | started from a trace | µs per new key");
for (const [name, make] of Object.entries(policies)) {
  for (const times of floods) {
    t = 1_000_000;
    const keyed = new KeyedLimiter(make(), { maxKeys, sweepIntervalMs: Number.POSITIVE_INFINITY });
    for (let i = 0; i < maxKeys; i++) keyed.allow(`in-use-${i}`);
    const restoredBefore = keyed.stats.restored;
    const n = times * maxKeys;
    const step = 1000 / (n * 1.1); // the whole flood within one second
    let innocent = 0;
    let denied = 0;
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      t += step;
      keyed.consume(`flood-${i}`, useAll ? LIMIT : 1);
      if (i % 10 === 9) {
        t += step;
        innocent++;
        if (!keyed.allow(`innocent-${i}`)) denied++;
      }
    }
    const perKeyUs = (1000 * (performance.now() - started)) / (n + innocent);
    const restored = (keyed.stats.restored - restoredBefore) / (n + innocent);
    console.log(
      `${name} | ${times}x | ${((100 * denied) / innocent).toFixed(1)}% | ${(100 * restored).toFixed(1)}% | ${perKeyUs.toFixed(2)}`,
    );
  }
}
