import { randomUUID } from "node:crypto";
import { readClock } from "../algorithms/time.js";
import { blockedDenial } from "../core/blocks.js";
import { checkCost, checkNumber } from "../core/errors.js";
import { type Clock, type Decision, type Receipt, systemClock } from "../core/limiter.js";
import { checkReceipt } from "../core/receipt.js";
import { markBlocked, StoreLimiter } from "../store/limiter.js";
import { type LocalClass, type LocalLimiter, localLimiter } from "../store/local.js";
import { type RedisKey, type RedisLike, redisKey } from "./client.js";
import { checkEvictionPolicy } from "./maxmemory.js";
import { type Common, DEFAULT_MAX_TTL_MS } from "./options.js";
import { replyArray, replyNumber } from "./reply.js";
import { Script } from "./script.js";
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

  /** @internal The class name, for messages. */
  protected readonly where: string;
  /** @internal `prefix + keyspace + ":"`, before every caller's key. */
  private readonly keyPrefix: string;
  /** @internal */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal The algorithm's one decision script. */
  private readonly script: Script;
  /** @internal The algorithm's refund script. */
  private readonly refundScript: Script;
  /** @internal The algorithm's block script. */
  private readonly blockScript: Script;
  /** @internal The script's arguments before `cost, take, now, maxTtl`: the algorithm's options. */
  protected config: readonly string[] = [];
  /** @internal ARGV after maxTtlMs, before the deadline: a bucket's initial units. */
  private extra: readonly string[] = [];
  /** @internal The in-memory twin, for `'local'`. */
  local!: LocalTwin;

  /** @internal The subclass's constructor then gives its numbers to {@link retune}. */
  protected constructor(common: Common, where: string, scripts: readonly [Script, Script, Script]) {
    super("redis", "Redis", common, 0);
    this.where = where;
    [this.script, this.refundScript, this.blockScript] = scripts;
    this.client = common.client;
    this.prefix = common.prefix;
    this.keyspace = common.keyspace;
    this.keyPrefix = `${common.prefix}${common.keyspace}:`;
    this.maxTtlMs = common.maxTtlMs;
    this.clock = common.clock;
  }

  /** @internal The `'local'` policy's limiter: the in-memory twin on the explicit clock, if any. */
  protected makeLocal(): LocalLimiter {
    return localLimiter(this.local.Class as LocalClass<object>, this.local.options, this.clock);
  }

  /** @internal */
  protected storeKey(key: string): RedisKey {
    return redisKey(this.keyPrefix, key);
  }

  /** @internal The node serving `key`, from the client's `nodeOf` (a cluster), if it has one. */
  protected override nodeOf(key: RedisKey): string | undefined {
    return this.client.nodeOf?.(key);
  }

  /** @internal The block table's clock: the explicit clock, else `performance.now()`. */
  protected blockNow(): number {
    return this.clock === undefined
      ? systemClock()
      : readClock(this.where, this.clock, Number.NEGATIVE_INFINITY);
  }

  /** @internal The time argument: the explicit clock's reading (held at its high-water mark), or "" for `TIME`. */
  private timeArg(where: string): string {
    if (this.clock === undefined) return "";
    this.seenMs = readClock(where, this.clock, this.seenMs);
    return String(this.seenMs);
  }

  /**
   * @internal One decision: `config..., cost, take, now, maxTtl` (and the deadline,
   * server-clock.ts); a charge sends `take` as `c`, so that the reply carries the ledger.
   */
  protected prepare(
    where: string,
    key: RedisKey,
    cost: number,
    take: boolean,
    charge: boolean,
  ): () => Promise<unknown> {
    const args = this.args(where, cost, take);
    if (charge) args[this.config.length + 1] = "c";
    checkEvictionPolicy(this.client);
    return () => runDecision(this.client, this.script, [key], args, this.timeoutMs);
  }

  /**
   * Gives back units taken earlier, atomically in Redis, and resolves with how many came back
   * (docs/semantics.md#refunds). Through the receipt of a {@link charge}: `units` of what it took
   * (default: all it still holds), by the algorithm's receipt rule, decided in Redis from the key's
   * ledger (a fixed window's only while its window lasts, a counter's while its window is current
   * or previous, a bucket's at most the refill not yet repaid less the key's refunds since, a
   * sliding log's out of its own entry), nothing after a `reconfigure` since the charge, nor
   * (buckets, fixed window) a `reset(key)`. Without one: `cost` units (default 1) of `key` by the
   * rule without a receipt (a fixed window refuses: it cannot tell which window the units came
   * from); the `'local'` policy's limiter, if built, is refunded too. Never past the fresh state; a
   * key without state is left as it is. Sent once with the call's deadline: when Redis fails, times
   * out or the circuit is open it rejects with {@link RateLimitStoreError} whatever the policy, and
   * a refund that timed out was not applied late (docs/redis.md#refunds-and-blocks).
   * @throws {TypeError} (rejects) For a non-string key, a non-number cost or units, another
   *   limiter's receipt, or a fixed window's refund without a receipt.
   * @throws {RangeError} (rejects) For NaN, a negative or an infinite cost.
   */
  async refund(receipt: Receipt, units?: number): Promise<number>;
  async refund(key: string, cost?: number): Promise<number>;
  async refund(key: string | Receipt, cost?: number): Promise<number> {
    const where = `${this.where}.refund`;
    if (typeof key === "object" && key !== null) {
      const r = checkReceipt(where, key, this, cost);
      const c = r.receipt;
      if (r.units === 0 || c.epoch !== this.receiptEpoch) return 0;
      const k = this.checkKey(where, c.key);
      const args = this.args(where, r.units, false);
      const ledger = (c as { ledger?: string }).ledger ?? ""; // markCharge's, set by charge()
      args[this.config.length + 1] = `r${String(c.a)}${ledger === "" ? "" : `,${ledger}`}`;
      // The units asked are held on the receipt while Redis answers, so that a second
      // refund of it sent meanwhile asks only what is left, not the same units again.
      c.refunded += r.units;
      let given = 0;
      try {
        given = await this.send("refund", c.key!, k, args);
      } finally {
        c.refunded -= r.units - given;
      }
      return given;
    }
    const k = this.checkKey(where, key);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    if (!this.refundsWithoutReceipt) {
      throw new TypeError(
        `${where}: give the receipt of the charge (refund(receipt, units)): a fixed window cannot tell which window the units were charged in, and units of a window that has ended are gone`,
      );
    }
    if (c === 0) return 0;
    this.localLimiter?.refund(key, c);
    return this.send("refund", key, k, this.args(where, c, false));
  }

  /** @internal False for a fixed window: it refunds only through receipts. */
  protected readonly refundsWithoutReceipt: boolean = true;

  /**
   * Blocks `key` for `durationMs` from now (a ban after abuse), in Redis, for every process:
   * each of its requests is denied, with `retryAfterMs` and `resetAfterMs` at least the time
   * left, until then; its usage is kept and decides again afterwards. A block that ends later
   * already in place stays. The block is part of the key's value (the decision reads it in
   * the same `GET`, in the same cluster slot) and the key lives until the block ends. Every
   * failure policy denies the key too (docs/semantics.md#blocks). Resolves with the ms the key
   * is blocked from now; rejects as {@link refund} when Redis cannot answer.
   * @throws {TypeError} (rejects) For a non-string key or a non-number duration.
   * @throws {RangeError} (rejects) If `durationMs` is not a finite number > 0.
   */
  block(key: string, durationMs: number): Promise<number> {
    return this.sendBlock(key, durationMs, false);
  }

  /**
   * {@link block}, except that a block in place is kept as it is (neither extended nor
   * shortened): what the HTTP middleware's `blockDurationMs` calls for a denied request, so
   * that requests during a block do not extend it. Resolves with the ms the key is blocked
   * from now (the block in place, or the new one).
   */
  blockOnce(key: string, durationMs: number): Promise<number> {
    return this.sendBlock(key, durationMs, true);
  }

  /** @internal */
  private async sendBlock(key: string, durationMs: number, keep: boolean): Promise<number> {
    const where = `${this.where}.${keep ? "blockOnce" : "block"}`;
    const k = this.checkKey(where, key);
    const ms = checkNumber(where, "durationMs", durationMs, 0, false);
    // Recorded here at once, before the store is asked: every path of this limiter denies the
    // key from now on, the store healthy or not (docs/semantics.md#blocks).
    if (!(keep && this.blockedMs(key) > 0)) this.recordBlock(key, ms);
    const left = await this.send("block", key, k, this.args(where, ms, keep));
    if (left > 0) this.recordBlock(key, left); // the block in place, as the store has it
    return left;
  }

  /** @internal Sets a block the store lost again: a `blockOnce` of the time left, in the background. */
  protected override reassertBlock(key: string, k: RedisKey, leftMs: number): void {
    const args = this.args(`${this.where}.blockOnce`, leftMs, true);
    // Reported by its circuit; the table denies meanwhile.
    this.send("block", key, k, args).then(undefined, () => {});
  }

  /** @internal Sends a refund or a block ({@link write}): the reply's units given back or ms blocked. */
  private async send(
    operation: "refund" | "block",
    key: string,
    k: RedisKey,
    args: readonly string[],
  ): Promise<number> {
    const refund = operation === "refund";
    const script = refund ? this.refundScript : this.blockScript;
    const keys = refund ? [k, ...refundRecordKey(k)] : [k];
    const reply = await this.write(operation, key, k, () =>
      runDecision(this.client, script, keys, args, this.timeoutMs),
    );
    return replyNumber(replyArray(reply, 2)[0]);
  }

  /**
   * @internal For the constructor and `reconfigure`: the algorithm's validated numbers (in
   * the script's ARGV order), its `limit` or `capacity`, its in-memory twin (for the
   * `'local'` failure policy), and the numbers the scripts read after maxTtlMs (`ARGV[7]`: a
   * bucket's initial units). The keyspace stays: the same keys are read with the new numbers
   * from the next call. The `'local'` policy's limiter, if built, is reconfigured keeping its
   * state; one built later takes the new options.
   */
  protected retune(
    size: number,
    config: readonly number[],
    local: LocalTwin,
    extra: readonly number[] = [],
  ): void {
    this.receiptEpoch++;
    this.localLimiter?.reconfigure(local.options);
    this.size = size;
    this.config = config.map(String);
    this.extra = extra.map(String);
    this.local = local;
  }

  /** @internal A script's ARGV before the deadline: `config..., cost, take, now, maxTtl ('' = the default), extra...`. */
  private args(where: string, cost: number, take: boolean): string[] {
    return [
      ...this.config,
      String(cost),
      take ? "1" : "0",
      this.timeArg(where),
      // The default goes as '': the scripts hold it, and Redis parses one number less.
      this.maxTtlMs === DEFAULT_MAX_TTL_MS ? "" : String(this.maxTtlMs),
      ...this.extra,
    ];
  }

  /** @internal */
  protected prepareReset(key: RedisKey): () => Promise<unknown> {
    return () => runDecision(this.client, RESET_SCRIPT, [key], [], this.timeoutMs);
  }

  /**
   * Changes the algorithm's numbers live, from the next call (each class documents its
   * options): the keyspace stays. See docs/redis.md#changing-limits-live.
   * @throws {TypeError} For an unknown option. {RangeError} For one out of range.
   */
  abstract reconfigure(options: object): void;
}

