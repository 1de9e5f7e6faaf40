/**
 * Sections 1 and 2 of `npm run bench`: the floors (a bare `performance.now()`, `Map.get` on
 * 100k keys, the naive `Map` token bucket that is the reference row) and the per-check cost
 * of each of the five algorithms: a single limiter's `allow()`/`consume()`, and
 * `KeyedLimiter.allow(key)` with one hot key, 100k and 1M keys in random order.
 *
 * Each group runs in a fresh child process (see bench/support/worker.ts), so one
 * algorithm's classes never make another's call sites polymorphic.
 *
 * Policies are chosen so the measured path is the common one, an allowed check on a key
 * that already has state: capacities/limits of 1e12 that are never reached, and rates or
 * windows so slow that no key becomes idle (and is dropped and recreated) during the run.
 * The exception is `SlidingWindowLog`, which keeps one entry per allowed request: its limit
 * is 1000, so with one hot key all calls after the first 1000 are denials (the report says so).
 * @module
 */

import { allOf } from "../src/composite/all-of.js";
import { coarseClock } from "../src/core/coarse-clock.js";
import {
  FixedWindow,
  LeakyBucket,
  type Limiter,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import { KeyedLimiter, type KeyedLimiterStats } from "../src/keyed/keyed-limiter.js";
import {
  accessSequence,
  type KeyPattern,
  keyOf,
  keyPatterns,
  newKeyBound,
  SEQUENCE_LENGTH,
} from "./support/keys.js";
import { BATCH, type TimedTask } from "./support/measure.js";
import { NaiveTokenBuckets } from "./support/naive.js";

/** Keeps results observable so the JIT cannot drop the work. */
export const sink = { value: 0 };
const MASK = SEQUENCE_LENGTH - 1;

/**
 * The five algorithms with the options every benchmark copy uses, and whether a hot key
 * is denied (only the log, see the module comment).
 */
export const ALGORITHMS = [
  {
    name: "TokenBucket",
    make: () => new TokenBucket({ capacity: 1e12, refillPerSecond: 1e-3 }),
    deniesHot: false,
  },
  {
    name: "LeakyBucket",
    make: () => new LeakyBucket({ capacity: 1e12, leakPerSecond: 1e-3 }),
    deniesHot: false,
  },
  {
    name: "FixedWindow",
    make: () => new FixedWindow({ limit: 1e12, windowMs: 1e9 }),
    deniesHot: false,
  },
  {
    name: "SlidingWindowLog",
    make: () => new SlidingWindowLog({ limit: 1000, windowMs: 1e9 }),
    deniesHot: true,
  },
  {
    name: "SlidingWindowCounter",
    make: () => new SlidingWindowCounter({ limit: 1e12, windowMs: 1e9 }),
    deniesHot: false,
  },
] as const;

/** Name of one of the five algorithms. */
export type AlgorithmName = (typeof ALGORITHMS)[number]["name"];

/** A new limiter of algorithm `name` with its benchmark options. */
export function makeLimiter(name: AlgorithmName): Limiter & { clone(): Limiter } {
  return ALGORITHMS.find((a) => a.name === name)!.make();
}

/** A `KeyedLimiter` whose policy copies `makeLimiter(name)`, sized for `keys` keys. */
export function makeKeyed(name: AlgorithmName, keys: number, viaFunction = false): KeyedLimiter {
  const template = makeLimiter(name);
  const policy = viaFunction ? () => template.clone() : template;
  return new KeyedLimiter(policy, { maxKeys: Math.max(keys, 1), maxBytes: BENCH_MAX_BYTES });
}

/**
 * The rows measure checks of kept keys, so the byte bound must not drop any: 4 GiB (a
 * million logs, or a million limiter objects on the generic path, pass the default 256 MiB).
 */
const BENCH_MAX_BYTES = 2 ** 32;

/** A `KeyedLimiter` of `allOf` two copies of `makeLimiter(name)`, sized for `keys` keys. */
export function makeKeyedAllOf(name: AlgorithmName, keys: number): KeyedLimiter {
  // Two limits on every key, as "10/s and 1000/hour" would be.
  return new KeyedLimiter(allOf(makeLimiter(name), makeLimiter(name)), {
    maxKeys: Math.max(keys, 1),
    maxBytes: BENCH_MAX_BYTES,
  });
}

/** A note when `denied` of `total` calls were denied although all should be allowed. */
function deniedNote(denied: number, total: number): string | undefined {
  return denied === 0 ? undefined : `${denied} of ${total} calls were denied`;
}

// ---------------------------------------------------------------------------------------
// Section 1: floors and the naive reference.

function nowTask(): TimedTask {
  return {
    id: "floor.performance-now",
    name: "performance.now()",
    prepare: () => ({
      run: () => {
        let s = 0;
        for (let i = 0; i < BATCH; i++) s += performance.now();
        sink.value += s;
      },
    }),
  };
}

function dateNowTask(): TimedTask {
  return {
    id: "floor.date-now",
    name: "Date.now() (the clock of three peers)",
    prepare: () => ({
      run: () => {
        let s = 0;
        for (let i = 0; i < BATCH; i++) s += Date.now();
        sink.value += s;
      },
    }),
  };
}

function mapGetTask(pattern: KeyPattern): TimedTask {
  return {
    id: `floor.map-get.${pattern.id}`,
    name: `Map.get, ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = accessSequence(pattern);
      const map = new Map<string, number>();
      for (const [i, key] of keys.entries()) map.set(key, i);
      let at = 0;
      return {
        run: () => {
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            s += map.get(seq[at]!)!;
            at = (at + 1) & MASK;
          }
          sink.value += s;
        },
      };
    },
  };
}

function naiveTask(pattern: KeyPattern): TimedTask {
  return {
    id: `naive.${pattern.id}`,
    name: `naive Map token bucket, ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = accessSequence(pattern);
      const naive = new NaiveTokenBuckets(1e12, 1e-3);
      for (const key of keys) naive.allow(key);
      let at = 0;
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          for (let i = 0; i < BATCH; i++) {
            if (naive.allow(seq[at]!)) n++;
            at = (at + 1) & MASK;
          }
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => deniedNote(denied, total),
      };
    },
  };
}

