import { readClock } from "../algorithms/time.js";
import { checkCost, checkNumber } from "../errors.js";
import type { Clock, Decision } from "../limiter.js";
import { StoreLimiter } from "../store/limiter.js";
import { type LocalClass, type LocalLimiter, localLimiter } from "../store/local.js";
import { type RedisKey, type RedisLike, redisKey } from "./client.js";
import { checkEvictionPolicy } from "./maxmemory.js";
import type { Common } from "./options.js";
import { replyArray, replyNumber } from "./reply.js";
import { runScript, Script } from "./script.js";
import { runDecision } from "./server-clock.js";

/** The in-memory twin of a Redis limiter, for the `'local'` failure policy. */
export interface LocalTwin {
  /** The in-memory class of the same algorithm (the catalog's `Class` for its id). */
  readonly Class: LocalClass<never>;
  /** Its validated options (the algorithm's, without `clock`). */
  readonly options: object;
}

/** A {@link LocalTwin}, typed: `options` must be what `Class` takes. */
export function localTwin<O extends object>(Class: LocalClass<O>, options: O): LocalTwin {
  return { Class: Class as LocalClass<never>, options };
}

/**
 * The Redis half of the five Redis limiters: one script call per decision, keyed
 * `<prefix><keyspace>:<key>`, on Redis's clock or an explicit one. Everything
 * store-neutral (checks, timeout, circuits, the failure policy, the hooks) is in
 * `StoreLimiter` (src/store/limiter.ts). A subclass supplies its script and the decoding
 * of the script's reply (with its algorithm's pure decision function); its validated
 * options reach the script through the constructor.
 */
export abstract class RedisLimiter extends StoreLimiter<"redis", RedisKey> {
  /** The connection adapter. */
  readonly client: RedisLike;
  /** Prepended to every key. */
  readonly prefix: string;
  /**
   * Between the prefix and the caller's key (`<prefix><keyspace>:<key>`): the fingerprint
   * of the algorithm and its state-defining options, or the pinned `keyspace` option.
   */
  readonly keyspace: string;
  /** Cap on a key's time to live, in whole milliseconds. */
  readonly maxTtlMs: number;
  /** The explicit clock, if any (tests and replays); otherwise Redis's `TIME` decides. */
  readonly clock: Clock | undefined;

  /** @internal `prefix + keyspace + ":"`, before every caller's key. */
  private readonly keyPrefix: string;
  /** @internal */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal The algorithm's one decision script. */
  protected abstract readonly script: Script;
  /** @internal The algorithm's refund script (`undefined`: the limiter cannot refund yet). */
  protected abstract readonly refundScript: Script | undefined;
  /** @internal The algorithm's block script (`undefined`: the limiter cannot block yet). */
  protected abstract readonly blockScript: Script | undefined;
  /** @internal The script's arguments before `cost, take, now, maxTtl`: the algorithm's options. */
  private config: readonly string[];
  /** @internal ARGV after maxTtlMs, before the deadline: a bucket's initial units. */
  private extra: readonly string[];
  /** @internal The in-memory twin, for `'local'`. */
  local: LocalTwin;

  /**
   * @internal
   * @param common The validated common options.
   * @param size `limit` or `capacity`.
   * @param config The algorithm's validated numeric options, in the script's ARGV order.
   * @param extra Numbers the scripts read after maxTtlMs (`ARGV[7]`): a bucket's initial units.
   * @param local The in-memory class and options, for the `'local'` failure policy.
   */
  protected constructor(
    common: Common,
    size: number,
    config: readonly number[],
    local: LocalTwin,
    extra: readonly number[] = [],
  ) {
    const clock = common.clock;
    super(
      "redis",
      "Redis",
      common,
      size,
      (): LocalLimiter => localLimiter(local.Class as LocalClass<object>, local.options, clock),
    );
    this.client = common.client;
    this.prefix = common.prefix;
    this.keyspace = common.keyspace;
    this.keyPrefix = `${common.prefix}${common.keyspace}:`;
    this.maxTtlMs = common.maxTtlMs;
    this.clock = clock;
    this.config = config.map(String);
    this.extra = extra.map(String);
    this.local = local;
  }

  /** @internal */
  protected storeKey(key: string): RedisKey {
    return redisKey(this.keyPrefix, key);
  }

  /** @internal The node serving `key`, from the client's `nodeOf` (a cluster), if it has one. */
  protected override nodeOf(key: RedisKey): string | undefined {
    return this.client.nodeOf?.(key);
  }

  /** @internal The time argument: the explicit clock's reading (held at its high-water mark), or "" for `TIME`. */
  private timeArg(where: string): string {
    if (this.clock === undefined) return "";
    this.seenMs = readClock(where, this.clock, this.seenMs);
    return String(this.seenMs);
  }

  /** @internal One decision: `config..., cost, take, now, maxTtl` (and the deadline, server-clock.ts). */
  protected prepare(
    where: string,
    key: RedisKey,
    cost: number,
    take: boolean,
  ): () => Promise<unknown> {
    const args = this.args(where, cost, take);
    checkEvictionPolicy(this.client);
    return () => runDecision(this.client, this.script, [key], args, this.timeoutMs);
  }

