/**
 * Child-process worker of bench/memory.ts: `node --expose-gc --import tsx
 * bench/memory-worker.ts <variant> <keys>`. Fills one structure with `keys` keys (one check
 * each) and reports, over IPC, the bytes per key with and without the key strings.
 *
 * Method (heap = `heapUsed + external`, so `ArrayBuffer` slabs count, after two full GCs):
 * 1. an array of `keys` small integers is built; heap h1;
 * 2. each slot is replaced by its key string (the array keeps its backing store, so the
 *    growth is the strings alone); heap h2: string bytes = (h2 - h1) / keys;
 * 3. the structure gets one check per key; heap h3: bytes per key = (h3 - h2) / keys.
 * A structure that copies the key (rate-limiter-flexible prefixes it) pays for the copy in
 * step 3, as it does in production.
 * @module
 */
import { KeyedLimiter } from "../src/index.js";
import {
  ALGORITHMS,
  type AlgorithmName,
  makeKeyed,
  makeKeyedAllOf,
  makeLimiter,
} from "./algorithms.bench.js";
import { PEERS } from "./peers.js";
import type { WorkerMessage } from "./support/child.js";
import { keyOf } from "./support/keys.js";
import { NaiveTokenBuckets } from "./support/naive.js";

/** What the worker reports for one variant. */
export interface MemoryMeasurement {
  readonly variant: string;
  readonly keys: number;
  /** Bytes per key held by the structure, beyond the key string. */
  readonly bytesPerKey: number;
  /** Bytes of one key string (V8 heap). */
  readonly keyStringBytes: number;
  /** Milliseconds to insert all keys (one check each), for information. */
  readonly fillMs: number;
}

type Hit = (key: string) => unknown;

/** Builds the structure of `variant` for `keys` keys; returns its check and its root. */
function build(variant: string, keys: number): { hit: Hit; root: unknown } {
  if (variant === "naive") {
    const naive = new NaiveTokenBuckets(1e12, 1e-3);
    return { hit: (key) => naive.allow(key), root: naive };
  }
  if (variant.startsWith("tollgate.")) {
    // tollgate.<algorithm>, tollgate.<algorithm>.fn (policy function), tollgate.<algorithm>.allOf,
    // tollgate.<algorithm>.plans (two plans, every other key in each), tollgate.<algorithm>.ten
    // (ten checks per key: a SlidingWindowLog's ten entries)
    const [name, path] = variant.slice("tollgate.".length).split(".") as [AlgorithmName, string?];
    if (!ALGORITHMS.some((a) => a.name === name)) throw new Error(`unknown algorithm ${name}`);
    if (
      path !== undefined &&
      path !== "fn" &&
      path !== "allOf" &&
      path !== "plans" &&
      path !== "ten"
    ) {
      throw new Error(`unknown memory variant ${variant}`);
    }
    const keyed =
      path === "allOf"
        ? makeKeyedAllOf(name, keys)
        : path === "plans"
          ? makeKeyedPlans(name, keys)
          : makeKeyed(name, keys, path === "fn");
    if (path === "ten") {
      return {
        hit: (key) => {
          for (let i = 0; i < 10; i++) keyed.allow(key);
        },
        root: keyed,
      };
    }
    return { hit: (key) => keyed.allow(key), root: keyed };
  }
  if (variant.startsWith("peer.")) {
    const peer = PEERS.find((p) => p.id === variant.slice("peer.".length));
    if (peer === undefined) throw new Error(`unknown peer ${variant}`);
    const store = peer.create(keys);
    return { hit: (key) => store.hit(key), root: store.root };
  }
  throw new Error(`unknown memory variant ${variant}`);
}

/** A plan registry of two plans of `makeLimiter(name)`, keys alternating between them. */
function makeKeyedPlans(name: AlgorithmName, keys: number): KeyedLimiter {
  return new KeyedLimiter(
    {
      plans: { free: makeLimiter(name), pro: makeLimiter(name) },
      plan: (key) => ((key.charCodeAt(key.length - 1) & 1) === 0 ? "free" : "pro"),
    },
    { maxKeys: Math.max(keys, 1), maxBytes: 2 ** 32 },
  );
}

function heap(): number {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error("memory-worker.ts needs node --expose-gc");
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

async function measure(variant: string, keys: number): Promise<MemoryMeasurement> {
  const slots: (number | string)[] = [];
  for (let i = 0; i < keys; i++) slots.push(i);
  const h1 = heap();
  for (let i = 0; i < keys; i++) slots[i] = keyOf(i);
  const h2 = heap();
  const { hit, root } = build(variant, keys);
  const started = performance.now();
  for (let i = 0; i < keys; i++) {
    const result = hit(slots[i] as string);
    if (result instanceof Promise) await result;
  }
  const fillMs = performance.now() - started;
  const h3 = heap();
  // Touch both after the last reading so neither is collected before it.
  if (root === undefined || slots.length !== keys) throw new Error("structure vanished");
  return {
    variant,
    keys,
    bytesPerKey: (h3 - h2) / keys,
    keyStringBytes: (h2 - h1) / keys,
    fillMs,
  };
}

const [variant, keysArg] = process.argv.slice(2);
try {
  const keys = Number(keysArg);
  if (variant === undefined || !Number.isInteger(keys) || keys < 1) {
    throw new Error("usage: memory-worker.ts <variant> <keys>");
  }
  const payload = await measure(variant, keys);
  const message: WorkerMessage = { type: "result", payload };
  if (process.send === undefined) {
    // Run by hand: print the measurement.
    console.log(JSON.stringify(payload));
    process.exit(0);
  }
  process.send(message, () => process.exit(0));
} catch (error) {
  console.error(error);
  process.exit(1);
}
