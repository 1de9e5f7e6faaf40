import { describe } from "../errors.js";
import type { Limiter } from "../limiter.js";

/**
 * Validation and timer helpers of {@link KeyedLimiter}.
 * @module
 */

/** The name in every `KeyedLimiter` error message. */
export const WHERE = "KeyedLimiter";
/** Largest `maxKeys`: 2^28 slots of 16 bytes is a 4 GiB slab. */
export const MAX_KEYS_LIMIT = 2 ** 28;
/** Default period of the quiet-period sweep, in milliseconds. */
export const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/**
 * Checks a key.
 * @throws {TypeError} `KeyedLimiter: key must be a string, got 42`.
 */
export function checkKey(key: unknown): string {
  if (typeof key !== "string") {
    throw new TypeError(`${WHERE}: key must be a string, got ${describe(key)}`);
  }
  return key;
}

/** True for an object with every method of {@link Limiter}. */
export function isLimiter(value: unknown): value is Limiter {
  if (typeof value !== "object" || value === null) return false;
  const o = value as Record<string, unknown>;
  return (
    typeof o["allow"] === "function" &&
    typeof o["consume"] === "function" &&
    typeof o["peek"] === "function" &&
    typeof o["reset"] === "function" &&
    typeof o["isIdle"] === "function" &&
    typeof o["wait"] === "function"
  );
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
  const range = "a number > 0 (Infinity for no timer)";
  if (typeof value !== "number") {
    throw new TypeError(`${WHERE}: sweepIntervalMs must be ${range}, got ${describe(value)}`);
  }
  if (!(value > 0)) {
    throw new RangeError(`${WHERE}: sweepIntervalMs must be ${range}, got ${describe(value)}`);
  }
  return Math.min(value, 2 ** 31 - 1);
}

/**
 * Arms the quiet-period sweep: one `setInterval` that holds the registry weakly (a
 * registry nobody references is collected, and its timer then stops) and is unref'd, so
 * it never keeps a process alive (Node and Bun: `unref()`; Deno: `Deno.unrefTimer`).
 */
export function armSweepTimer(ref: WeakRef<{ sweep(): number }>, periodMs: number): void {
  const timer: unknown = setInterval(() => {
    const registry = ref.deref();
    if (registry === undefined) clearInterval(timer as ReturnType<typeof setInterval>);
    else registry.sweep();
  }, periodMs);
  if (typeof timer === "object" && timer !== null && "unref" in timer) {
    (timer as { unref(): void }).unref();
  } else {
    const deno = (globalThis as { Deno?: { unrefTimer?(id: unknown): void } }).Deno;
    deno?.unrefTimer?.(timer);
  }
}
