import type { Clock } from "../../core/limiter.js";
import { StoreTimeoutError } from "../../store/errors.js";
import { type RedisKey, type RedisLike, redisKey } from "../client.js";
import { hashSlot } from "../hash-slot.js";
import { HEARTBEAT_SCRIPT, LEASE_SCRIPT } from "../lua/lease.js";
import { checkEvictionPolicy } from "../maxmemory.js";
import { replyArray, replyNumber } from "../reply.js";
import { runScript } from "../script.js";
import type {
  HeartbeatAnswer,
  LeaseExchange,
  LeaseGrant,
  LeaseRequest,
  LeaseStore,
  Scheduler,
} from "./exchange.js";

/** What {@link RedisLeaseStore} is built from (validated by `LeasedTokenBucket`). */
export interface RedisLeaseStoreConfig {
  readonly client: RedisLike;
  /** `<prefix><keyspace>:`, before every caller's key. */
  readonly keyPrefix: string;
  /** The sorted set of live processes. */
  readonly heartbeatKey: RedisKey;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly maxTtlMs: number;
  /** Keep the `taken`/`given` record in each bucket's hash. */
  readonly record: boolean;
  readonly timeoutMs: number;
  /** A contender that stops asking is dropped after this (ms): the limiter's `idleAfterMs`. */
  readonly staleMs: number;
  /** The process clock the offset to the server's clock is measured against. */
  readonly clock: Clock;
  /** The timers of the call timeouts (the limiter's scheduler, or deferred `setTimeout`). */
  readonly scheduler: Scheduler;
}

/**
 * The shared buckets in Redis, through the lease scripts of src/redis/lua/lease.ts.
 *
 * No late charges: every exchange carries a deadline on the server's clock, the local
 * clock plus the offset to the server last measured (from the server's now that ends
 * every reply, less half the round trip) plus `timeoutMs`, so a script that runs after
 * the limiter stopped waiting writes nothing. Until an offset is known (the first call),
 * an exchange first asks the heartbeat script for the server's now, which takes no tokens.
 *
 * Batches: one call for all keys on one server; in a cluster (the client has `nodeOf`, or
 * a call was refused with `CROSSSLOT`) one per hash slot, sent back to back per node
 * ({@link nodeOf}). The offset is measured once for all calls waiting for it, and kept
 * from every reply, whichever node gave it (node clocks must agree within `timeoutMs`).
 */
export class RedisLeaseStore implements LeaseStore {
  /** Round trips made (exchanges and heartbeats). */
  roundTrips = 0;
  /** @internal Server now minus local now, ms; undefined until measured. */
  private offsetMs: number | undefined;
  /** @internal The measurement under way, shared by the calls that wait for it. */
  private measuring: Promise<unknown> | undefined;
  /** @internal Group by hash slot. */
  private bySlot: boolean;
  private readonly config: RedisLeaseStoreConfig;
  private readonly head: readonly string[];

  constructor(config: RedisLeaseStoreConfig) {
    this.config = config;
    this.bySlot = typeof (config.client as { nodeOf?: unknown }).nodeOf === "function";
    this.head = [
      String(config.capacity),
      String(config.refillPerSecond),
      String(config.maxTtlMs),
      config.record ? "1" : "0",
      String(config.staleMs),
    ];
  }

  /** The Redis key of a caller's key. */
  keyOf(key: string): RedisKey {
    return redisKey(this.config.keyPrefix, key);
  }

  groupOf(key: string): string {
    return this.bySlot ? String(hashSlot(this.keyOf(key))) : "";
  }

  nodeOf(key: string): string | undefined {
    const nodeOf = this.config.client.nodeOf;
    if (nodeOf === undefined) return undefined;
    try {
      return nodeOf.call(this.config.client, this.keyOf(key));
    } catch {
      return undefined;
    }
  }

