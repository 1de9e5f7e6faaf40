/**
 * The options of `ConcurrencyLimiter` and `KeyedConcurrencyLimiter`, checked once.
 * @module
 */
import { checkInteger } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";

/** Default `maxQueue`: no queue, `acquire` rejects at once when no permit is free. */
export const DEFAULT_MAX_QUEUE = 0;
/** Default `retryAfterMs`: the hint a denial carries, one second. */
export const DEFAULT_CONCURRENCY_RETRY_MS = 1000;
/** Largest `limit` and `maxQueue`: 2^31 - 1. */
export const MAX_CONCURRENCY = 2 ** 31 - 1;

/** Checks an optional integer option; its default when `undefined`. */
export function optionalInteger(
  where: string,
  name: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
): number {
  return value === undefined ? fallback : checkInteger(where, name, value, min, max);
}

/**
 * The denial a full limiter gives: nothing remaining, `retryAfterMs` the configured hint
 * (permits come back when holders finish, at a time nobody knows in advance).
 */
export function concurrencyDenial(limit: number, retryAfterMs: number): Decision {
  return { allowed: false, limit, remaining: 0, retryAfterMs, resetAfterMs: retryAfterMs };
}
