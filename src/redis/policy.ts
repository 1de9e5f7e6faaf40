import type { Decision } from "../limiter.js";
import type { RateLimitStoreError } from "./errors.js";

/**
 * Who decided a {@link RedisDecision}: `'redis'` (the script, atomically, the normal
 * case), `'fallback'` (the local fallback limiter, Redis having failed), `'failOpen'`
 * (Redis failed and the policy is `'allow'`), `'failClosed'` (Redis failed and the
 * policy is `'deny'`).
 */
export type DecisionSource = "redis" | "fallback" | "failOpen" | "failClosed";

/** A {@link Decision} plus where it came from; see {@link DecisionSource}. */
export interface RedisDecision extends Decision {
  /** `'redis'` unless Redis failed and the failure policy decided instead. */
  readonly source: DecisionSource;
}

/**
 * A local limiter with one state per key, consulted while Redis fails (the
 * `failure` option). Core's `KeyedLimiter` fits, for example
 * `new KeyedLimiter(new TokenBucket({ capacity: 25, refillPerSecond: 2.5 }))` for a
 * quarter of the shared limit on each of 4 instances.
 */
export interface FallbackLimiter {
  /** Decides and takes `cost` for `key` locally. */
  consume(key: string, cost?: number): Decision;
  /** What `consume` would answer, changing nothing. */
  peek(key: string, cost?: number): Decision;
  /** Forgets `key`'s local usage. */
  reset(key: string): void;
}

/**
 * What a Redis limiter does when Redis fails (a connection error, a timeout, a
 * script error, an unexpected reply):
 * - `'throw'` (default): reject with a {@link RateLimitStoreError} (`cause` set);
 * - `'allow'`: fail open, answer `allowed: true` (`source: 'failOpen'`,
 *   `remaining` as a fresh limiter would say, `retryAfterMs` and `resetAfterMs` 0);
 * - `'deny'`: fail closed, answer `allowed: false` (`source: 'failClosed'`,
 *   `remaining` 0, `retryAfterMs` {@link FAIL_CLOSED_RETRY_AFTER_MS}, `resetAfterMs` 0);
 * - a {@link FallbackLimiter}: decide locally with it (`source: 'fallback'`).
 */
export type FailurePolicy = "throw" | "allow" | "deny" | FallbackLimiter;

/** `retryAfterMs` of a fail-closed decision: the store's state is unknown; one second. */
export const FAIL_CLOSED_RETRY_AFTER_MS = 1000;

/** The call of a Redis limiter that failed or recovered. */
export type RedisOperation = "allow" | "consume" | "peek" | "reset";

/** What `onError` receives, once for every call that Redis failed. */
export interface StoreFailureEvent {
  /** The failure; `error.cause` is the client's error or a timeout. */
  readonly error: RateLimitStoreError;
  /** The call that failed. */
  readonly operation: RedisOperation;
  /** The caller's key (without the prefix). */
  readonly key: string;
  /** How the call was answered instead: a decision's source, or `'throw'`. */
  readonly outcome: Exclude<DecisionSource, "redis"> | "throw";
}

/** What `onRecover` receives: the first call Redis answered after failures. */
export interface StoreRecoveryEvent {
  /** The call that succeeded. */
  readonly operation: RedisOperation;
  /** Calls of this limiter that failed in a row before it. */
  readonly failedCalls: number;
}
