import { checkClock, checkNumber, describe } from "../errors.js";
import type { Clock } from "../limiter.js";
import { notRedisLike, type RedisLike } from "./client.js";
import { checkKeyspace } from "./keyspace.js";
import type {
  FailurePolicy,
  FallbackLimiter,
  StoreFailureEvent,
  StoreRecoveryEvent,
} from "./policy.js";

/** Options every Redis limiter takes besides its algorithm's own. */
export interface RedisLimiterOptions {
  /** The connection, through an adapter: `fromIoredis(client)`, `fromNodeRedis(client)`. */
  readonly client: RedisLike;
  /**
   * Prepended to every key (binary-safe). A key is `<prefix><keyspace>:<key>`, so
   * limiters with different options never share keys even under one prefix; a prefix of
   * your own separates applications or environments on one server.
   * @default `'tollgate:<algorithm>:'` with a short algorithm code: `tb`, `lb`, `fw`,
   *   `swl`, `swc` (`'tollgate:tb:'` for a token bucket)
   */
  readonly prefix?: string | undefined;
  /**
   * The part of the key between the prefix and the caller's key. By default a fingerprint
   * of the algorithm and the options that define its state (8 hex digits of FNV-1a over
   * the algorithm, `capacity` and the rate, or `limit` and `windowMs`, and whether
   * Redis's or an explicit clock stamps the state): processes whose limiters have the same
   * algorithm and options share keys, and limiters that differ do not. Pin it (any
   * non-empty string) to keep the state when the options change on purpose, such as a
   * deploy that raises `capacity`: the new limiter then reads the old state with the new
   * options (a bucket's stored level is kept and capped at the new capacity, a window's
   * count is judged against the new limit). Only pin it for the same algorithm.
   * @default the fingerprint, e.g. `'3f9a0c1e'`
   */
  readonly keyspace?: string | undefined;
  /**
   * Longest wait for Redis per call, in milliseconds (> 0); then the call counts as a
   * failure. The command itself is not cancelled: a client that queues commands while
   * disconnected may still run it later and take units then. To fail fast instead,
   * turn the client's offline queue off (ioredis `enableOfflineQueue: false`,
   * node-redis `disableOfflineQueue: true`). @default 1000
   */
  readonly timeoutMs?: number | undefined;
  /** What to do when Redis fails; see {@link FailurePolicy}. @default 'throw' */
  readonly failure?: FailurePolicy | undefined;
  /** Called once for every call Redis failed, before the policy answers. */
  readonly onError?: ((event: StoreFailureEvent) => void) | undefined;
  /** Called at the first call Redis answers after one or more failures. */
  readonly onRecover?: ((event: StoreRecoveryEvent) => void) | undefined;
  /**
   * Cap on a key's time to live, in milliseconds (> 0). Keys expire exactly when
   * their state becomes fresh (rounded up to Redis's whole milliseconds); only state
   * that would stay in use longer (a rate of 0, or a refill slower than this) is cut to
   * this cap, the one lossy case. With an explicit `clock`, keys live this long after
   * their last write.
   * @default 31_536_000_000 (365 days)
   */
  readonly maxTtlMs?: number | undefined;
  /**
   * Explicit time in milliseconds, sent to the script instead of the server's `TIME`.
   * For tests and replays only: with it, each caller's clock decides, and since Redis
   * cannot tell when that clock makes a key idle, keys live `maxTtlMs` after their last
   * write. Leave it unset in production (all callers then share Redis's clock).
   * @default undefined (the Redis server's clock)
   */
  readonly clock?: Clock | undefined;
}

/** The option names of {@link RedisLimiterOptions}, in every Redis limiter's list. */
export const REDIS_OPTIONS = [
  "client",
  "prefix",
  "keyspace",
  "timeoutMs",
  "failure",
  "onError",
  "onRecover",
  "maxTtlMs",
  "clock",
] as const satisfies readonly (keyof RedisLimiterOptions)[];

const WRAP = 'use "client" with a wrapped client: fromIoredis(redis) or fromNodeRedis(redis)';
/** Hints for the names of rate-limiter-flexible and rate-limit-redis. */
export const REDIS_HINTS: Readonly<Record<string, string>> = {
  storeClient: WRAP,
  redis: WRAP,
  sendCommand: WRAP,
  keyPrefix: 'use "prefix"',
  insuranceLimiter: 'use "failure" with a fallback limiter',
  failOpen: 'use failure: "allow" (fail open), "deny" (fail closed) or a fallback limiter',
  passOnStoreError: 'use failure: "allow" (fail open), "deny" (fail closed) or a fallback limiter',
  nameSpace: 'use "prefix"',
  timeout: 'use "timeoutMs" (milliseconds)',
};

