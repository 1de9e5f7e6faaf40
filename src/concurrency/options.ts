/**
 * The options of `ConcurrencyLimiter` and `KeyedConcurrencyLimiter`, checked once.
 * @module
 */
import { checkInteger, checkNumber, checkOptionNames, checkOptions } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";

/** Largest `limit` and `maxQueue`: 2^31 - 1. */
export const MAX_CONCURRENCY = 2 ** 31 - 1;

/** The checked options both limiters share. */
export interface ConcurrencySettings {
  readonly limit: number;
  readonly maxQueue: number;
  readonly retryAfterMs: number;
}

/** Settings {@link checkConcurrency} made: a per-key limiter given one checks nothing again. */
const checked = new WeakSet<object>();

/** Whether `options` came from {@link checkConcurrency} (checked once for every key). */
export function isChecked(options: object): options is ConcurrencySettings {
  return checked.has(options);
}

/**
 * Checks the options of `where`: an object naming only `names` (`hints` for others), then
 * `limit`, `maxQueue` (default 0: no queue), the integer options of `more` (`[default, min,
 * max]` each) and `retryAfterMs` (default 1000: the hint a denial carries), in that order.
 * @throws {TypeError} For an unknown or mistyped option; {RangeError} for one out of range.
 */
export function checkConcurrency<K extends string = never>(
  where: string,
  options: unknown,
  names: readonly string[],
  hints: Readonly<Record<string, string>>,
  more = {} as Readonly<Record<K, readonly [number, number, number]>>,
): ConcurrencySettings & Readonly<Record<K, number>> {
  const o = checkOptions<Record<string, unknown>>(where, options);
  checkOptionNames(where, o, names, hints);
  const ranges: Record<string, readonly [number | undefined, number, number]> = {
    limit: [undefined, 1, MAX_CONCURRENCY],
    maxQueue: [0, 0, MAX_CONCURRENCY],
    ...more,
  };
  const s: Record<string, number> = {};
  for (const [name, [fallback, min, max]] of Object.entries(ranges)) {
    s[name] = checkInteger(where, name, o[name], min, max, fallback);
  }
  s["retryAfterMs"] = checkNumber(where, "retryAfterMs", o["retryAfterMs"], 0, true, 1000);
  // Frozen: every key's limiter of a keyed one takes these unchecked, so none may change them.
  checked.add(Object.freeze(s));
  return s as ConcurrencySettings & Record<K, number>;
}

/**
 * The denial a full limiter gives: nothing remaining, `retryAfterMs` the configured hint
 * (permits come back when holders finish, at a time nobody knows in advance).
 */
export function concurrencyDenial(limit: number, retryAfterMs: number): Decision {
  return { allowed: false, limit, remaining: 0, retryAfterMs, resetAfterMs: retryAfterMs };
}
