import {
  checkClock,
  checkInteger,
  checkNumber,
  checkOptionNames,
  hasMethods,
  mustBe,
  type RequiredOptions,
} from "../../core/errors.js";
import { type Clock, systemClock } from "../../core/limiter.js";
import { bucketHints, optionNames } from "../../core/option-names.js";
import { checkFailure, checkHook } from "../../store/options.js";
import type { RedisLike } from "../client.js";
import {
  checkRedisOptions,
  REDIS_HINTS,
  REDIS_OPTIONS,
  type RedisLimiterOptions,
} from "../options.js";
import type { FallbackLimiter } from "../policy.js";
import type { LeaseFailureEvent, LeaseRecoveryEvent, LeaseTableFullEvent } from "./events.js";
import { type LeaseStore, type Scheduler, timerScheduler } from "./exchange.js";

/**
 * What a {@link LeasedTokenBucket} does for a key whose lease ran out while Redis cannot answer (an
 * outage, a timeout, or a refused write such as `OOM` or `READONLY`):
 * - `'local'` (default): a local token bucket per key of `capacity / N` and `refillPerSecond / N`,
 *   starting at this process's share of what the shared bucket held when last seen (a drained key
 *   stays drained), N the processes counted by the heartbeats or `expectedProcesses`; a process the
 *   others may not have counted yet denies (`source: 'local'`). What it admits is charged to the
 *   shared bucket once Redis answers;
 * - `'open'` / `'closed'`: allow / deny (`source: 'open'` / `'closed'`; `'open'` is not charged);
 * - `'throw'`: the decision throws a `RateLimitStoreError`;
 * - a {@link FallbackLimiter}: decide with it (`source: 'local'`, not charged).
 */
export type LeaseFailurePolicy = "local" | "open" | "closed" | "throw" | FallbackLimiter;

/** Options of {@link LeasedTokenBucket}: those of `RedisTokenBucket` plus the lease options. */
export interface LeasedTokenBucketOptions
  extends Omit<
    RedisLimiterOptions,
    "client" | "failure" | "clock" | "onError" | "onRecover" | "circuit"
  > {
  /** The connection, through an adapter (`fromIoredis`, `fromNodeRedis`); required unless `store` is given. */
  readonly client?: RedisLike | undefined;
  /** Most tokens a key's shared bucket holds, and so the largest burst (> 0). */
  readonly capacity: number;
  /** Tokens added to the shared bucket per second (>= 0). */
  readonly refillPerSecond: number;
  /**
   * Units a key this process has not seen yet (no lease) may be admitted on credit before
   * its first lease arrives (>= 0), charged to the shared bucket with the next batch
   * whatever it holds (below zero, the refill repays it before anyone gets tokens). Bound:
   * at most `N x initialCredit` units per key above the shared bucket's own bound. 0: deny
   * until the first lease, never admitting more than the single shared bucket.
   * @default 1
   */
  readonly initialCredit?: number | undefined;
  /** Most tokens one lease holds for a key (> 0). @default Infinity (only `maxLeaseShare` caps) */
  readonly maxLeaseTokens?: number | undefined;
  /**
   * Most of `capacity` one process's lease of a key holds, as a share (> 0, <= 1), so that a
   * process does not sit on tokens others need. @default 0.2
   */
  readonly maxLeaseShare?: number | undefined;
  /**
   * How long a lease should last at the key's observed local rate, in ms (> 0): the target
   * lease is `rate x leaseHorizonMs`, capped. @default 1000
   */
  readonly leaseHorizonMs?: number | undefined;
  /** Refills wait this long to go out together, one round trip per batch (> 0, ms). @default 5 */
  readonly batchWindowMs?: number | undefined;
  /**
   * A key's lease is refilled in the background when it falls below this share of its
   * target (> 0, < 1). @default 0.25
   */
  readonly lowWaterShare?: number | undefined;
  /** A key unused this long gives its unused tokens back (> 0, ms). @default 2000 */
  readonly idleAfterMs?: number | undefined;
  /** A lease's unused tokens go back this long after it was granted (> 0, ms). @default 10_000 */
  readonly leaseTtlMs?: number | undefined;
  /**
   * A process counts as live this long after its last heartbeat (> 0, ms); heartbeats go
   * every third of it. @default 10_000
   */
  readonly heartbeatTtlMs?: number | undefined;
  /**
   * The number of processes that share the limit, if you know it (integer >= 1): the
   * `'local'` fallback divides by at least this, and a process the others have not counted
   * yet (started during an outage, or less than `heartbeatTtlMs / 3` x 1.25 before one)
   * falls back with this share (or the heartbeats' last count, if larger) instead of
   * denying. Too low, and N processes in an outage admit more than one shared bucket.
   * @default none: the heartbeats' count, and deny until counted
   */
  readonly expectedProcesses?: number | undefined;
  /**
   * Most keys in the local lease table (integer >= 1); a full table pushes out a settled
   * entry, and refuses a new key (`source: 'full'`) while none can go. @default 100_000
   */
  readonly maxKeys?: number | undefined;
  /** Longest key in UTF-16 code units (integer >= 1); longer keys throw. @default 512 */
  readonly maxKeyLength?: number | undefined;
  /**
   * Keep a record of tokens taken and given back (`taken`, `given`) in each key's hash, for
   * audits and tests. Recorded keys live `maxTtlMs` after their last write. @default false
   */
  readonly record?: boolean | undefined;
  /** What to do once a key's lease ran out while Redis fails. @default 'local' */
  readonly failure?: LeaseFailurePolicy | undefined;
  /** Called once for every lease call or heartbeat Redis failed. */
  readonly onError?: ((event: LeaseFailureEvent) => void) | undefined;
  /** Called at the first call Redis answered after failures. */
  readonly onRecover?: ((event: LeaseRecoveryEvent) => void) | undefined;
  /** Called when the table first refuses a new key (again only after it took one since). */
  readonly onTableFull?: ((event: LeaseTableFullEvent) => void) | undefined;
  /**
   * The process clock in ms for the local bookkeeping (rates, waits, idleness). The shared
   * bucket always runs on the server's `TIME`. @default performance.now
   */
  readonly clock?: Clock | undefined;
  /** The shared bucket, for simulations and tests; replaces `client`. @default the Redis store */
  readonly store?: LeaseStore | undefined;
  /** The timers, for simulations and tests. @default setTimeout, unref'd */
  readonly scheduler?: Scheduler | undefined;
}