/**
 * Section 1: Date.now() and the naive map. The reference rows of the keyed targets (a bare
 * `performance.now()`, `Map.get` on the two key spaces) are timed in the TokenBucket group,
 * each right before the row it is the reference of, in the same process (see
 * {@link algorithmTasks}); the report shows them here.
 */
export function floorTasks(quick: boolean): TimedTask[] {
  const patterns = keyPatterns(quick);
  return [dateNowTask(), ...patterns.map((p) => naiveTask(p))];
}

// ---------------------------------------------------------------------------------------
// Section 2: the five algorithms.

function singleAllowTask(name: AlgorithmName, denies: boolean): TimedTask {
  return {
    id: `${name}.single.allow`,
    name: `${name}.allow()`,
    prepare: () => {
      const limiter = makeLimiter(name);
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          for (let i = 0; i < BATCH; i++) if (limiter.allow()) n++;
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => (denies ? undefined : deniedNote(denied, total)),
      };
    },
  };
}

function singleConsumeTask(name: AlgorithmName, denies: boolean): TimedTask {
  return {
    id: `${name}.single.consume`,
    name: `${name}.consume()`,
    prepare: () => {
      const limiter = makeLimiter(name);
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            const d = limiter.consume();
            if (d.allowed) n++;
            s += d.remaining;
          }
          sink.value += s;
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => (denies ? undefined : deniedNote(denied, total)),
      };
    },
  };
}

/** How a keyed task's registry is built: the policy kind and its label. */
type KeyedPath = "keyed" | "fn" | "allOf";

function keyedFor(path: KeyedPath, name: AlgorithmName, keys: number): KeyedLimiter {
  if (path === "allOf") return makeKeyedAllOf(name, keys);
  return makeKeyed(name, keys, path === "fn");
}

function keyedLabel(path: KeyedPath, name: AlgorithmName): string {
  if (path === "fn") return `KeyedLimiter((key) => new ${name})`;
  if (path === "allOf") return `KeyedLimiter(allOf(${name}, ${name}))`;
  return `KeyedLimiter(${name})`;
}

