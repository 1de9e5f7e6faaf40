import { badClock, checkClock, checkCost, checkNumber, describe } from "../errors.js";
import type { Clock, Decision } from "../limiter.js";
import { wholeUnits } from "../numeric.js";
import { type RedisKey, type RedisLike, redisKey } from "./client.js";
import { RateLimitStoreError, StoreTimeoutError } from "./errors.js";
import { runScript, Script } from "./script.js";

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
interface Common {
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

/** Reads a number from a script reply: an integer, or a float sent as a `%.17g` string. */
export function replyNumber(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "string" || value instanceof Uint8Array) {
    const text = String(value);
    if (text === "inf") return Number.POSITIVE_INFINITY;
    if (text === "-inf") return Number.NEGATIVE_INFINITY;
    const n = Number(text);
    if (text !== "" && !Number.isNaN(n)) return n;
  }
  throw new TypeError(`unexpected reply element ${describe(value)}`);
}

/** The reply of a script as an array of at least `length` elements. */
export function replyArray(value: unknown, length: number): unknown[] {
  if (!Array.isArray(value) || value.length < length) {
    throw new TypeError(`unexpected reply ${describe(value)}`);
  }
  return value;
}

/**
 * The shared machinery of the five Redis limiters: validation of key and cost, one
 * script call per decision, the failure policy, and the hooks. A subclass supplies
 * its script, its fixed arguments and the decoding of the script's reply.
 */
export abstract class RedisLimiter {
  /** The connection adapter. */
  readonly client: RedisLike;
  /** Prepended to every key. */
  readonly prefix: string;
  /** Longest wait per call, in milliseconds. */
  readonly timeoutMs: number;
  /** What happens when Redis fails. */
  readonly failure: FailurePolicy;
  /** Cap on a key's time to live, in whole milliseconds. */
  readonly maxTtlMs: number;
  /** The explicit clock, if any (tests and replays); otherwise Redis's `TIME` decides. */
  readonly clock: Clock | undefined;

  private readonly onError: ((event: StoreFailureEvent) => void) | undefined;
  private readonly onRecover: ((event: StoreRecoveryEvent) => void) | undefined;
  private failedCalls = 0;
  private seenMs = Number.NEGATIVE_INFINITY;

  /** The class name, for messages. */
  protected abstract readonly where: string;
  /** The algorithm's one decision script. */
  protected abstract readonly script: Script;
  /** `limit` or `capacity`, for fail-open/closed decisions. */
  protected abstract readonly size: number;

  protected constructor(common: Common) {
    this.client = common.client;
    this.prefix = common.prefix;
    this.timeoutMs = common.timeoutMs;
    this.failure = common.failure;
    this.maxTtlMs = common.maxTtlMs;
    this.clock = common.clock;
    this.onError = common.onError;
    this.onRecover = common.onRecover;
  }

  /** The script's arguments before `cost, take, now, maxTtl`: the algorithm's options. */
  protected abstract configArgs(): readonly string[];

  /** Builds the decision from the script's reply. @throws {TypeError} on a malformed reply. */
  protected abstract decode(reply: unknown, cost: number, take: boolean): Decision;

  /**
   * `consume(key, cost).allowed`: resolves true when the request may proceed (its cost
   * was taken). Rejects like {@link consume}.
   */
  async allow(key: string, cost?: number): Promise<boolean> {
    return (await this.call("allow", key, cost, true)).allowed;
  }

  /**
   * Takes `cost` units from `key`'s shared state when they are available, atomically
   * in Redis, and resolves with the decision; a denied request changes nothing.
   * Rejects with `TypeError` for a non-string key or a non-number cost, `RangeError`
   * for NaN, a negative or an infinite cost, and {@link RateLimitStoreError} when Redis
   * fails and the policy is `'throw'`.
   */
  consume(key: string, cost?: number): Promise<RedisDecision> {
    return this.call("consume", key, cost, true);
  }