export const WHERE = "LeasedTokenBucket";

const OPTIONS = optionNames<LeasedTokenBucketOptions>()([
  "capacity",
  "refillPerSecond",
  "initialCredit",
  "maxLeaseTokens",
  "maxLeaseShare",
  "leaseHorizonMs",
  "batchWindowMs",
  "lowWaterShare",
  "idleAfterMs",
  "leaseTtlMs",
  "heartbeatTtlMs",
  "expectedProcesses",
  "maxKeys",
  "maxKeyLength",
  "record",
  "onTableFull",
  "store",
  "scheduler",
  // No circuit: the leases already keep Redis off the decision path.
  ...REDIS_OPTIONS.filter((name): name is Exclude<typeof name, "circuit"> => name !== "circuit"),
]);

const HINTS = {
  ...bucketHints(WHERE, "refillPerSecond", "leakPerSecond"),
  ...REDIS_HINTS,
  credit: 'use "initialCredit"',
  leaseSize: 'use "maxLeaseTokens" or "maxLeaseShare"',
  batchMs: 'use "batchWindowMs"',
  circuit:
    "LeasedTokenBucket has no circuit: decisions never wait for Redis; a failed batch is retried after 100 to 250 ms",
};

/**
 * A share option (`maxLeaseShare`, `lowWaterShare`): a number > 0 and at most 1 (`upToOne`)
 * or below 1; one message for every value out of that range, 0 and NaN included.
 */
function share(name: string, value: unknown, fallback: number, of: string, upToOne: boolean) {
  if (value === undefined) return fallback;
  if (typeof value === "number" && value > 0 && (upToOne ? value <= 1 : value < 1)) return value;
  throw mustBe(WHERE, name, `a share of ${of} > 0 and ${upToOne ? "<= 1" : "< 1"}`, value);
}

/** The options a `LeasedTokenBucket` cannot do without, and a call that gives them. */
const REQUIRED: RequiredOptions = {
  names: ["client", "capacity", "refillPerSecond"],
  example: `new ${WHERE}({ client: fromIoredis(redis), capacity: 100, refillPerSecond: 50 })`,
};
/** The same with a `store` in place of the client (a simulation, a test). */
const REQUIRED_STORE: RequiredOptions = {
  names: ["capacity", "refillPerSecond"],
  example: `new ${WHERE}({ store, capacity: 100, refillPerSecond: 50 })`,
};

/** The validated options. */
export type LeaseConfig = ReturnType<typeof checkLeaseOptions>;