  /**
   * Gives back `cost` units (default 1) `key` took earlier, by the algorithm's refund rule
   * (docs/semantics.md#refunds), atomically in Redis: never past the fresh state; a key
   * without state is left as it is. The `'local'` policy's limiter, if built, is refunded
   * too. Sent once with the call's deadline: when Redis fails, times out or the circuit is
   * open it rejects with {@link RateLimitStoreError} whatever the policy, and a refund that
   * timed out was not applied late (docs/redis.md#refunds-and-blocks).
   * @throws {TypeError} (rejects) For a non-string key or a non-number cost.
   * @throws {RangeError} (rejects) For NaN, a negative or an infinite cost.
   */
  async refund(key: string, cost?: number): Promise<void> {
    const where = `${this.where}.refund`;
    const k = this.checkKey(where, key);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    const script = this.refundScript;
    if (script === undefined) {
      throw new TypeError(`${where}: not available for this algorithm in Redis yet`);
    }
    if (c === 0) return;
    this.builtLocal()?.refund(key, c);
    const args = this.args(where, c, false);
    await this.write("refund", key, k, () =>
      runDecision(this.client, script, [k], args, this.timeoutMs),
    );
  }

  /**
   * Blocks `key` for `durationMs` from now (a ban after abuse), in Redis, for every process:
   * each of its requests is denied, with `retryAfterMs` and `resetAfterMs` at least the time
   * left, until then; its usage is kept and decides again afterwards. A block that ends later
   * already in place stays. The block is part of the key's value (the decision reads it in
   * the same `GET`, in the same cluster slot) and the key lives until the block ends. The
   * `'local'` policy's limiter, if built, blocks the key too. Resolves with the ms the key is
   * blocked from now; rejects as {@link refund} when Redis cannot answer.
   * @throws {TypeError} (rejects) For a non-string key or a non-number duration.
   * @throws {RangeError} (rejects) If `durationMs` is not a finite number > 0.
   */
  block(key: string, durationMs: number): Promise<number> {
    return this.sendBlock("block", key, durationMs, false);
  }

  /**
   * {@link block}, except that a block in place is kept as it is (neither extended nor
   * shortened): what the HTTP middleware's `blockDurationMs` calls for a denied request, so
   * that requests during a block do not extend it. Resolves with the ms the key is blocked
   * from now (the block in place, or the new one).
   */
  blockOnce(key: string, durationMs: number): Promise<number> {
    return this.sendBlock("block", key, durationMs, true);
  }

  /** @internal */
  private async sendBlock(
    operation: "block",
    key: string,
    durationMs: number,
    keep: boolean,
  ): Promise<number> {
    const where = `${this.where}.${keep ? "blockOnce" : operation}`;
    const k = this.checkKey(where, key);
    const ms = checkNumber(where, "durationMs", durationMs, 0, false);
    const script = this.blockScript;
    if (script === undefined) {
      throw new TypeError(`${where}: not available for this algorithm in Redis yet`);
    }
    const local = this.builtLocal();
    if (local !== undefined && !(keep && local.peek(key, 0).allowed === false)) {
      local.block(key, ms);
    }
    const args = this.args(where, ms, keep);
    const reply = await this.write(operation, key, k, () =>
      runDecision(this.client, script, [k], args, this.timeoutMs),
    );
    return replyNumber(replyArray(reply, 2)[0]);
  }

  /**
   * @internal For `reconfigure`: the algorithm's new validated numbers (in the script's ARGV
   * order), its `limit` or `capacity`, and its in-memory twin. The keyspace stays: the same
   * keys are read with the new numbers from the next call. The `'local'` policy's limiter,
   * if built, is reconfigured keeping its state; one built later takes the new options.
   */
  protected retune(
    size: number,
    config: readonly number[],
    local: LocalTwin,
    extra: readonly number[] = [],
  ): void {
    this.builtLocal()?.reconfigure(local.options);
    const clock = this.clock;
    this.setMakeLocal(() => localLimiter(local.Class as LocalClass<object>, local.options, clock));
    this.setSize(size);
    this.config = config.map(String);
    this.extra = extra.map(String);
    this.local = local;
  }

  /** @internal A script's ARGV before the deadline: `config..., cost, take, now, maxTtl, extra...`. */
  private args(where: string, cost: number, take: boolean): string[] {
    return [
      ...this.config,
      String(cost),
      take ? "1" : "0",
      this.timeArg(where),
      String(this.maxTtlMs),
      ...this.extra,
    ];
  }

  /** @internal */
  protected prepareReset(key: RedisKey): () => Promise<unknown> {
    return () => runScript(this.client, RESET_SCRIPT, [key], []);
  }

  /** @internal Builds the decision from the script's reply. @throws {TypeError} on a malformed reply. */
  protected abstract override decode(reply: unknown, cost: number): Decision;

  /**
   * Changes the algorithm's numbers live, from the next call (each class documents its
   * options): the keyspace stays. See docs/redis.md#changing-limits-live.
   * @throws {TypeError} For an unknown option. {RangeError} For one out of range.
   */
  abstract reconfigure(options: object): void;
}

/** `reset`: deletes the key (UNLINK: a large sliding log is freed off Redis's main thread). */
export const RESET_SCRIPT = new Script("reset", "return redis.call('UNLINK', KEYS[1])");

/**
 * The denial of a blocked key, as `KeyedLimiter` answers it: `decide(cost)` is what the
 * state alone would answer; `retryAfterMs` and `resetAfterMs` are at least `leftMs`, the
 * time left of the block, and `remaining` is 0.
 */
export function blockedDecision(
  decide: (cost: number) => Decision,
  cost: number,
  leftMs: number,
): Decision {
  const state = decide(cost);
  const reset = state.allowed ? decide(0).resetAfterMs : state.resetAfterMs;
  return {
    allowed: false,
    limit: state.limit,
    remaining: 0,
    retryAfterMs: state.retryAfterMs > leftMs ? state.retryAfterMs : leftMs,
    resetAfterMs: reset > leftMs ? reset : leftMs,
  };
}
