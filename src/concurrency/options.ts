/**
 * The options of `ConcurrencyLimiter` and `KeyedConcurrencyLimiter`, checked once.
 * @module
 */
import { checkInteger, checkNumber, checkOptionNames, checkOptions } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";

/** Default `maxQueue`: no queue, `acquire` rejects at once when no permit is free. */
export const DEFAULT_MAX_QUEUE = 0;
/** Default `retryAfterMs`: the hint a denial carries, one second. */
export const DEFAULT_CONCURRENCY_RETRY_MS = 1000;
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
 * `limit`, `maxQueue`, the integer options of `more` (`[default, min, max]` each) and
 * `retryAfterMs`, in that order.
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
  const s: Record<string, number> = {
    limit: checkInteger(where, "limit", o["limit"], 1, MAX_CONCURRENCY),
    maxQueue: checkInteger(where, "maxQueue", o["maxQueue"], 0, MAX_CONCURRENCY, DEFAULT_MAX_QUEUE),
  };
  for (const [name, range] of Object.entries<readonly [number, number, number]>(more)) {
    s[name] = checkInteger(where, name, o[name], range[1], range[2], range[0]);
  }
  s["retryAfterMs"] = checkNumber(
    where,
    "retryAfterMs",
    o["retryAfterMs"],
    0,
    true,
    DEFAULT_CONCURRENCY_RETRY_MS,
  );
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
