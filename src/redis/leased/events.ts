import type { RateLimitStoreError } from "../errors.js";

/** The calls a `LeasedTokenBucket` makes to Redis. */
export type LeaseOperation = "lease" | "heartbeat";

/** What `onError` receives, once for every lease call or heartbeat that Redis failed. */
export interface LeaseFailureEvent {
  /** The failure; `error.cause` is the client's error, a timeout or a late call. */
  readonly error: RateLimitStoreError;
  /** The call that failed. */
  readonly operation: LeaseOperation;
  /** Keys in the failed call (0 for a heartbeat). */
  readonly keys: number;
}

/** What `onRecover` receives: the first call Redis answered after failures. */
export interface LeaseRecoveryEvent {
  /** The call that succeeded. */
  readonly operation: LeaseOperation;
  /** Calls that failed in a row before it. */
  readonly failedCalls: number;
}

/** What `onTableFull` receives: the lease table refused a new key. */
export interface LeaseTableFullEvent {
  /** The key refused. */
  readonly key: string;
  /** Entries in the table (`maxKeys`). */
  readonly keys: number;
  /** Of them, entries that cannot go now (a call under way, a charge or a fallback bucket to keep). */
  readonly pinned: number;
  /** The refused decision's `retryAfterMs`: until the next exchange window, or the next try of a failed store. */
  readonly retryAfterMs: number;
}
