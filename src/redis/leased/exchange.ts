/**
 * The seam between `LeasedTokenBucket` and the shared bucket: everything the lease logic
 * needs from a store, so that a deterministic simulation (or a test) can drive the same
 * logic with a store of its own and a manual clock and scheduler. The Redis store is
 * {@link RedisLeaseStore} in ./redis-store.ts.
 * @module
 */

/** One key's part of a lease exchange, in tokens (all finite, >= 0). */
export interface LeaseRequest {
  /** The caller's key (without prefix). */
  readonly key: string;
  /** Unused tokens given back first (the store never fills the bucket above capacity). */
  readonly give: number;
  /**
   * Units this process admitted without a lease (on credit, or by the `'local'` fallback
   * while the store failed), taken whatever the bucket holds: it may go below zero, and
   * the refill repays it before anyone gets tokens again.
   */
  readonly charge: number;
  /** Most tokens to take. */
  readonly want: number;
  /** Fewest tokens worth taking: with fewer available to this process, nothing is taken. */
  readonly need: number;
  /** This process's demand for the key, in tokens per second (its weight in the fair share; > 0). */
  readonly demand: number;
  /** A change to the key's shared block, applied before anything else; absent: none. */
  readonly block?: LeaseBlockChange | undefined;
}

/**
 * A change to a key's block in the store (docs/redis.md#blocks-shared-by-every-process),
 * on the store's clock: `'block'` blocks it for `ms` from now (a block that ends later
 * stays), `'once'` the same unless a block is in place (kept as it is), `'lift'` lifts it
 * and leaves a mark that it was lifted, kept `ms` (at least until the lifted block would have
 * ended), so that the processes that learned the block lift it too.
 */
export interface LeaseBlockChange {
  /** `'block'`, `'once'` (unless blocked) or `'lift'`. */
  readonly op: "block" | "once" | "lift";
  /** Milliseconds (> 0 for a block; >= 0 for a lift: how long its mark is kept at least). */
  readonly ms: number;
}

/** One key's answer, in the order of the requests. */
export interface LeaseGrant {
  /** Tokens taken for this process (0 to `want`). */
  readonly granted: number;
  /**
   * Ms until this process could get `need` tokens (again): 0 when it could now; Infinity
   * when it never can (no refill). Counts the bucket's debt and this process's fair share.
   */
  readonly waitMs: number;
  /** Tokens left in the shared bucket after the exchange (below zero: a debt being repaid). */
  readonly tokens: number;
  /**
   * Ms until the key's block in the store ends, 0 when it is not blocked (then nothing was
   * granted: a blocked key gets no tokens). Absent: a store that keeps no blocks.
   */
  readonly blockedMs?: number | undefined;
  /**
   * Ms since the key's block was last lifted in the store, while the mark of that lift is
   * kept; Infinity when there is none. Absent: a store that keeps no blocks.
   */
  readonly liftedAgoMs?: number | undefined;
}

/**
 * The answer to one exchange: the grants, or `late` when the store refused to act because
 * the call arrived after its deadline (nothing was written).
 */
export type LeaseExchange =
  | { readonly late: false; readonly grants: readonly LeaseGrant[] }
  | { readonly late: true };

/** The shared bucket behind a `LeasedTokenBucket`. */
export interface LeaseStore {
  /**
   * The batch a key belongs to: keys of one batch go in one call. A standalone Redis
   * answers one group for all keys; a cluster, the key's hash slot.
   */
  groupOf(key: string): string;
  /**
   * Optional: the server that serves `key` now (a cluster's master of its slot, as `host:port`), or
   * undefined when unknown. The calls of one node in one batch window go out back to back (one
   * round trip per node), and a failed call backs off every group of its node, not just its own.
   * Absent or undefined: each group is a node of its own. Must be cheap and must not throw.
   */
  nodeOf?(key: string): string | undefined;
  /**
   * Gives back, charges and takes tokens for every request of process `processId`,
   * atomically per key, sharing a contended bucket max-min fairly among the processes
   * that ask for it, and keeps each key's block (src/redis/leased/shared-bucket.ts is the
   * model; a store without blocks ignores `block` and answers no `blockedMs`). Rejects when the store
   * failed (a connection error, a timeout, a malformed reply, a refused write). A call that
   * did not answer in time must change nothing afterwards (the Redis store sends a deadline).
   *
   * `sequence` numbers this process's calls (exchanges and heartbeats), one more each call.
   * A client may run one call twice (ioredis sends the calls a lost connection left
   * unanswered again on the next one; a cluster client retries after a failover): the
   * store answers a call of a key it already ran (same process and sequence) with the
   * answer it gave, and ignores a call older than one it ran on that key, so that nothing
   * is given back, charged or taken twice. At most one call per key and process is under
   * way at a time (the limiter waits), and each key appears once in a call.
   */
  exchange(
    requests: readonly LeaseRequest[],
    processId: string,
    sequence: number,
  ): Promise<LeaseExchange>;
  /**
   * Announces this process as live for `ttlMs` (or withdraws it with `leave`) and resolves
   * with the number of live processes, this one included unless it left, and whether this
   * call made it live. `sequence` as for {@link exchange}: a heartbeat run twice answers
   * `joined` as its first run did.
   */
  heartbeat(
    processId: string,
    ttlMs: number,
    leave: boolean,
    sequence: number,
  ): Promise<HeartbeatAnswer>;
}

/** What a {@link LeaseStore.heartbeat} answers. */
export interface HeartbeatAnswer {
  /** Live processes after the call (this one included unless it left; >= 0). */
  readonly live: number;
  /**
   * This call made the process live: its first heartbeat, or its membership had lapsed or
   * the store had forgotten it (a restart, `FLUSHALL`). Then the others' counts may lack it
   * until they beat again. False for `leave`.
   */
  readonly joined: boolean;
}

/**
 * Schedules `run` after `delayMs` and returns a function that cancels it. The default uses
 * `setTimeout` with `unref()` (a limiter never holds a process open); a simulation passes its own.
 */
export type Scheduler = (run: () => void, delayMs: number) => () => void;

/** The default {@link Scheduler}: `setTimeout`, unref'd. */
export const timerScheduler: Scheduler = (run, delayMs) => {
  const timer = setTimeout(run, delayMs);
  if (typeof timer === "object" && typeof timer.unref === "function") timer.unref();
  return () => clearTimeout(timer);
};

/**
 * The call timeouts' {@link Scheduler} by default: `setTimeout` (unref'd) whose run waits one more
 * turn of the event loop (`setImmediate`), for the reason `StoreLimiter.timed` gives.
 */
export const deferredTimerScheduler: Scheduler = (run, delayMs) => {
  let cancelled = false;
  const cancel = timerScheduler(() => {
    setImmediate(() => {
      if (!cancelled) run();
    });
  }, delayMs);
  return () => {
    cancelled = true;
    cancel();
  };
};