  /** What `consume(key, cost)` would answer now; changes nothing (also no expiry). */
  peek(key: string, cost?: number): Promise<RedisDecision> {
    return this.call("peek", key, cost, false);
  }

  /**
   * Deletes `key`'s state: back to fresh. Also resets the key in a fallback limiter.
   * Rejects with {@link RateLimitStoreError} when Redis fails, whatever the policy (a
   * reset that did not happen must not pass silently).
   */
  async reset(key: string): Promise<void> {
    const where = `${this.where}.reset`;
    const k = this.checkKey(where, key);
    if (typeof this.failure === "object") this.failure.reset(key);
    try {
      await runScript(this.client, RESET_SCRIPT, [k], [], this.timeoutMs);
    } catch (error) {
      throw this.report("reset", key, error, "throw");
    }
    this.recovered("reset");
  }

  private checkKey(where: string, key: unknown): RedisKey {
    if (typeof key !== "string") {
      throw new TypeError(`${where}: key must be a string, got ${describe(key)}`);
    }
    return redisKey(this.prefix, key);
  }

  /** The time argument: the explicit clock's reading (held at its high-water mark), or "" for `TIME`. */
  private timeArg(where: string): string {
    if (this.clock === undefined) return "";
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock(where, t);
    if (t > this.seenMs) this.seenMs = t;
    return String(this.seenMs);
  }

  private async call(
    operation: "allow" | "consume" | "peek",
    key: string,
    cost: number | undefined,
    take: boolean,
  ): Promise<RedisDecision> {
    const where = `${this.where}.${operation}`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    const args = [
      ...this.configArgs(),
      String(c),
      take ? "1" : "0",
      this.timeArg(where),
      String(this.maxTtlMs),
    ];
    let decision: Decision;
    try {
      decision = this.decode(
        await runScript(this.client, this.script, [k], args, this.timeoutMs),
        c,
        take,
      );
    } catch (error) {
      return this.fail(operation, key, c, take, error);
    }
    this.recovered(operation);
    return { ...decision, source: "redis" };
  }

  private recovered(operation: RedisOperation): void {
    if (this.failedCalls === 0) return;
    const failedCalls = this.failedCalls;
    this.failedCalls = 0;
    this.onRecover?.({ operation, failedCalls });
  }

  private report(
    operation: RedisOperation,
    key: string,
    cause: unknown,
    outcome: StoreFailureEvent["outcome"],
  ): RateLimitStoreError {
    const where = `${this.where}.${operation}`;
    const timedOut = cause instanceof StoreTimeoutError;
    const detail = cause instanceof Error ? cause.message : describe(cause);
    const error = new RateLimitStoreError(
      timedOut ? `${where}: ${detail}` : `${where}: Redis failed: ${detail}`,
      { cause, operation: where, timedOut },
    );
    this.failedCalls++;
    this.onError?.({ error, operation, key, outcome });
    return error;
  }

  private fail(
    operation: "allow" | "consume" | "peek",
    key: string,
    cost: number,
    take: boolean,
    cause: unknown,
  ): RedisDecision {
    const policy = this.failure;
    if (policy === "throw") throw this.report(operation, key, cause, "throw");
    if (policy === "allow") {
      this.report(operation, key, cause, "failOpen");
      return {
        allowed: true,
        limit: this.size,
        remaining: wholeUnits(this.size - cost, this.size),
        retryAfterMs: 0,
        resetAfterMs: 0,
        source: "failOpen",
      };
    }
    if (policy === "deny") {
      this.report(operation, key, cause, "failClosed");
      return {
        allowed: false,
        limit: this.size,
        remaining: 0,
        retryAfterMs: FAIL_CLOSED_RETRY_AFTER_MS,
        resetAfterMs: 0,
        source: "failClosed",
      };
    }
    this.report(operation, key, cause, "fallback");
    const local = take ? policy.consume(key, cost) : policy.peek(key, cost);
    return { ...local, source: "fallback" };
  }
}

/** `reset`: deletes the key. */
export const RESET_SCRIPT = new Script("reset", "return redis.call('DEL', KEYS[1])");
