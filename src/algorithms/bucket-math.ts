import type { Decision } from "../core/limiter.js";
import { cleanMs, decisionMs, fits, wholeUnits } from "../core/numeric.js";

/**
 * The token-bucket arithmetic as free functions, shared by {@link TokenBucket} (one state) and the
 * keyed registry's slab store (one pair of numbers per key), so both decide bit for bit alike.
 * State is `tokens` exact at `anchorMs`; an `anchorMs` of `-Infinity` means never used (full).
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
 * Tokens left after taking `cost` from `tokens`: `tokens - cost`, not clamped. Within the
 * fit tolerance a request may take a hair more than is there, and the bucket keeps that
 * overdraft (at most `1e-9 * max(1, cost)` below 0) until the refill repays it. Clamping
 * at 0 forgave it on every request: after `capacity` 1 was spent, a million `allow(1e-9)`
 * were all granted. `remaining` still reads 0 (`wholeUnits`), and the time to full counts
 * the overdraft. A free probe (cost 0) is still always allowed (see `bucketDecision`).
 */
export function tokensAfter(tokens: number, cost: number): number {
  return tokens - cost;
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
 * fits, as `consume` answers; the caller takes the tokens). `tokens` may be a hair below 0
 * (an overdraft kept by {@link tokensAfter}); a cost of 0 is allowed all the same.
 */
export function bucketDecision(
  cost: number,
  tokens: number,
  capacity: number,
  refillPerSecond: number,
): Decision {
  const allowed = fits(cost, tokens) || cost === 0;
  const left = allowed ? tokensAfter(tokens, cost) : tokens;
  return {
    allowed,
    limit: capacity,
    remaining: wholeUnits(left, capacity),
    retryAfterMs: allowed
      ? 0
      : !fits(cost, capacity) || refillPerSecond === 0
        ? Number.POSITIVE_INFINITY
        : decisionMs(msToRefill(cost - tokens, refillPerSecond)),
    resetAfterMs: decisionMs(msToRefill(capacity - left, refillPerSecond)),
  };
}

/**
 * The units of a bucket reconfigured from `oldCapacity` to `capacity`, from the `units`
 * it has at the moment of the change (tokens, or a leaky bucket's free room; accrued up to
 * then at the old rate). A token bucket keeps its tokens (Go's `SetBurst`), clamped to the
 * new capacity; a leaky bucket keeps its level (`capacity - units`) as it is, even above a
 * smaller capacity (its room is then below 0 until it drains): what was admitted is not
 * forgiven, and a level kept unclamped reads the same at any later time, as a Redis key
 * carried over at its next call reads it. A debt (tokens below 0) is kept. The caller handles a full bucket, which stays full (fresh).
 */
export function retunedUnits(
  units: number,
  oldCapacity: number,
  capacity: number,
  keepsLevel: boolean,
): number {
  if (keepsLevel) return capacity - (oldCapacity - units);
  return units < capacity ? units : capacity;
}
