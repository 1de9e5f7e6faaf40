import { checkClock, checkNumber, describe } from "../errors.js";
import type { Clock } from "../limiter.js";
import type { RedisLike } from "./client.js";
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
   * Prepended to every key (binary-safe); give limiters that must not share state
   * different prefixes. @default `'tollgate:<algorithm>:'`, e.g. `'tollgate:token-bucket:'`
   */
  readonly prefix?: string | undefined;
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
  readonly timeoutMs: number;
  readonly failure: FailurePolicy;
  readonly onError: ((event: StoreFailureEvent) => void) | undefined;
  readonly onRecover: ((event: StoreRecoveryEvent) => void) | undefined;
  readonly maxTtlMs: number;
  readonly clock: Clock | undefined;
}

/**
 * Validates the common options after the algorithm's own, in the order listed in
 * {@link RedisLimiterOptions}.
 * @throws {TypeError} For a wrong type; {RangeError} for a number out of range.
 */
export function checkRedisOptions(
  where: string,
  o: RedisLimiterOptions,
  defaultPrefix: string,
): Common {
  const client = o.client as unknown;
  if (
    typeof client !== "object" ||
    client === null ||
    typeof (client as RedisLike).evalSha !== "function" ||
    typeof (client as RedisLike).evalScript !== "function"
  ) {
    throw new TypeError(
      `${where}: client must be a RedisLike (wrap a client with fromIoredis or fromNodeRedis), got ${describe(client)}`,
    );
  }
  const prefix = o.prefix === undefined ? defaultPrefix : o.prefix;
  if (typeof prefix !== "string") {
    throw new TypeError(`${where}: prefix must be a string, got ${describe(prefix)}`);
  }
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