/**
 * The key a refund call keeps its answer in until its deadline (src/redis/lua/refund.ts
 * `LUA_REFUND_RECORD`): a random id in `key`'s cluster slot, its hash tag (`{tag}`) or, without
 * one, the whole key as the tag. None (the refund goes unrecorded) for a key of raw bytes,
 * or one with a `}` but no hash tag, whose slot no such name shares.
 */
function refundRecordKey(key: RedisKey): RedisKey[] {
  if (typeof key !== "string") return [];
  const open = key.indexOf("{");
  const close = open === -1 ? -1 : key.indexOf("}", open + 1);
  const tag = close > open + 1 ? key.slice(open + 1, close) : key.includes("}") ? undefined : key;
  return tag === undefined ? [] : [`{${tag}}:tollgate-refund:${randomUUID()}`];
}

/**
 * `reset`: deletes the key (UNLINK: a large sliding log is freed off Redis's main thread)
 * unless past the deadline (ARGV[1], server-clock ms), as a decision (`luaArgs`): a call
 * resent late (src/redis/lua/refund.ts `LUA_REFUND_RECORD`) would delete what other
 * processes used since. Reply: `{keys deleted, serverNowMs}`, or `{-1, serverNowMs}`.
 */
export const RESET_SCRIPT = new Script(
  "reset",
  `local t = redis.call('TIME')
local serverNow = t[1] * 1000 + t[2] / 1000
local deadline = ARGV[1]
if deadline ~= nil and deadline ~= '' and serverNow > deadline + 0 then return { -1, serverNow } end
return { redis.call('UNLINK', KEYS[1]), serverNow }`,
);

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
  return markBlocked(blockedDenial(state.limit, state.retryAfterMs, reset, leftMs), leftMs);
}