function keyedAllowTask(
  name: AlgorithmName,
  pattern: KeyPattern,
  denies: boolean,
  path: KeyedPath,
): TimedTask {
  return {
    id: `${name}.${path}.allow.${pattern.id}`,
    name: `${keyedLabel(path, name)}.allow(key), ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = accessSequence(pattern);
      const keyed = keyedFor(path, name, keys.length);
      for (const key of keys) keyed.allow(key);
      let at = 0;
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          for (let i = 0; i < BATCH; i++) {
            if (keyed.allow(seq[at]!)) n++;
            at = (at + 1) & MASK;
          }
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => {
          if (keyed.size !== keys.length) {
            return `size is ${keyed.size}, expected ${keys.length}: keys were dropped and recreated`;
          }
          return denies ? undefined : deniedNote(denied, total);
        },
      };
    },
  };
}

function keyedConsumeTask(name: AlgorithmName, pattern: KeyPattern, denies: boolean): TimedTask {
  return {
    id: `${name}.keyed.consume.${pattern.id}`,
    name: `KeyedLimiter(${name}).consume(key), ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = accessSequence(pattern);
      const keyed = makeKeyed(name, keys.length);
      for (const key of keys) keyed.consume(key);
      let at = 0;
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            const d = keyed.consume(seq[at]!);
            if (d.allowed) n++;
            s += d.remaining;
            at = (at + 1) & MASK;
          }
          sink.value += s;
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => (denies ? undefined : deniedNote(denied, total)),
      };
    },
  };
}

/** Fresh keys one new-key task cycles through (a power of two: the cursor wraps with a mask). */
const FRESH_KEYS = 1 << 20;

/**
 * A new key at the bound: a registry of `maxKeys` keys, each checked once so none is idle
 * (every policy of this file keeps a used key in use for the whole run), then timed calls
 * of `allow(key)` on keys it has never seen, so each one creates a key and evicts one in
 * use (the lossy case, the worst a flood of new clients can force). The fresh keys are
 * built before timing and cycle after `FRESH_KEYS`, ten times the bound, by when the
 * registry has long dropped them; the check counts creations to confirm every call was new.
 */
export function newKeyTask(
  id: string,
  label: string,
  make: (maxKeys: number) => KeyedLimiter,
  quick: boolean,
): TimedTask {
  const maxKeys = newKeyBound(quick);
  return {
    id,
    name: `${label}.allow(new key), full at maxKeys ${maxKeys}`,
    prepare: () => {
      const keyed = make(maxKeys);
      for (let i = 0; i < maxKeys; i++) keyed.allow(keyOf(i));
      const fresh: string[] = [];
      for (let i = 0; i < FRESH_KEYS; i++) fresh.push(keyOf(maxKeys + i));
      const before = { ...keyed.stats }; // a copy, whatever the getter returns
      let at = 0;
      let calls = 0;
      let denied = 0;
      const mask = FRESH_KEYS - 1;
      return {
        run: () => {
          let n = 0;
          for (let i = 0; i < BATCH; i++) {
            if (keyed.allow(fresh[at]!)) n++;
            at = (at + 1) & mask;
          }
          calls += BATCH;
          denied += BATCH - n;
        },
        check: () => newKeyNote(before, keyed.stats, calls, denied, keyed.size, maxKeys),
      };
    },
  };
}

/**
 * What a new-key task saw that is not the intended path (every call creates a key and
 * evicts one in use, and is allowed), or undefined: keys found kept, new keys refused at
 * the bound, new keys restored from the trace of an evicted key, idle evictions, denials.
 */
export function newKeyNote(
  before: KeyedLimiterStats,
  after: KeyedLimiterStats,
  calls: number,
  denied: number,
  size: number,
  maxKeys: number,
): string | undefined {
  const refused = after.refused - before.refused;
  const restored = after.restored - before.restored;
  const created = after.created - before.created;
  const idle = after.evictedIdle - before.evictedIdle;
  const notes = [
    refused === 0 ? "" : `${refused} of ${calls} new keys were refused (full, no room made)`,
    created + refused === calls
      ? ""
      : `${calls - created - refused} of ${calls} calls found their key kept`,
    restored === 0
      ? ""
      : `${restored} of ${calls} new keys were restored from an evicted key's trace`,
    idle === 0 ? "" : `${idle} evictions were of idle keys, not keys in use`,
    size === maxKeys ? "" : `size is ${size}, expected ${maxKeys}`,
    deniedNote(denied, calls) ?? "",
  ].filter((n) => n !== "");
  return notes.length === 0 ? undefined : notes.join("; ");
}

/** The new-key task of a keyed algorithm (`${name}.keyed.new-key`). */
function algorithmNewKeyTask(name: AlgorithmName, quick: boolean): TimedTask {
  return newKeyTask(
    `${name}.keyed.new-key`,
    `KeyedLimiter(${name})`,
    (n) => makeKeyed(name, n),
    quick,
  );
}

