/**
 * Fixes the seed of every `KeyedLimiter`'s hash (random per registry in production, so no
 * client can choose keys that collide): which keys share a trace entry is then the same in
 * every run, and a test that depends on it cannot pass or fail by chance. Registries made
 * in a file get the seeds of one seeded sequence, in order. Explore other seeds with
 * `TOLLGATE_HASH_SEED=<n> npx vitest run` (or `=random`, which prints the seed it drew).
 */

import { jitterSource } from "../../src/core/wait.js";
import { hashSeeds } from "../../src/keyed/engine.js";

const env = process.env.TOLLGATE_HASH_SEED;
let seed = env === undefined || env === "" ? 20_261_201 : Number(env);
if (env === "random") {
  seed = Math.floor(Math.random() * 2 ** 32);
  console.log(`TOLLGATE_HASH_SEED=${seed}`);
} else if (!Number.isInteger(seed)) {
  throw new RangeError(`TOLLGATE_HASH_SEED must be an integer or "random", got ${env}`);
}

// mulberry32: each registry's seed from the one above.
let state = seed >>> 0;
hashSeeds.next = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (t ^ (t >>> 14)) >>> 0;
};

/**
 * Fixes the draws of `wait`'s jitter (random in production) the same way: a second seeded
 * sequence, from the same seed. A test that needs given draws sets `jitterSource.next`.
 */
let jitterState = (seed ^ 0x9e3779b9) >>> 0;
jitterSource.next = () => {
  jitterState = (jitterState + 0x6d2b79f5) >>> 0;
  let t = jitterState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
};
