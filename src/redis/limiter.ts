import { readClock } from "../algorithms/time.js";
import { checkCost, describe } from "../errors.js";
import type { Clock, Decision } from "../limiter.js";
import { wholeUnits } from "../numeric.js";
import { type RedisKey, type RedisLike, redisKey } from "./client.js";
import { RateLimitStoreError, StoreTimeoutError } from "./errors.js";
import type { Common } from "./options.js";
import {
  FAIL_CLOSED_RETRY_AFTER_MS,
  type FailurePolicy,
  type RedisDecision,
  type RedisOperation,
  type StoreFailureEvent,
  type StoreRecoveryEvent,
} from "./policy.js";
import { runScript, Script } from "./script.js";

/**
 * The shared machinery of the five Redis limiters: validation of key and cost, one
 * script call per decision, the failure policy, and the hooks. A subclass supplies
 * its script and the decoding of the script's reply (with its algorithm's pure
 * decision function); its validated options reach the script through the constructor.
 */
export abstract class RedisLimiter {
  /** The connection adapter. */
  readonly client: RedisLike;
  /** Prepended to every key. */
  readonly prefix: string;
  /**
   * Between the prefix and the caller's key (`<prefix><keyspace>:<key>`): the fingerprint
   * of the algorithm and its state-defining options, or the pinned `keyspace` option.
   */
  readonly keyspace: string;
  /** Longest wait per call, in milliseconds. */
  readonly timeoutMs: number;
  /** What happens when Redis fails. */
  readonly failure: FailurePolicy;
  /** Cap on a key's time to live, in whole milliseconds. */
  readonly maxTtlMs: number;
  /** The explicit clock, if any (tests and replays); otherwise Redis's `TIME` decides. */
  readonly clock: Clock | undefined;

  /** @internal `prefix + keyspace + ":"`, before every caller's key. */
  private readonly keyPrefix: string;
  /** @internal */
  private readonly onError: ((event: StoreFailureEvent) => void) | undefined;
  /** @internal */
  private readonly onRecover: ((event: StoreRecoveryEvent) => void) | undefined;
  /** @internal */
  private failedCalls = 0;
  /** @internal */
  private seenMs = Number.NEGATIVE_INFINITY;

  /** @internal The class name, for messages. */
  protected abstract readonly where: string;
  /** @internal The algorithm's one decision script. */
  protected abstract readonly script: Script;
  /** @internal `limit` or `capacity`, for fail-open/closed decisions. */
  protected readonly size: number;
  /** @internal The script's arguments before `cost, take, now, maxTtl`: the algorithm's options. */
  private readonly config: readonly string[];

  /**
   * @internal
   * @param common The validated common options.
   * @param size `limit` or `capacity`.
   * @param config The algorithm's validated numeric options, in the script's ARGV order.
   */
  protected constructor(common: Common, size: number, config: readonly number[]) {
    this.client = common.client;
    this.prefix = common.prefix;
    this.keyspace = common.keyspace;
    this.keyPrefix = `${common.prefix}${common.keyspace}:`;
    this.timeoutMs = common.timeoutMs;
    this.failure = common.failure;
    this.maxTtlMs = common.maxTtlMs;
    this.clock = common.clock;
    this.onError = common.onError;
    this.onRecover = common.onRecover;
    this.size = size;
    this.config = config.map(String);
  }

  /** @internal Builds the decision from the script's reply. @throws {TypeError} on a malformed reply. */
  protected abstract decode(reply: unknown, cost: number): Decision;

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

  /**
   * What `consume(key, cost)` would answer now; takes nothing and sets no expiry (the
   * sliding log may drop entries that already left, which changes no decision).
   */
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

  /** @internal */
  private checkKey(where: string, key: unknown): RedisKey {
    if (typeof key !== "string") {
      throw new TypeError(`${where}: key must be a string, got ${describe(key)}`);
    }
    return redisKey(this.keyPrefix, key);
  }

  /** @internal The time argument: the explicit clock's reading (held at its high-water mark), or "" for `TIME`. */
  private timeArg(where: string): string {
    if (this.clock === undefined) return "";
    this.seenMs = readClock(where, this.clock, this.seenMs);
    return String(this.seenMs);
  }

  /** @internal */
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
      ...this.config,
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
      );
    } catch (error) {
      return this.fail(operation, key, c, take, error);
    }
    this.recovered(operation);
    return { ...decision, source: "redis" };
  }

  /** @internal */
  private recovered(operation: RedisOperation): void {
    if (this.failedCalls === 0) return;
    const failedCalls = this.failedCalls;
    this.failedCalls = 0;
    this.onRecover?.({ operation, failedCalls });
  }

  /** @internal */
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

  /** @internal */
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
