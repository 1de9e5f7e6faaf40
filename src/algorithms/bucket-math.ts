import type { Decision } from "../limiter.js";
import { cleanMs, fits, wholeUnits } from "../numeric.js";

/**
 * The token-bucket arithmetic as free functions, shared by {@link TokenBucket} (one
 * state) and the keyed registry's slab store (one pair of numbers per key), so both
 * decide bit for bit alike. State is `tokens` exact at `anchorMs`; an `anchorMs` of
 * `-Infinity` means never used (full).
 * @module
 */

/**
 * Tokens available at `nowMs` (>= `anchorMs`): `min(capacity, tokens + elapsedMs *
 * refillPerSecond / 1000)`; `capacity` when the bucket was never used.
 */
export function tokensAt(
  tokens: number,
  anchorMs: number,
  nowMs: number,
  capacity: number,
  refillPerSecond: number,
): number {
  const elapsed = nowMs - anchorMs;
  // anchorMs is -Infinity only while the bucket was never used: it is full.
  if (elapsed === Number.POSITIVE_INFINITY) return capacity;
  const refilled = tokens + (elapsed * refillPerSecond) / 1000;
  return refilled < capacity ? refilled : capacity;
}

/**
 * Tokens left after taking `cost` from `tokens`. Within the fit tolerance a request
 * may take a hair more than is there: the result is never negative.
 */
export function tokensAfter(tokens: number, cost: number): number {
  const left = tokens - cost;
  return left > 0 ? left : 0;
}

/** Milliseconds until `missing` tokens have refilled at `refillPerSecond`; 0 if none miss. */
export function msToRefill(missing: number, refillPerSecond: number): number {
  if (!(missing > 0)) return 0;
  if (refillPerSecond === 0) return Number.POSITIVE_INFINITY;
  const ms = (missing * 1000) / refillPerSecond;
  // missing * 1000 overflows past 1.8e305: divide first there (same result elsewhere).
  return cleanMs(ms === Number.POSITIVE_INFINITY ? (missing / refillPerSecond) * 1000 : ms);
}

/**
 * The {@link Decision} for `cost` against `tokens` available now (after the cost when it
 * fits, as `consume` answers; the caller takes the tokens).
 */
export function bucketDecision(
  cost: number,
  tokens: number,
  capacity: number,
  refillPerSecond: number,
): Decision {
  if (fits(cost, tokens)) {
    const left = tokensAfter(tokens, cost);
    return {
      allowed: true,
      limit: capacity,
      remaining: wholeUnits(left, capacity),
      retryAfterMs: 0,
      resetAfterMs: msToRefill(capacity - left, refillPerSecond),
    };
  }
  const never = !fits(cost, capacity) || refillPerSecond === 0;
  return {
    allowed: false,
    limit: capacity,
    remaining: wholeUnits(tokens, capacity),
    retryAfterMs: never ? Number.POSITIVE_INFINITY : msToRefill(cost - tokens, refillPerSecond),
    resetAfterMs: msToRefill(capacity - tokens, refillPerSecond),
  };
}
