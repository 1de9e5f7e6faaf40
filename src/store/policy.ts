import type { Decision, Receipt } from "../core/limiter.js";
import type { RateLimitStoreError } from "./errors.js";

/**
 * The store-neutral failure vocabulary, shared by every store-backed limiter
 * (`tollgate/redis`) and by `tollgate/http`'s `failure` option: `'open'` lets the request
 * through, `'closed'` refuses it, `'local'` decides in process memory, `'throw'` rejects.
 * @module
 */

/**
 * Who answered a policy decision when the store could not: `'local'` (an in-process
 * limiter: the default's, or your {@link FallbackLimiter}), `'open'` (allowed without
 * counting), `'closed'` (refused without counting).
 */
export type PolicySource = "local" | "open" | "closed";

/**
 * Who decided a {@link StoreDecision}: the store itself (`'redis'` for the Redis limiters:
 * atomically, the normal case), or the failure policy ({@link PolicySource}).
 */
export type DecisionSource<Store extends string = string> = Store | PolicySource;

/** A {@link Decision} plus who made it; see {@link DecisionSource}. */
export interface StoreDecision<Store extends string = string> extends Decision {
  /**
   * The store's name (`'redis'`) unless the store failed and the failure policy decided, or
   * the limiter's own block table denied the key first (`'local'`, docs/semantics.md#blocks).
   */
  readonly source: DecisionSource<Store>;
}

/**
 * What a store limiter's `charge` resolves with: a {@link Receipt} with its `source`. One
 * the failure policy answered (`source` not the store's) took nothing from the store and
 * gives nothing back.
 */
export interface StoreReceipt<Store extends string = string>
  extends Receipt,
    StoreDecision<Store> {}

/**
 * A local limiter with one state per key, consulted while the store fails (the
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
 * What a store-backed limiter does when its store cannot answer (an error, a timeout, an
 * unexpected reply, an open circuit, the pending-call cap); docs/redis.md#failure-policies:
 * - `'local'` (default): the same algorithm in process memory (a bounded `KeyedLimiter`):
 *   each process limits alone, never unlimited; a key the store last denied stays denied
 *   until the store said it could pass (`source: 'local'`);
 * - `'open'`: `allowed: true`, `remaining` as a fresh limiter's (`source: 'open'`);
 * - `'closed'`: `allowed: false`, `retryAfterMs` 1000 (one second: the store's state is
 *   unknown) (`source: 'closed'`);
 * - `'throw'`: reject with a {@link RateLimitStoreError} (`cause` set);
 * - a {@link FallbackLimiter}: decide locally with it (`source: 'local'`).
 */
export type FailurePolicy = "local" | "open" | "closed" | "throw" | FallbackLimiter;

/** `retryAfterMs` of a fail-closed decision: the store's state is unknown; one second. */
export const FAIL_CLOSED_RETRY_AFTER_MS = 1000;

/** The call of a store-backed limiter that failed or recovered. */
export type StoreOperation = "allow" | "consume" | "peek" | "reset" | "refund" | "block";

/** How a call the store could not answer was answered instead. */
export type FailureOutcome = PolicySource | "throw";

/**
 * What `onError` receives: once when a circuit opens (after `failuresToOpen` consecutive failures),
 * not for every failed call; the fields describe the call whose failure opened it.
 */
export interface StoreFailureEvent {
  /** The failure; `error.cause` is the client's error or a timeout. */
  readonly error: RateLimitStoreError;
  /** The call that failed. */
  readonly operation: StoreOperation;
  /** The caller's key (without the prefix). */
  readonly key: string;
  /** How the call was answered instead: a policy source, or `'throw'`. */
  readonly outcome: FailureOutcome;
  /** The circuit's node (a cluster node), or `undefined` for a client's one circuit. */
  readonly node: string | undefined;
}

/** What `onRecover` receives: once when an open circuit closes (the store answered again). */
export interface StoreRecoveryEvent {
  /** The call that succeeded. */
  readonly operation: StoreOperation;
  /** Calls on this circuit the store did not answer (failed, or not sent) since it last did. */
  readonly failedCalls: number;
  /** The circuit's node, or `undefined` for a client's one circuit. */
  readonly node: string | undefined;
}
