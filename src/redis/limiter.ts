import { readClock } from "../algorithms/time.js";
import type { Clock, Decision } from "../limiter.js";
import { StoreLimiter } from "../store/limiter.js";
import { type LocalClass, localLimiter } from "../store/local.js";
import type { FallbackLimiter } from "../store/policy.js";
import { type RedisKey, type RedisLike, redisKey } from "./client.js";
import { checkEvictionPolicy } from "./maxmemory.js";
import type { Common } from "./options.js";
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
  /** @internal The script's arguments before `cost, take, now, maxTtl`: the algorithm's options. */
  private readonly config: readonly string[];
  /** @internal The in-memory twin, for `'local'`. */
  readonly local: LocalTwin;

  /**
   * @internal
   * @param common The validated common options.
   * @param size `limit` or `capacity`.
   * @param config The algorithm's validated numeric options, in the script's ARGV order.
   * @param local The in-memory class and options, for the `'local'` failure policy.
   */
  protected constructor(common: Common, size: number, config: readonly number[], local: LocalTwin) {
    const clock = common.clock;
    super(
      "redis",
      "Redis",
      common,
      size,
      (): FallbackLimiter => localLimiter(local.Class as LocalClass<object>, local.options, clock),
    );
    this.client = common.client;
    this.prefix = common.prefix;
    this.keyspace = common.keyspace;
    this.keyPrefix = `${common.prefix}${common.keyspace}:`;
    this.maxTtlMs = common.maxTtlMs;
    this.clock = clock;
    this.config = config.map(String);
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
    const args = [
      ...this.config,
      String(cost),
      take ? "1" : "0",
      this.timeArg(where),
      String(this.maxTtlMs),
    ];
    checkEvictionPolicy(this.client);
    return () => runDecision(this.client, this.script, [key], args, this.timeoutMs);
  }

  /** @internal */
  protected prepareReset(key: RedisKey): () => Promise<unknown> {
    return () => runScript(this.client, RESET_SCRIPT, [key], []);
  }

  /** @internal Builds the decision from the script's reply. @throws {TypeError} on a malformed reply. */
  protected abstract override decode(reply: unknown, cost: number): Decision;
}

/** `reset`: deletes the key (UNLINK: a large sliding log is freed off Redis's main thread). */
export const RESET_SCRIPT = new Script("reset", "return redis.call('UNLINK', KEYS[1])");
