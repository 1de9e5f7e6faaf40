import type {
  StoreDecision,
  DecisionSource as StoreDecisionSource,
  StoreReceipt,
} from "../store/policy.js";

/** The Redis names of the store-neutral failure vocabulary (src/store/policy.ts). @module */

export {
  FAIL_CLOSED_RETRY_AFTER_MS,
  type FailureOutcome,
  type FailurePolicy,
  type FallbackLimiter,
  type PolicySource,
  type StoreDecision,
  type StoreFailureEvent,
  type StoreOperation,
  type StoreReceipt,
  type StoreRecoveryEvent,
} from "../store/policy.js";

/**
 * Who decided a {@link RedisDecision}: `'redis'` (the script, atomically, the normal
 * case), or the failure policy: `'local'` (the in-memory limiter: the default policy's,
 * or your fallback limiter), `'open'` (allowed without counting), `'closed'` (refused).
 */
export type DecisionSource = StoreDecisionSource<"redis">;

/** A {@link Decision} plus who made it; see {@link DecisionSource}. */
export type RedisDecision = StoreDecision<"redis">;

/**
 * What a Redis limiter's `charge` resolves with: its {@link RedisDecision} as a `Receipt`
 * (the key, the units Redis took and when), for `refund(receipt, units?)`.
 */
export type RedisReceipt = StoreReceipt<"redis">;