/**
 * The short code of an algorithm in the default prefix: the initials of its catalog id
 * (`token-bucket` → `tb`, `sliding-window-log` → `swl`). test/redis/catalog.test.ts checks
 * that no two twins share one.
 */
function codeOf(algorithm: string): string {
  return algorithm
    .split("-")
    .map((word) => word.charAt(0))
    .join("");
}

const DEFAULT_TIMEOUT_MS = 1000;
const DEFAULT_MAX_TTL_MS = 365 * 24 * 3600 * 1000;
/** Largest TTL sent to Redis, so `PEXPIRE` never overflows. */
const TTL_CAP_MS = 2 ** 47;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The validated common options. */
export interface Common {
  readonly client: RedisLike;
  readonly prefix: string;
  readonly keyspace: string;
  readonly timeoutMs: number;
  readonly failure: FailurePolicy;
  readonly onError: ((event: StoreFailureEvent) => void) | undefined;
  readonly onRecover: ((event: StoreRecoveryEvent) => void) | undefined;
  readonly maxTtlMs: number;
  readonly clock: Clock | undefined;
}

/**
 * Validates the common options after the algorithm's own, in the order listed in
 * {@link RedisLimiterOptions}, and computes the keyspace from `algorithm` and `state`
 * (the validated options that define the state) unless it is pinned.
 * @throws {TypeError} For a wrong type; {RangeError} for a number out of range.
 */
export function checkRedisOptions(
  where: string,
  o: RedisLimiterOptions,
  algorithm: string,
  state: Readonly<Record<string, number>>,
): Common {
  const client = o.client as unknown;
  if (
    typeof client !== "object" ||
    client === null ||
    typeof (client as RedisLike).evalSha !== "function" ||
    typeof (client as RedisLike).evalScript !== "function"
  ) {
    throw new TypeError(notRedisLike(where, client));
  }
  const prefix = o.prefix === undefined ? `tollgate:${codeOf(algorithm)}:` : o.prefix;
  if (typeof prefix !== "string") {
    throw new TypeError(`${where}: prefix must be a string, got ${describe(prefix)}`);
  }
  const keyspace = checkKeyspace(where, o.keyspace, {
    algorithm,
    state,
    clock: o.clock === undefined ? "server" : "caller",
  });
  const timeoutMs =
    o.timeoutMs === undefined
      ? DEFAULT_TIMEOUT_MS
      : checkNumber(where, "timeoutMs", o.timeoutMs, 0, false);
  if (timeoutMs > MAX_TIMER_MS) {
    throw new RangeError(`${where}: timeoutMs must be at most ${MAX_TIMER_MS}, got ${timeoutMs}`);
  }
  const failure = checkFailure(where, o.failure);
  const onError = checkHook<(event: StoreFailureEvent) => void>(where, "onError", o.onError);
  const onRecover = checkHook<(event: StoreRecoveryEvent) => void>(where, "onRecover", o.onRecover);
  const maxTtlMs =
    o.maxTtlMs === undefined
      ? DEFAULT_MAX_TTL_MS
      : checkNumber(where, "maxTtlMs", o.maxTtlMs, 0, false);
  const clock = checkClock<Clock | undefined>(where, o.clock, undefined);
  return {
    client: client as RedisLike,
    prefix,
    keyspace,
    timeoutMs,
    failure,
    onError,
    onRecover,
    maxTtlMs: Math.min(Math.ceil(maxTtlMs), TTL_CAP_MS),
    clock,
  };
}

function checkFailure(where: string, failure: unknown): FailurePolicy {
  if (failure === undefined) return "throw";
  if (failure === "throw" || failure === "allow" || failure === "deny") return failure;
  if (
    typeof failure === "object" &&
    failure !== null &&
    typeof (failure as FallbackLimiter).consume === "function" &&
    typeof (failure as FallbackLimiter).peek === "function" &&
    typeof (failure as FallbackLimiter).reset === "function"
  ) {
    return failure as FallbackLimiter;
  }
  const message = `${where}: failure must be 'throw', 'allow', 'deny' or a fallback limiter (consume, peek, reset), got ${describe(failure)}`;
  throw typeof failure === "string" ? new RangeError(message) : new TypeError(message);
}

function checkHook<T>(where: string, name: string, hook: unknown): T | undefined {
  if (hook === undefined || typeof hook === "function") return hook as T | undefined;
  throw new TypeError(`${where}: ${name} must be a function, got ${describe(hook)}`);
}