/**
 * Validates the options in the order of {@link LeasedTokenBucketOptions}.
 * @throws {TypeError} For an unknown option or a wrong type; {RangeError} out of range.
 */
export function checkLeaseOptions(o: LeasedTokenBucketOptions) {
  checkOptionNames(WHERE, o, OPTIONS, HINTS, o.store === undefined ? REQUIRED : REQUIRED_STORE);
  const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
  const refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
  const initialCredit = checkNumber(WHERE, "initialCredit", o.initialCredit, 0, true, 1);
  const maxLeaseTokens: unknown =
    o.maxLeaseTokens === undefined ? Number.POSITIVE_INFINITY : o.maxLeaseTokens;
  if (!(typeof maxLeaseTokens === "number" && maxLeaseTokens > 0)) {
    const range = "a number > 0 (Infinity: only maxLeaseShare caps a lease)";
    throw mustBe(WHERE, "maxLeaseTokens", range, maxLeaseTokens);
  }
  const maxLeaseShare = share("maxLeaseShare", o.maxLeaseShare, 0.2, "capacity", true);
  const leaseHorizonMs = checkNumber(WHERE, "leaseHorizonMs", o.leaseHorizonMs, 0, false, 1000);
  const batchWindowMs = checkNumber(WHERE, "batchWindowMs", o.batchWindowMs, 0, false, 5);
  const lowWaterShare = share("lowWaterShare", o.lowWaterShare, 0.25, "the lease", false);
  const idleAfterMs = checkNumber(WHERE, "idleAfterMs", o.idleAfterMs, 0, false, 2000);
  const leaseTtlMs = checkNumber(WHERE, "leaseTtlMs", o.leaseTtlMs, 0, false, 10_000);
  const heartbeatTtlMs = checkNumber(WHERE, "heartbeatTtlMs", o.heartbeatTtlMs, 0, false, 10_000);
  const expectedProcesses =
    o.expectedProcesses === undefined
      ? undefined
      : checkInteger(WHERE, "expectedProcesses", o.expectedProcesses, 1, 2 ** 20);
  const maxKeys = checkInteger(WHERE, "maxKeys", o.maxKeys, 1, 2 ** 30, 100_000);
  const maxKeyLength = checkInteger(WHERE, "maxKeyLength", o.maxKeyLength, 1, 16_383, 512);
  if (o.record !== undefined && typeof o.record !== "boolean") {
    throw mustBe(WHERE, "record", "a boolean", o.record, TypeError);
  }
  const store = o.store as unknown;
  if (store !== undefined && !hasMethods(store, "groupOf", "exchange", "heartbeat")) {
    throw mustBe(WHERE, "store", "a LeaseStore (groupOf, exchange, heartbeat)", store, TypeError);
  }
  const scheduler = checkHook<Scheduler>(WHERE, "scheduler", o.scheduler) ?? timerScheduler;
  if (store !== undefined && o.client !== undefined) {
    throw new TypeError(`${WHERE}: give either client or store, not both`);
  }
  // The common Redis options, with the lease policy, hooks and the process clock checked here.
  const { failure, clock, onError, onRecover, ...common } = o;
  const state = { capacity, refillPerSecond };
  const redis =
    store === undefined
      ? checkRedisOptions(WHERE, common as RedisLimiterOptions, "leased-token-bucket", state)
      : undefined;
  return {
    capacity,
    refillPerSecond,
    initialCredit,
    /** The lease cap: `min(maxLeaseTokens, maxLeaseShare x capacity)`. */
    leaseCap: Math.min(maxLeaseTokens, maxLeaseShare * capacity),
    leaseHorizonMs,
    batchWindowMs,
    lowWaterShare,
    idleAfterMs,
    leaseTtlMs,
    heartbeatTtlMs,
    expectedProcesses,
    maxKeys,
    maxKeyLength,
    record: o.record === true,
    failure: checkFailure(WHERE, failure),
    onError: checkHook<(event: LeaseFailureEvent) => void>(WHERE, "onError", onError),
    onRecover: checkHook<(event: LeaseRecoveryEvent) => void>(WHERE, "onRecover", onRecover),
    onTableFull: checkHook<(e: LeaseTableFullEvent) => void>(WHERE, "onTableFull", o.onTableFull),
    clock: checkClock<Clock>(WHERE, clock, systemClock),
    scheduler,
    /** The Redis options, when no `store` was given. */
    redis,
    store: store as LeaseStore | undefined,
  };
}
