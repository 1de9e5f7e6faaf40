import { isLimiter } from "../composite/all-of.js";
import { describe, mustBe } from "../core/errors.js";
import type { Limiter } from "../core/limiter.js";
import { bucketRequired } from "../core/option-names.js";

/** Validation and timer helpers of {@link KeyedLimiter}. @module */

/** The name in every `KeyedLimiter` error message. */
export const WHERE = "KeyedLimiter";
/** Largest `maxKeys`: 2^28 slots of 16 bytes is a 4 GiB slab. */
export const MAX_KEYS_LIMIT = 2 ** 28;
/** Default period of the quiet-period sweep, in milliseconds. */
export const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/** Checks a key. @throws {TypeError} `KeyedLimiter: key must be a string, got 42`. */
export function checkKey(key: unknown): string {
  if (typeof key !== "string") throw mustBe(WHERE, "key", "a string", key, TypeError);
  return key;
}

/**
 * What a policy that is a plain object of options (another library's, or a limiter's own
 * options without the limiter) should have been, for the error refusing it: the limiter
 * the options describe, with their values carried over where they are numbers.
 * `rate-limiter-flexible`'s `{ points, duration }` (`points` per `duration` seconds, counted
 * in fixed windows), `express-rate-limit`'s `{ max, windowMs }`, `@fastify/rate-limit`'s
 * `{ max, timeWindow }`, the `limiter` package's `{ tokensPerInterval, interval }`,
 * tollgate's own constructor options, and `KeyedLimiter`'s options (`keyedOptions`) given first.
 */
export function policyHint(policy: unknown, keyedOptions: readonly string[]): string {
  if (policy === undefined || policy === null) {
    return `; for example: new KeyedLimiter(${bucketRequired("TokenBucket", "refillPerSecond").example})`;
  }
  if (typeof policy !== "object" || Array.isArray(policy)) return "";
  const o = policy as Readonly<Record<string, unknown>>;
  const keys = Object.keys(o);
  if (keys.length === 0) return "";
  const has = (name: string) => Object.hasOwn(o, name);
  const n = (name: string, fallback: string) => {
    const value = o[name];
    return typeof value === "number" ? String(value) : fallback;
  };
  const keyed = (limiter: string) => `new KeyedLimiter(new ${limiter})`;
  let whose: string;
  let example: string;
  if (has("points") || has("duration")) {
    whose = "rate-limiter-flexible's options (points per duration seconds, in fixed windows)";
    const duration = o["duration"];
    const windowMs = typeof duration === "number" ? String(duration * 1000) : "1000";
    example = keyed(`FixedWindow({ limit: ${n("points", "4")}, windowMs: ${windowMs} })`);
  } else if (has("max") || has("timeWindow") || (has("windowMs") && !has("limit"))) {
    whose = has("timeWindow")
      ? "@fastify/rate-limit's options (max per timeWindow)"
      : "express-rate-limit's options (max per windowMs)";
    const windowMs = n("windowMs", n("timeWindow", "60000"));
    example = keyed(`FixedWindow({ limit: ${n("max", "100")}, windowMs: ${windowMs} })`);
  } else if (has("tokensPerInterval") || has("interval")) {
    whose = "the limiter package's options";
    example = keyed("TokenBucket({ capacity: 10, refillPerSecond: 5 })");
  } else if (has("capacity") || has("refillPerSecond") || has("leakPerSecond")) {
    const leaky = has("leakPerSecond");
    const rate = leaky ? "leakPerSecond" : "refillPerSecond";
    whose = `${leaky ? "LeakyBucket" : "TokenBucket"}'s options, not the limiter`;
    example = keyed(
      `${leaky ? "LeakyBucket" : "TokenBucket"}({ capacity: ${n("capacity", "10")}, ${rate}: ${n(rate, "5")} })`,
    );
  } else if (has("limit") || has("windowMs")) {
    whose = "a window's options, not the limiter";
    example = keyed(
      `FixedWindow({ limit: ${n("limit", "100")}, windowMs: ${n("windowMs", "60000")} })`,
    );
  } else if (keys.some((k) => keyedOptions.includes(k))) {
    whose = "KeyedLimiter's options, which come second";
    const given = keys.map((k) => (typeof o[k] === "number" ? `${k}: ${o[k]}` : `${k}: …`));
    example = `new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 5 }), { ${given.join(", ")} })`;
  } else {
    return "";
  }
  return ` with ${keys.join(", ")}: ${whose}; for example: ${example}`;
}

/**
 * Wraps a limiter factory so that a non-limiter result is a clear `TypeError` (and an
 * exception it throws passes through unchanged); either way nothing is stored.
 */
export function checkedFactory(
  make: (key: string) => unknown,
  what: string,
): (key: string) => Limiter {
  return (key) => {
    const limiter = make(key);
    if (!isLimiter(limiter)) {
      throw new TypeError(
        `${WHERE}: ${what} must return a Limiter (allow, consume, peek, reset, isIdle, wait) for key ${JSON.stringify(key)}, got ${describe(limiter)}`,
      );
    }
    return limiter;
  };
}

/**
 * Checks `sweepIntervalMs`: undefined means the default, `Infinity` means no timer; longer
 * periods than `setInterval` takes are capped at 2^31 - 1 ms.
 * @throws {TypeError} For a non-number; {RangeError} for NaN or a number <= 0.
 */
export function checkSweepInterval(value: unknown): number {
  if (value === undefined) return DEFAULT_SWEEP_INTERVAL_MS;
  if (value === Number.POSITIVE_INFINITY) return value;
  if (typeof value !== "number" || !(value > 0)) {
    throw mustBe(WHERE, "sweepIntervalMs", "a number > 0 (Infinity for no timer)", value);
  }
  return Math.min(value, 2 ** 31 - 1);
}

/**
 * Arms the quiet-period sweep: one `setInterval` that holds the registry weakly (a
 * registry nobody references is collected, and its timer then stops) and is unref'd, so
 * it never keeps a process alive (Node and Bun: `unref()`; Deno: `Deno.unrefTimer`;
 * a runtime whose timers are plain numbers, as workerd's, has nothing to unref).
 *
 * Arms nothing, and returns false, where the runtime cannot hold the registry weakly (no
 * `WeakRef`: workerd before its 2025-06-01 compatibility date; a timer holding it strongly
 * would keep every registry ever built alive) or refuses a timer here (workerd in a
 * module's global scope): the incremental sweep and the bounds still hold, and `sweep()`
 * drops idle keys on demand (docs/keyed.md#runtimes).
 */
export function armSweepTimer(registry: { sweep(): number }, periodMs: number): boolean {
  const Ref = (globalThis as { WeakRef?: WeakRefConstructor }).WeakRef;
  if (typeof Ref !== "function" || typeof setInterval !== "function") return false;
  const ref = new Ref(registry);
  let timer: unknown;
  try {
    timer = setInterval(() => {
      const live = ref.deref();
      if (live === undefined) clearInterval(timer as ReturnType<typeof setInterval>);
      else live.sweep();
    }, periodMs);
  } catch {
    return false; // workerd's global scope: "Disallowed operation called within global scope"
  }
  if (typeof timer === "object" && timer !== null && "unref" in timer) {
    (timer as { unref(): void }).unref();
  } else {
    const deno = (globalThis as { Deno?: { unrefTimer?(id: unknown): void } }).Deno;
    deno?.unrefTimer?.(timer);
  }
  return true;
}
