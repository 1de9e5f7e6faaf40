/**
 * Section 3 of `npm run bench`: the same key patterns through the in-memory stores of the
 * popular Node rate limiters, each called the way its own middleware calls it:
 *
 * - rate-limiter-flexible `RateLimiterMemory.consume(key)`: returns a promise, awaited per
 *   call (as `await limiter.consume(req.ip)` in a handler); a fixed window of `points`
 *   per `duration`, one `setTimeout` per key.
 * - limiter `TokenBucket.tryRemoveTokens(1)`, one bucket per key in a `Map` (the package has
 *   no keyed store; this is how its README suggests per-client limits).
 * - express-rate-limit `MemoryStore.increment(key)`: async, awaited per call as the
 *   middleware does; a fixed window.
 * - @fastify/rate-limit's `LocalStore.incr(key, cb, timeWindow, max)`: a fixed window in an
 *   LRU (toad-cache); timed bare (callback, synchronous: its best case) and wrapped in a
 *   promise that is awaited, as the plugin itself does.
 *
 * Every peer gets limits it never reaches during the run and windows longer than the run,
 * so each call is an allowed hit on a key that already exists, as for tollgate. The LRU of
 * @fastify/rate-limit is sized to hold every key (its default of 5000 would evict).
 * @module
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { MemoryStore, type Options } from "express-rate-limit";
import { TokenBucket as LimiterTokenBucket } from "limiter";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { accessSequence, type KeyPattern, keyPatterns, SEQUENCE_LENGTH } from "./support/keys.js";
import { BATCH, type TimedTask } from "./support/measure.js";

const MASK = SEQUENCE_LENGTH - 1;
/** A limit no benchmark reaches. */
const HUGE = 1e12;
/** A window longer than any run, below 2^31 - 1 ms so per-key timers stay valid. */
const WINDOW_MS = 1e9;

/** Keeps results observable so the JIT cannot drop the work. */
const sink = { value: 0 };

/** The result @fastify/rate-limit's store passes to its callback. */
interface LocalStoreResult {
  readonly current: number;
  readonly ttl: number;
}
type LocalStoreCallback = (error: Error | null, result: LocalStoreResult) => void;
/** @fastify/rate-limit's in-memory store (CommonJS, no type declarations of its own). */
interface LocalStore {
  incr(key: string, callback: LocalStoreCallback, timeWindow: number, max: number): void;
}
type LocalStoreClass = new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  cache: number,
) => LocalStore;

const require = createRequire(import.meta.url);
const LocalStoreCtor = require("@fastify/rate-limit/store/LocalStore.js") as LocalStoreClass;

/** How one peer is set up and called, for the memory worker (one hit per key). */
export interface PeerStore {
  /** One allowed hit on `key` (creating its state on first use). */
  hit(key: string): unknown;
  /** The object holding all state, kept alive while memory is measured. */
  readonly root: unknown;
}

/** A peer: identity, the algorithm it implements, and a factory for `keys` keys. */
export interface Peer {
  readonly id: string;
  readonly name: string;
  readonly version: string;
  /** The tollgate algorithm doing the same job, for the like-for-like ratio. */
  readonly sameAs: "TokenBucket" | "FixedWindow";
  create(keys: number): PeerStore;
}

/** The installed version of `pkg` (read from node_modules: some packages do not export it). */
function version(pkg: string): string {
  const file = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

function newRlf(): RateLimiterMemory {
  return new RateLimiterMemory({ points: HUGE, duration: WINDOW_MS / 1000 });
}

function newLimiterBucket(): LimiterTokenBucket {
  const bucket = new LimiterTokenBucket({
    bucketSize: HUGE,
    tokensPerInterval: 1,
    interval: "day",
  });
  // limiter's buckets start empty and drip in; start full like the other limiters.
  bucket.content = HUGE;
  return bucket;
}

function newExpressStore(): MemoryStore {
  const store = new MemoryStore();
  store.init({ windowMs: WINDOW_MS } as Options);
  return store;
}

function newLocalStore(keys: number): LocalStore {
  return new LocalStoreCtor(false, false, Math.max(keys, 1) + 1);
}

/** The peers, in report order. */
export const PEERS: readonly Peer[] = [
  {
    id: "rlf",
    name: "rate-limiter-flexible RateLimiterMemory.consume",
    version: version("rate-limiter-flexible"),
    sameAs: "FixedWindow",
    create: () => {
      const rl = newRlf();
      return { root: rl, hit: (key) => rl.consume(key) };
    },
  },
  {
    id: "limiter",
    name: "limiter TokenBucket.tryRemoveTokens (Map per key)",
    version: version("limiter"),
    sameAs: "TokenBucket",
    create: () => {
      const map = new Map<string, LimiterTokenBucket>();
      return {
        root: map,
        hit: (key) => {
          let bucket = map.get(key);
          if (bucket === undefined) map.set(key, (bucket = newLimiterBucket()));
          return bucket.tryRemoveTokens(1);
        },
      };
    },
  },
  {
    id: "express",
    name: "express-rate-limit MemoryStore.increment",
    version: version("express-rate-limit"),
    sameAs: "FixedWindow",
    create: () => {
      const store = newExpressStore();
      return { root: store, hit: (key) => store.increment(key) };
    },
  },
  {
    id: "fastify",
    name: "@fastify/rate-limit LocalStore.incr",
    version: version("@fastify/rate-limit"),
    sameAs: "FixedWindow",
    create: (keys) => {
      const store = newLocalStore(keys);
      const callback: LocalStoreCallback = () => {};
      return { root: store, hit: (key) => store.incr(key, callback, WINDOW_MS, HUGE) };
    },
  },
];

/** State every peer task keeps: keys, the access sequence, and its cursor. */
function prepared(pattern: KeyPattern): { keys: string[]; seq: string[] } {
  return accessSequence(pattern);
}

function rlfTask(pattern: KeyPattern): TimedTask {
  return {
    id: `peer.rlf.${pattern.id}`,
    name: `rate-limiter-flexible consume (awaited), ${pattern.label}`,
    prepare: async () => {
      const { keys, seq } = prepared(pattern);
      const rl = newRlf();
      for (const key of keys) await rl.consume(key);
      let at = 0;
      return {
        run: async () => {
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            const res = await rl.consume(seq[at]!);
            s += res.remainingPoints;
            at = (at + 1) & MASK;
          }
          sink.value += s;
        },
      };
    },
  };
}

