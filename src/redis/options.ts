import { checkClock, checkNumber, hasMethods, mustBe } from "../core/errors.js";
import type { Clock } from "../core/limiter.js";
import {
  checkStoreOptions,
  STORE_OPTIONS,
  type StoreCommon,
  type StoreLimiterOptions,
} from "../store/options.js";
import { notRedisLike, type RedisLike } from "./client.js";
import { checkKeyspace } from "./keyspace.js";

/**
 * Options every Redis limiter takes besides its algorithm's own: the store-neutral ones
 * ({@link StoreLimiterOptions}: `timeoutMs`, `failure`, `onError`, `onRecover`, `circuit`),
 * and Redis's.
 */
export interface RedisLimiterOptions extends StoreLimiterOptions {
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
   * The part of the key between the prefix and the caller's key. By default a fingerprint of the
   * algorithm and the options that define its state (8 hex digits of FNV-1a over the algorithm,
   * `capacity` and the rate, or `limit` and `windowMs`, and whether Redis's or an explicit clock
   * stamps the state): processes whose limiters have the same algorithm and options share keys, and
   * limiters that differ do not. Pin it (any non-empty string) to keep the state when the options
   * change on purpose, such as a deploy that raises `capacity`: the new limiter then reads the old
   * state with the new options (a bucket's stored level is kept and capped at the new capacity, a
   * window's count is judged against the new limit). Only pin it for the same algorithm.
   * @default the fingerprint, e.g. `'3f9a0c1e'`
   */
  readonly keyspace?: string | undefined;
  /**
   * Cap on a key's time to live, in milliseconds (> 0). Keys expire exactly when
   * their state becomes fresh (rounded up to Redis's whole milliseconds); only state
   * that would stay in use longer (a rate of 0, or a refill slower than this) is cut to
   * this cap, the one lossy case. With an explicit `clock`, it caps the time a key lives
   * after its last write (until fresh on the server's clock, at least 60 s).
   * @default 31_536_000_000 (365 days)
   */
  readonly maxTtlMs?: number | undefined;
  /**
   * Explicit time in milliseconds, sent to the script instead of the server's `TIME`. For tests and
   * replays only: with it, each caller's clock decides, and since Redis cannot tell when that clock
   * makes a key idle, a key lives until its state is fresh counted on the server's clock from its
   * last write, at least 60 s (so a test's frozen clock keeps its state), at most `maxTtlMs`. Leave
   * it unset in production (all callers then share Redis's clock).
   * @default undefined (the Redis server's clock)
   */
  readonly clock?: Clock | undefined;
}

/** The option names of {@link RedisLimiterOptions}, in every Redis limiter's list. */
export const REDIS_OPTIONS = [
  "client",
  "prefix",
  "keyspace",
  ...STORE_OPTIONS,
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
  insuranceLimiter:
    'use "failure" with a fallback limiter (the default, "local", is the same limit in memory)',
  failOpen:
    'use failure: "open" (fail open), "closed" (fail closed), "local" (the default) or a fallback limiter',
  passOnStoreError:
    'use failure: "open" (fail open), "closed" (fail closed), "local" (the default) or a fallback limiter',
  nameSpace: 'use "prefix"',
  timeout: 'use "timeoutMs" (milliseconds)',
};

/**
 * The short code of an algorithm in the default prefix: the initials of its catalog id
 * (`token-bucket` → `tb`, `sliding-window-log` → `swl`). test/redis/catalog.test.ts checks
 * that no two twins share one.
 */
function codeOf(algorithm: string): string {
  return algorithm.replace(/(^|-)(.)[^-]*/g, "$2");
}

/**
 * `maxTtlMs` when not given: a year. The limiters send it to the scripts as `''` (the scripts
 * hold the same number), which spares Redis one number parse per call.
 */
export const DEFAULT_MAX_TTL_MS = 365 * 24 * 3600 * 1000;
/** Largest TTL sent to Redis, so `PEXPIRE` never overflows. */
const TTL_CAP_MS = 2 ** 47;

/** The validated common options. */
export interface Common extends StoreCommon {
  readonly client: RedisLike;
  readonly prefix: string;
  readonly keyspace: string;
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
  if (!hasMethods(client, "evalSha", "evalScript"))
    throw new TypeError(notRedisLike(where, client));
  const prefix = o.prefix === undefined ? `tollgate:${codeOf(algorithm)}:` : o.prefix;
  if (typeof prefix !== "string") throw mustBe(where, "prefix", "a string", prefix, TypeError);
  const stamp = o.clock === undefined ? "server" : "caller";
  const keyspace = checkKeyspace(where, o.keyspace, { algorithm, state, clock: stamp });
  const store = checkStoreOptions(where, o);
  const maxTtlMs = checkNumber(where, "maxTtlMs", o.maxTtlMs, 0, false, DEFAULT_MAX_TTL_MS);
  const clock = checkClock<Clock | undefined>(where, o.clock, undefined);
  return {
    client: client as RedisLike,
    prefix,
    keyspace,
    ...store,
    maxTtlMs: Math.min(Math.ceil(maxTtlMs), TTL_CAP_MS),
    clock,
  };
}