/**
 * Section 2 for one algorithm: single `allow()`/`consume()`, keyed `allow(key)` on the three
 * key patterns, keyed `consume(key)` on the hot key, and a new key at the bound (last, so
 * its eviction path runs after the other rows are timed).
 */
export function algorithmTasks(name: AlgorithmName, quick: boolean): TimedTask[] {
  const spec = ALGORITHMS.find((a) => a.name === name)!;
  const patterns = keyPatterns(quick);
  // The TokenBucket rows are the keyed targets' subjects: each reference row runs right
  // before its subject, in the same process and round, so a ratio never spans two
  // processes or a minute of someone else's load.
  const reference = (task: TimedTask) => (name === "TokenBucket" ? [task] : []);
  return [
    singleAllowTask(name, spec.deniesHot),
    singleConsumeTask(name, spec.deniesHot),
    ...reference(nowTask()),
    keyedAllowTask(name, patterns[0]!, spec.deniesHot, "keyed"),
    ...reference(mapGetTask(patterns[1]!)),
    keyedAllowTask(name, patterns[1]!, false, "keyed"),
    // Not a target's only use: shows how much of the large-key rows is the lookup's misses.
    ...reference(mapGetTask(patterns[2]!)),
    keyedAllowTask(name, patterns[2]!, false, "keyed"),
    keyedConsumeTask(name, patterns[0]!, spec.deniesHot),
    algorithmNewKeyTask(name, quick),
  ];
}

/**
 * The coarse clock on the hot key: `KeyedLimiter(TokenBucket)` with `coarseClock()` as its
 * clock, right after a bare `performance.now()` in the same process. A group of its own,
 * so the registry's clock call sees one clock per process (as in a service using it).
 */
export function coarseClockTasks(_quick: boolean): TimedTask[] {
  return [
    { ...nowTask(), id: "coarse.performance-now" },
    {
      id: "TokenBucket.keyed.allow.hot.coarse",
      name: "KeyedLimiter(TokenBucket with coarseClock()).allow(key), 1 hot key",
      prepare: () => {
        const clock = coarseClock();
        const keyed = new KeyedLimiter(
          new TokenBucket({ capacity: 1e12, refillPerSecond: 1e-3, clock }),
          { maxKeys: 1 },
        );
        keyed.allow(HOT_KEY);
        let denied = 0;
        let total = 0;
        return {
          run: () => {
            let n = 0;
            for (let i = 0; i < BATCH; i++) if (keyed.allow(HOT_KEY)) n++;
            denied += BATCH - n;
            total += BATCH;
          },
          check: () => deniedNote(denied, total),
        };
      },
    },
  ];
}

/** The hot key of the coarse-clock row (the key the hot pattern uses). */
const HOT_KEY = keyOf(0);

/**
 * The per-key policy function path (`(key) => new TokenBucket(...)`), which bypasses the
 * TokenBucket fast path: one limiter object per key in a Map.
 */
export function policyFunctionTasks(quick: boolean): TimedTask[] {
  return keyPatterns(quick).map((p) => keyedAllowTask("TokenBucket", p, false, "fn"));
}

/**
 * `KeyedLimiter(allOf(TokenBucket, TokenBucket))`: two limits per key, on the three
 * patterns, then a new key at the bound.
 */
export function allOfTasks(quick: boolean): TimedTask[] {
  return [
    ...keyPatterns(quick).map((p) => keyedAllowTask("TokenBucket", p, false, "allOf")),
    newKeyTask(
      "TokenBucket.allOf.new-key",
      "KeyedLimiter(allOf(TokenBucket, TokenBucket))",
      (n) => makeKeyedAllOf("TokenBucket", n),
      quick,
    ),
  ];
}

/** `KeyedLimiter(allOf(TokenBucket, FixedWindow))`, a bucket and a window: a new key at the bound. */
export function mixedAllOfTasks(quick: boolean): TimedTask[] {
  return [
    newKeyTask(
      "allOf.TokenBucket+FixedWindow.new-key",
      "KeyedLimiter(allOf(TokenBucket, FixedWindow))",
      (n) =>
        new KeyedLimiter(allOf(makeLimiter("TokenBucket"), makeLimiter("FixedWindow")), {
          maxKeys: n,
        }),
      quick,
    ),
  ];
}
