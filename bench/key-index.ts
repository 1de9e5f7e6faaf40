/**
 * How the keyed fast path's own key index holds up against keys chosen to collide: a
 * `KeyedLimiter(TokenBucket)` filled with `--keys` keys (half of them honest, then a flood),
 * timed on lookups of the flood's keys and of the honest ones, for three floods:
 * - random keys: what anyone who does not know the registry's hash key can do at best;
 * - keys chosen against the hash key, read from the registry (someone who knows it), each
 *   chosen against the key in use when it is made, so a rebuild under a new key does not
 *   escape them (the worst case: every future key known too);
 * - and a bare `Map<string, number>` of the same random keys, for comparison.
 * Prints ns per lookup (CPU time, median of 5 rounds with min–max), the longest probe run and
 * the keys in the overflow map. docs/benchmarks.md#the-key-index quotes a run.
 *
 * Run: `npx tsx bench/key-index.ts [--keys=20000]`.
 * @module
 */
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import type { SlabEngine } from "../src/keyed/engine.js";
import { hashKey, tableEntriesFor } from "../src/keyed/key-index.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const n = Number(arg("keys", "20000"));
const ROUNDS = 5;
const LOOKUPS = 200_000;
let sink = 0;

/** CPU nanoseconds per call of `check` over `keys` (cycled), median and range of ROUNDS. */
function timeLookups(keys: readonly string[], check: (key: string) => unknown): string {
  const runs: number[] = [];
  for (let r = 0; r <= ROUNDS; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < LOOKUPS; i++) if (check(keys[i % keys.length]!) !== false) sink++;
    const used = process.cpuUsage(start);
    if (r > 0) runs.push(((used.user + used.system) * 1000) / LOOKUPS); // round 0 warms up
  }
  runs.sort((a, b) => a - b);
  const median = runs[runs.length >> 1]!;
  return `${median.toFixed(0)} ns (${runs[0]!.toFixed(0)}–${runs.at(-1)!.toFixed(0)})`;
}

function registry(): { keyed: KeyedLimiter; engine: SlabEngine } {
  const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1e12, refillPerSecond: 0.001 }), {
    maxKeys: n,
    sweepIntervalMs: Number.POSITIVE_INFINITY,
  });
  return { keyed, engine: (keyed as unknown as { engine: SlabEngine }).engine };
}

const honest = Array.from({ length: n / 2 }, (_, i) => `user-${i}`);
console.log(`${n} keys (${n / 2} honest, then ${n / 2} flood keys); ns per allow (CPU time)`);
console.log("flood | flood keys | honest keys | longest run | in overflow map | rebuilds");

for (const flood of ["random keys", "chosen against the known hash key"]) {
  const { keyed, engine } = registry();
  for (const key of honest) keyed.allow(key);
  const chosen: string[] = [];
  const entries = tableEntriesFor(n);
  let candidate = 0;
  while (chosen.length < n / 2) {
    const key = `flood-${candidate++}`;
    if (flood !== "random keys") {
      // Homes within one run of 64 entries, under the index's key now.
      const home = hashKey(key, engine.index.k0, engine.index.k1) & (entries - 1);
      if (home >= 64) continue;
    }
    chosen.push(key);
    keyed.allow(key);
  }
  const stats = engine.index.probeStats();
  console.log(
    `${flood} | ${timeLookups(chosen, (k) => keyed.allow(k))} | ${timeLookups(honest, (k) => keyed.allow(k))} | ${stats.longest} | ${stats.overflow} | ${engine.index.reseeds}`,
  );
}

// A Map of the same random keys, for comparison.
const map = new Map<string, number>();
for (const [i, key] of honest.entries()) map.set(key, i);
const flooded = Array.from({ length: n / 2 }, (_, i) => `flood-${i}`);
for (const [i, key] of flooded.entries()) map.set(key, i);
console.log(
  `Map.get, random keys | ${timeLookups(flooded, (k) => map.get(k))} | ${timeLookups(honest, (k) => map.get(k))} | | |`,
);
if (sink === 0) console.log("");