  async exchange(
    requests: readonly LeaseRequest[],
    processId: string,
    sequence: number,
  ): Promise<LeaseExchange> {
    if (this.offsetMs === undefined) {
      // Once per client: a server that may evict bucket keys gets one warning.
      checkEvictionPolicy(this.config.client);
      // Measured with a heartbeat that changes nothing (no id leaves).
      this.measuring ??= this.heartbeat("", 0, true, 0).finally(() => {
        this.measuring = undefined;
      });
      await this.measuring;
    }
    const c = this.config;
    const keys = requests.map((r) => this.keyOf(r.key));
    // The process in the buckets' contender fields: its id without dashes, at most 16
    // characters (a UUID's first 64 bits: two processes sharing one only share a fair share).
    const args = [...this.head, processId.replace(/-/g, "").slice(0, 16), String(sequence)];
    for (const { give, charge, want, need, demand, block } of requests) {
      // `b<ms>`, `o<ms>` (once), `l<ms>` (lift), or '' for none.
      const change = block === undefined ? "" : `${block.op.charAt(0)}${block.ms}`;
      args.push(String(give), String(charge), String(want), String(need), String(demand), change);
    }
    const sentMs = c.clock();
    args.push(String(Math.floor(sentMs + (this.offsetMs as number) + c.timeoutMs)));
    let reply: unknown;
    try {
      this.roundTrips++;
      reply = await this.timed(runScript(c.client, LEASE_SCRIPT, keys, args));
    } catch (error) {
      // The keys of one call were in different slots: a cluster; one call per slot from now on.
      const message = error instanceof Error ? error.message : String(error);
      if (message.startsWith("CROSSSLOT")) this.bySlot = true;
      throw error;
    }
    const items = replyArray(reply, 2);
    this.observe(sentMs, items[items.length - 1]);
    if (items[0] === -1 && items.length === 2) return { late: true };
    replyArray(items, requests.length * 6 + 1);
    const grants = requests.map(({ want }, i): LeaseGrant => {
      const granted = replyNumber(items[i * 6]);
      const waitMs = replyNumber(items[i * 6 + 1]);
      const tokens = replyNumber(items[i * 6 + 2]);
      const blockedMs = replyNumber(items[i * 6 + 4]);
      const liftedAgoMs = replyNumber(items[i * 6 + 5]);
      if (
        !(granted >= 0 && granted <= want) ||
        !(waitMs >= 0) ||
        Number.isNaN(tokens) ||
        !(blockedMs >= 0 && blockedMs < Number.POSITIVE_INFINITY) ||
        !(liftedAgoMs >= 0)
      ) {
        throw new TypeError(
          `unexpected lease reply ${granted}, ${waitMs}, ${tokens}, ${blockedMs}, ${liftedAgoMs}`,
        );
      }
      return { granted, waitMs, tokens, blockedMs, liftedAgoMs };
    });
    return { late: false, grants };
  }

  async heartbeat(
    processId: string,
    ttlMs: number,
    leave: boolean,
    sequence: number,
  ): Promise<HeartbeatAnswer> {
    const c = this.config;
    const sentMs = c.clock();
    this.roundTrips++;
    const args = [processId, String(ttlMs), leave ? "1" : "0", String(sequence)];
    const reply = await this.timed(runScript(c.client, HEARTBEAT_SCRIPT, [c.heartbeatKey], args));
    const [live, now, joined] = replyArray(reply, 3);
    this.observe(sentMs, now);
    return { live: replyNumber(live), joined: replyNumber(joined) === 1 };
  }

  /**
   * @internal `call`, rejected with a {@link StoreTimeoutError} after `timeoutMs` on the
   * configured timers (the call itself may still run on the server: the deadline makes it
   * write nothing there).
   */
  private timed(call: Promise<unknown>): Promise<unknown> {
    const { timeoutMs, scheduler } = this.config;
    return new Promise((resolve, reject) => {
      const cancel = scheduler(() => reject(new StoreTimeoutError(timeoutMs)), timeoutMs);
      call.finally(cancel).then(resolve, reject);
    });
  }

  /** @internal Keeps the offset from the server's now in a reply (at the round trip's middle). */
  private observe(sentMs: number, serverNow: unknown): void {
    const receivedMs = this.config.clock();
    this.offsetMs = replyNumber(serverNow) - (sentMs + receivedMs) / 2;
  }
}