function limiterTask(pattern: KeyPattern): TimedTask {
  return {
    id: `peer.limiter.${pattern.id}`,
    name: `limiter TokenBucket.tryRemoveTokens, ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = prepared(pattern);
      const map = new Map<string, LimiterTokenBucket>();
      for (const key of keys) map.set(key, newLimiterBucket());
      let at = 0;
      let denied = 0;
      let total = 0;
      return {
        run: () => {
          let n = 0;
          for (let i = 0; i < BATCH; i++) {
            const key = seq[at]!;
            let bucket = map.get(key);
            if (bucket === undefined) map.set(key, (bucket = newLimiterBucket()));
            if (bucket.tryRemoveTokens(1)) n++;
            at = (at + 1) & MASK;
          }
          denied += BATCH - n;
          total += BATCH;
        },
        check: () => (denied === 0 ? undefined : `${denied} of ${total} calls were denied`),
      };
    },
  };
}

function expressTask(pattern: KeyPattern): TimedTask {
  return {
    id: `peer.express.${pattern.id}`,
    name: `express-rate-limit MemoryStore.increment (awaited), ${pattern.label}`,
    prepare: async () => {
      const { keys, seq } = prepared(pattern);
      const store = newExpressStore();
      for (const key of keys) await store.increment(key);
      let at = 0;
      return {
        run: async () => {
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            const info = await store.increment(seq[at]!);
            s += info.totalHits;
            at = (at + 1) & MASK;
          }
          sink.value += s;
        },
      };
    },
  };
}

function fastifyBareTask(pattern: KeyPattern): TimedTask {
  return {
    id: `peer.fastify.${pattern.id}`,
    name: `@fastify/rate-limit LocalStore.incr (bare callback), ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = prepared(pattern);
      const store = newLocalStore(keys.length);
      let s = 0;
      const callback: LocalStoreCallback = (_error, result) => {
        s += result.current;
      };
      for (const key of keys) store.incr(key, callback, WINDOW_MS, HUGE);
      let at = 0;
      return {
        run: () => {
          for (let i = 0; i < BATCH; i++) {
            store.incr(seq[at]!, callback, WINDOW_MS, HUGE);
            at = (at + 1) & MASK;
          }
          sink.value += s;
        },
      };
    },
  };
}

function fastifyAwaitedTask(pattern: KeyPattern): TimedTask {
  return {
    id: `peer.fastify-awaited.${pattern.id}`,
    name: `@fastify/rate-limit LocalStore.incr (awaited as the plugin does), ${pattern.label}`,
    prepare: () => {
      const { keys, seq } = prepared(pattern);
      const store = newLocalStore(keys.length);
      const noop: LocalStoreCallback = () => {};
      for (const key of keys) store.incr(key, noop, WINDOW_MS, HUGE);
      let at = 0;
      return {
        run: async () => {
          let s = 0;
          for (let i = 0; i < BATCH; i++) {
            const key = seq[at]!;
            // The plugin's own wrapping (index.js): a promise around the callback.
            const result = await new Promise<LocalStoreResult>((resolve, reject) => {
              store.incr(
                key,
                (error, res) => (error ? reject(error) : resolve(res)),
                WINDOW_MS,
                HUGE,
              );
            });
            s += result.current;
            at = (at + 1) & MASK;
          }
          sink.value += s;
        },
      };
    },
  };
}

/** Section 3 tasks for one peer id, over the three key patterns. */
export function peerTasks(id: string, quick: boolean): TimedTask[] {
  const patterns = keyPatterns(quick);
  switch (id) {
    case "rlf":
      return patterns.map(rlfTask);
    case "limiter":
      return patterns.map(limiterTask);
    case "express":
      return patterns.map(expressTask);
    case "fastify":
      return patterns.map(fastifyBareTask);
    case "fastify-awaited":
      return patterns.map(fastifyAwaitedTask);
    default:
      throw new Error(`unknown peer ${id}`);
  }
}

/** Group ids of section 3, one child process each. */
export const PEER_GROUPS = ["rlf", "limiter", "express", "fastify", "fastify-awaited"] as const;
