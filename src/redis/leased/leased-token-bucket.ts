import { randomUUID } from "node:crypto";
import { checkCost, checkOptions, describe } from "../../errors.js";
import type { Decision } from "../../limiter.js";
import type { StoreHealth } from "../../metrics/store-health.js";
import { fits, wholeUnits } from "../../numeric.js";
import { RateLimitStoreError, StoreTimeoutError } from "../errors.js";
import { FAIL_CLOSED_RETRY_AFTER_MS } from "../policy.js";
import { type BatchCall, Batcher } from "./batcher.js";
import type { LeaseOperation } from "./events.js";
import { Heartbeat } from "./heartbeat.js";
import { LeaseEntry, LeaseTable } from "./lease-table.js";
import { LocalShare } from "./local-share.js";
import {
  checkLeaseOptions,
  type LeaseConfig,
  type LeasedTokenBucketOptions,
  WHERE,
} from "./options.js";
import { RedisLeaseStore } from "./redis-store.js";
import { LeaseSizing } from "./sizing.js";
import type { LeaseExchange, LeaseRequest, LeaseStore } from "./store.js";

/**
 * Who decided a {@link LeasedDecision}: `'lease'` (this process's lease of the shared
 * bucket, or the cached answer that the shared bucket is empty), `'credit'` (a key with
 * no lease yet, admitted on `initialCredit`), `'pending'` (denied: no lease covers the
 * cost and one is on its way; `remaining` is 0, `retryAfterMs` about one batch window),
 * `'local'` (Redis failed and the key's lease ran out: the `'local'` fallback bucket or a
 * fallback limiter), `'open'`, `'closed'` (the same, with those policies).
 */
export type LeasedSource = "lease" | "credit" | "pending" | "local" | "open" | "closed";

/** A {@link Decision} plus where it came from. */
export interface LeasedDecision extends Decision {
  /** See {@link LeasedSource}. */
  readonly source: LeasedSource;
}

/** Counters of a {@link LeasedTokenBucket} since it was created. */
export interface LeasedTokenBucketStats {
  /** Keys in the local lease table now. */
  readonly keys: number;
  /** Keys whose entry was created (a key dropped and used again counts again). */
  readonly created: number;
  /** Entries dropped with nothing to lose (idle, or their tokens given back). */
  readonly evictedIdle: number;
  /** Entries pushed out of a full table while in use (their tokens given back). */
  readonly evictedLossy: number;
  /** New keys denied because the table was full of entries that could not go. */
  readonly refused: number;
  /**
   * Exchange calls made to the store: per batch window, one per group of keys (a hash slot
   * in a cluster; one server is one group), each one script call.
   */
  readonly exchanges: number;
  /**
   * Round trips of exchanges: per batch window, one per node that got a call (the calls of
   * one node are sent back to back, without waiting for each other). On one server, equal
   * to `exchanges`.
   */
  readonly roundTrips: number;
  /** Heartbeat calls made. */
  readonly heartbeats: number;
  /** Exchange calls that failed or came back late. */
  readonly failedExchanges: number;
  /** Tokens taken from the shared bucket. */
  readonly tokensTaken: number;
  /** Tokens sent back to the shared bucket. */
  readonly tokensGivenBack: number;
  /** Units admitted on credit. */
  readonly creditAdmitted: number;
  /** Decisions made by the failure policy. */
  readonly fallbackDecisions: number;
  /** Live processes as last counted by the heartbeats. */
  readonly liveProcesses: number;
}

const NO_LEASE_RETRY_FLOOR_MS = 1;

/**
 * One token bucket per key in Redis, shared by every process (the token bucket script's
 * semantics, the server's clock), with each process deciding in memory, synchronously,
 * from a lease of the key's tokens (docs/redis.md#leases-one-global-limit-at-in-process-speed).
 * Leases refill in the background below a low-water mark, batched across keys; sizes
 * follow the key's local rate, capped; unused tokens go back when idle, expired and on
 * {@link close}. An empty shared bucket's answer is kept: denied without calls until then.
 * Bounds: with `initialCredit: 0` never above the shared bucket (`capacity +
 * refillPerSecond x T`); with credit, at most `N x initialCredit` more per key.
 * @example
 * const limiter = new LeasedTokenBucket({ client: fromIoredis(redis), capacity: 100, refillPerSecond: 50 })
 * limiter.consume("user:42") //=> { allowed: true, …, source: 'credit' }, then 'lease'
 * await limiter.close()
 * @throws {RangeError} | {TypeError} For an option out of range / unknown, mistyped, or a raw client.
 */
export class LeasedTokenBucket {
  /** Most tokens a key's shared bucket holds. */
  readonly capacity: number;
  /** Tokens added to a shared bucket per second. */
  readonly refillPerSecond: number;
  /** This process's id in the heartbeats. */
  readonly processId: string;
  /** The store behind the leases. */
  readonly store: LeaseStore;

  /** @internal */
  private readonly config: LeaseConfig;
  /** @internal */
  private readonly table: LeaseTable;
  /** @internal */
  private readonly sizing: LeaseSizing;
  /** @internal */
  private readonly batcher: Batcher;
  /** @internal */
  private readonly heartbeat: Heartbeat;
  /** @internal Tokens of dropped entries, to go back with the next batch. */
  private readonly returns = new Map<string, number>();
  /** @internal Nodes whose last exchange failed: no new one before the time given. */
  private readonly down = new Map<string, number>();
  /** @internal */
  private readonly counters = {
    exchanges: 0,
    roundTrips: 0,
    failedExchanges: 0,
    tokensTaken: 0,
    tokensGivenBack: 0,
    creditAdmitted: 0,
    fallbackDecisions: 0,
  };
  /** @internal Failed calls in a row, per operation. */
  private readonly failedCalls: Record<LeaseOperation, number> = { lease: 0, heartbeat: 0 };
  /** @internal The last failure of a lease call, the `cause` of a `'throw'` decision. */
  private lastError: unknown;
  /** @internal */
  private seenMs = Number.NEGATIVE_INFINITY;
  /** @internal */
  private closed = false;
  /** @internal The one close() under way or done. */
  private closing: Promise<void> | undefined;
  /** @internal */
  private cancelSweep: (() => void) | undefined;
  /** @internal Exchanges under way, for close(). */
  private readonly inFlight = new Set<Promise<void>>();
  /** @internal Typical time from asking for a lease to having it (ms), for retryAfterMs. */
  private leaseDelayMs: number;

  constructor(options: LeasedTokenBucketOptions) {
    const o = checkOptions<LeasedTokenBucketOptions>(WHERE, options);
    const config = checkLeaseOptions(o);
    this.config = config;
    this.capacity = config.capacity;
    this.refillPerSecond = config.refillPerSecond;
    this.processId = randomUUID();
    const redis = config.redis;
    this.store =
      config.store ??
      new RedisLeaseStore({
        client: (redis as NonNullable<typeof redis>).client,
        keyPrefix: `${redis?.prefix}${redis?.keyspace}:`,
        heartbeatKey: config.heartbeatKey as string,
        capacity: config.capacity,
        refillPerSecond: config.refillPerSecond,
        maxTtlMs: redis?.maxTtlMs as number,
        record: config.record,
        timeoutMs: redis?.timeoutMs as number,
        clock: config.clock,
      });
    this.sizing = new LeaseSizing(config.leaseCap, config.leaseHorizonMs, config.lowWaterShare);
    this.table = new LeaseTable(config.maxKeys, (e) =>
      this.giveBack(e.key, e.group, (e.tokens > 0 ? e.tokens : 0) + e.give),
    );
    this.batcher = new Batcher(config.batchWindowMs, config.scheduler, (calls) =>
      this.sendWindow(calls),
    );
    this.leaseDelayMs = config.batchWindowMs;
    this.heartbeat = new Heartbeat(
      this.store,
      this.processId,
      config.heartbeatTtlMs,
      config.scheduler,
      (error) => this.settled("heartbeat", 0, error),
    );
    this.heartbeat.start();
    this.armSweep();
  }

  /** Keys in the local lease table. */
  get size(): number {
    return this.table.size;
  }

  /** The counters; see {@link LeasedTokenBucketStats}. */
  get stats(): LeasedTokenBucketStats {
    const c = this.table.counts;
    return {
      keys: this.table.size,
      created: c.created,
      evictedIdle: c.evictedIdle,
      evictedLossy: c.evictedLossy,
      refused: c.refused,
      exchanges: this.counters.exchanges,
      roundTrips: this.counters.roundTrips,
      heartbeats: this.heartbeat.sent,
      failedExchanges: this.counters.failedExchanges,
      tokensTaken: this.counters.tokensTaken,
      tokensGivenBack: this.counters.tokensGivenBack,
      creditAdmitted: this.counters.creditAdmitted,
      fallbackDecisions: this.counters.fallbackDecisions,
      liveProcesses: this.heartbeat.live,
    };
  }

  /**
   * The store's health for metrics (`withMetrics` reads it at each scrape): `failures`, the
   * lease exchanges that failed or came late (`stats.failedExchanges`); one circuit for the
   * client (`node: ""`), `'open'` while lease calls fail (from a failed one until one
   * succeeds), else `'closed'`. Heartbeats do not count: they only keep the process count.
   */
  storeHealth(): StoreHealth {
    return {
      failures: this.counters.failedExchanges,
      circuits: [{ node: "", state: this.failedCalls.lease > 0 ? "open" : "closed" }],
    };
  }

  /** Live processes as last counted (the `'local'` fallback's N). */
  get liveProcesses(): number {
    return this.heartbeat.live;
  }

  /**
   * `consume(key, cost).allowed`, without allocating a decision.
   * @throws Like {@link consume}.
   */
  allow(key: string, cost?: number): boolean {
    const where = `${WHERE}.allow`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    const now = this.now(where);
    const e = this.table.entries.get(k);
    if (e !== undefined && fits(c, e.tokens) && c > 0) {
      this.spend(e, c, now);
      return true;
    }
    return this.decide(k, c, now, true).allowed;
  }

  /**
   * Takes `cost` units for `key` from this process's lease when they are there, locally
   * and synchronously; otherwise decides as described in the class doc (credit, the cached
   * empty answer, the failure policy). A denied request takes nothing.
   * @throws {TypeError} For a non-string key or a non-number cost; {RangeError} for a key
   *   longer than `maxKeyLength`, or NaN, a negative or an infinite cost;
   *   {@link RateLimitStoreError} when Redis fails, the lease ran out and `failure` is `'throw'`.
   */
  consume(key: string, cost?: number): LeasedDecision {
    const where = `${WHERE}.consume`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    const now = this.now(where);
    const e = this.table.entries.get(k);
    if (e !== undefined && c > 0 && fits(c, e.tokens)) {
      this.spend(e, c, now);
      return this.granted(e, "lease");
    }
    return this.decide(k, c, now, true);
  }

  /**
   * What `consume(key, cost)` would answer now from local state; takes nothing, creates
   * no entry and makes no call.
   * @throws Like {@link consume}.
   */
  peek(key: string, cost?: number): LeasedDecision {
    const where = `${WHERE}.peek`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    return this.decide(k, c, this.now(where), false);
  }

  /**
   * Forgets `key`'s local state: its unused tokens go back with the next batch (a debt is
   * kept: a reset must not hand out credit again). The shared bucket is not reset.
   */
  reset(key: string): void {
    const k = this.checkKey(`${WHERE}.reset`, key);
    const e = this.table.entries.get(k);
    if (typeof this.config.failure === "object") this.config.failure.reset(k);
    if (e === undefined || e.tokens < 0 || e.inFlight || e.queued) return;
    this.table.entries.delete(k);
    this.giveBack(k, e.group, e.tokens + e.give);
  }

  /**
   * Stops the timers, gives every unused token back to the shared buckets, waits for the
   * exchanges under way and withdraws this process from the heartbeats. Later decisions
   * are made by the failure policy, as when Redis is away. Resolves when done; never
   * rejects (failures go to `onError`).
   */
  close(): Promise<void> {
    // A second call waits for the first: it must not resolve before the tokens went back.
    this.closing ??= this.shutDown();
    return this.closing;
  }

  /** @internal close()'s one run. */
  private async shutDown(): Promise<void> {
    this.closed = true;
    this.cancelSweep?.();
    this.batcher.stop();
    await Promise.all([...this.inFlight]);
    for (const e of this.table.entries.values()) {
      if (e.tokens > 0) {
        e.give += e.tokens;
        e.tokens = 0;
      }
      e.wants = false;
      if (e.give > 0 && !e.queued) this.enqueue(e);
    }
    this.batcher.flush();
    await Promise.all([...this.inFlight]);
    this.batcher.stop();
    await this.heartbeat.stop();
  }

  /** @internal */
  private checkKey(where: string, key: unknown): string {
    if (typeof key !== "string") {
      throw new TypeError(`${where}: key must be a string, got ${describe(key)}`);
    }
    if (key.length > this.config.maxKeyLength) {
      throw new RangeError(
        `${where}: key must be at most ${this.config.maxKeyLength} UTF-16 code units long (maxKeyLength), got ${key.length}`,
      );
    }
    return key;
  }

  /** @internal The clock, held at its high-water mark. */
  private now(where: string): number {
    const reading = this.config.clock();
    if (typeof reading !== "number" || !Number.isFinite(reading)) {
      throw new RangeError(
        `${where}: clock must return a finite number of milliseconds, got ${describe(reading)}`,
      );
    }
    if (reading > this.seenMs) this.seenMs = reading;
    return this.seenMs;
  }

  /** @internal Spends `cost` from the lease (it fits). */
  private spend(e: LeaseEntry, cost: number, now: number): void {
    e.tokens -= cost;
    e.lastUsedMs = now;
    e.demand.observe(cost, now);
    // No refill while the shared bucket said it is empty: no calls until its tokens return.
    if (
      e.tokens < e.lowWater &&
      !e.queued &&
      !e.inFlight &&
      now >= e.deniedUntilMs &&
      !this.closed
    ) {
      e.wants = true;
      e.needCost = 0;
      this.enqueue(e);
    }
  }

  /** @internal The slow path: no lease covers the cost. */
  private decide(key: string, cost: number, now: number, take: boolean): LeasedDecision {
    let e = this.table.entries.get(key);
    if (e === undefined) {
      if (!take) return this.unseen(cost);
      if (!this.table.makeRoom(now, this.config.idleAfterMs)) {
        return this.denied(this.config.batchWindowMs, 0, "lease");
      }
      e = new LeaseEntry(
        key,
        this.store.groupOf(key),
        Math.min(this.config.initialCredit, this.capacity),
        this.capacity,
        now,
        this.config.leaseHorizonMs / 4,
      );
      this.table.entries.set(key, e);
      this.table.counts.created++;
    }
    if (cost === 0 || fits(cost, e.tokens)) {
      if (take && cost > 0) this.spend(e, cost, now);
      return this.granted(e, "lease");
    }
    if (take) {
      e.lastUsedMs = now;
      e.demand.observe(cost, now);
    }
    if (!e.leased && fits(cost, e.credit) && !this.closed) {
      if (take) {
        e.credit -= cost;
        e.tokens -= cost;
        this.counters.creditAdmitted += cost;
        this.request(e, cost);
      }
      return this.granted(e, "credit");
    }
    if (this.closed || this.isDown(e, now)) return this.failed(e, cost, now, take);
    if (cost > this.capacity) return this.denied(Number.POSITIVE_INFINITY, e.shared, "lease");
    if (now < e.deniedUntilMs) return this.denied(e.deniedUntilMs - now, e.shared, "lease");
    if (take) this.request(e, cost);
    // Nothing here to admit with until the lease arrives: 0 left for this process now.
    return this.denied(Math.max(NO_LEASE_RETRY_FLOOR_MS, this.leaseDelayMs), 0, "pending");
  }

  /** @internal peek of a key with no entry: what a first consume would answer. */
  private unseen(cost: number): LeasedDecision {
    if (cost === 0) return this.shape(true, 0, 0, "lease");
    if (fits(cost, this.config.initialCredit) && !this.closed) {
      return this.shape(true, 0, this.capacity - cost, "credit");
    }
    return this.denied(Math.max(NO_LEASE_RETRY_FLOOR_MS, this.leaseDelayMs), 0, "pending");
  }

  /** @internal Queues a lease request covering `cost`. */
  private request(e: LeaseEntry, cost: number): void {
    if (this.closed) return;
    e.wants = true;
    if (cost > e.needCost) e.needCost = cost;
    if (!e.queued && !e.inFlight) this.enqueue(e);
  }

  /** @internal */
  private enqueue(e: LeaseEntry): void {
    e.queued = true;
    this.batcher.add(e.group, e.key);
  }

  /** @internal The key's node is down (its last exchange failed, no answer since). */
  private isDown(e: LeaseEntry, _now: number): boolean {
    return this.down.size > 0 && this.down.has(this.nodeOf(e.group, e.key));
  }

  /**
   * @internal The node a group's calls go to now: the store's answer for one of its keys
   * (a cluster's master of the slot), else the group itself.
   */
  private nodeOf(group: string, key: string): string {
    const node = this.store.nodeOf?.(key);
    return node === undefined ? `group ${group}` : `node ${node}`;
  }

  /** @internal A decision of the failure policy for a key whose lease ran out. */
  private failed(e: LeaseEntry, cost: number, now: number, take: boolean): LeasedDecision {
    if (take) {
      this.counters.fallbackDecisions++;
      this.request(e, cost);
    }
    const policy = this.config.failure;
    if (policy === "open") return this.shape(true, 0, this.capacity - cost, "open");
    if (policy === "closed") return this.denied(FAIL_CLOSED_RETRY_AFTER_MS, 0, "closed");
    if (policy === "throw") {
      const operation = `${WHERE}.${take ? "consume" : "peek"}`;
      throw new RateLimitStoreError(
        `${operation}: Redis failed and the lease of this key ran out`,
        {
          cause: this.lastError,
          operation,
          timedOut: this.lastError instanceof StoreTimeoutError,
        },
      );
    }
    if (typeof policy === "object") {
      const local = take ? policy.consume(e.key, cost) : policy.peek(e.key, cost);
      return { ...local, source: "local" };
    }
    const live = this.heartbeat.live;
    if (e.fallback === undefined) {
      if (!take) {
        const share = this.capacity / live;
        return fits(cost, share)
          ? this.shape(true, 0, share - cost, "local")
          : this.denied(Number.POSITIVE_INFINITY, 0, "local");
      }
      e.fallback = new LocalShare(this.capacity / live, this.refillPerSecond / live / 1000, now);
    }
    if (e.fallback.take(cost, now, take)) {
      return this.shape(true, 0, e.fallback.available(now), "local");
    }
    return this.denied(e.fallback.waitMs(cost, now), e.fallback.available(now), "local");
  }

  /**
   * @internal An allowed decision from the lease or credit: what is left after it, the
   * lease plus the shared bucket's last count, less a debt (credit not yet paid by a lease).
   */
  private granted(e: LeaseEntry, source: LeasedSource): LeasedDecision {
    return this.shape(true, 0, e.tokens + e.shared, source);
  }

  /** @internal */
  private denied(retryAfterMs: number, available: number, source: LeasedSource): LeasedDecision {
    return this.shape(false, retryAfterMs, available, source);
  }

  /** @internal Builds a decision; `available` is this process's view of the tokens left. */
  private shape(
    allowed: boolean,
    retryAfterMs: number,
    available: number,
    source: LeasedSource,
  ): LeasedDecision {
    const capacity = this.capacity;
    const left = available < capacity ? (available > 0 ? available : 0) : capacity;
    const missing = capacity - left;
    const rate = this.refillPerSecond;
    return {
      allowed,
      limit: capacity,
      remaining: wholeUnits(left, capacity),
      retryAfterMs,
      resetAfterMs:
        missing <= 0 ? 0 : rate > 0 ? Math.ceil((missing * 1000) / rate) : Number.POSITIVE_INFINITY,
      source,
    };
  }

  /** @internal Tokens of a dropped entry (or a grant for one) go back with the next batch. */
  private giveBack(key: string, group: string, tokens: number): void {
    if (!(tokens > 0)) return;
    this.returns.set(key, (this.returns.get(key) ?? 0) + tokens);
    this.batcher.add(group, key);
  }

  /** @internal The request of one key for an exchange now, or undefined when there is nothing to ask. */
  private requestOf(key: string, now: number): LeaseRequest | undefined {
    const returned = this.returns.get(key) ?? 0;
    if (returned > 0) this.returns.delete(key);
    const e = this.table.entries.get(key);
    if (e === undefined || !e.queued) {
      return returned > 0 ? { key, give: returned, want: 0, need: 0 } : undefined;
    }
    e.queued = false;
    const give = e.give + returned;
    e.give = 0;
    let want = 0;
    let need = 0;
    if (e.wants && !this.closed) {
      const rate = e.demand.rate(now);
      const target = this.sizing.target(rate);
      e.lowWater = this.sizing.lowWater(target, rate, this.leaseDelayMs);
      const short = e.needCost - e.tokens;
      want = Math.max(target - e.tokens, short, 0);
      if (want > this.capacity) want = this.capacity;
      // Wait for half a target lease (fewer round trips on a key the bucket cannot feed),
      // but with no refill take whatever covers the request: tokens would never grow.
      const batch = this.refillPerSecond > 0 ? target / 2 : 0;
      need = Math.min(want, Math.max(short, batch, 1e-9));
    }
    e.wants = false;
    e.needCost = 0;
    if (give <= 0 && want <= 0) return undefined;
    e.inFlight = true;
    return { key, give, want, need };
  }

  /**
   * @internal The calls of one batch window, back to back: those of one node make one
   * round trip (a cluster client writes them to the node's connection without waiting).
   */
  private sendWindow(calls: readonly BatchCall[]): void {
    const nodes = new Set<string>();
    for (const { group, keys } of calls) {
      const node = this.nodeOf(group, keys[0] as string);
      if (this.send(group, keys, node)) nodes.add(node);
    }
    this.counters.roundTrips += nodes.size;
  }

  /** @internal One exchange call for keys of one group; true when it was sent. */
  private send(group: string, keys: string[], node: string): boolean {
    const now = this.now(WHERE);
    const retryAt = this.down.get(node);
    if (retryAt !== undefined && now < retryAt && !this.closed) {
      // Back off: keep the keys for a later batch.
      this.config.scheduler(() => {
        for (const key of keys) this.batcher.add(group, key);
      }, retryAt - now);
      return false;
    }
    const requests: LeaseRequest[] = [];
    for (const key of keys) {
      const r = this.requestOf(key, now);
      if (r !== undefined) requests.push(r);
    }
    if (requests.length === 0) return false;
    this.counters.exchanges++;
    let given = 0;
    for (const r of requests) given += r.give;
    this.counters.tokensGivenBack += given;
    const sentMs = now;
    let call: Promise<LeaseExchange>;
    try {
      call = this.store.exchange(requests);
    } catch (error) {
      call = Promise.reject(error);
    }
    // Settling an answer cannot fail but through a bad clock reading or a throwing hook;
    // either is reported, and `done` never rejects (close() awaits it).
    const done = call
      .then(
        (exchange) => this.received(group, node, requests, exchange, sentMs),
        (error: unknown) => this.lost(node, requests, error, false),
      )
      .catch((error: unknown) => {
        try {
          this.settled("lease", requests.length, error);
        } catch {
          // A throwing onError has nowhere left to go.
        }
      });
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
    return true;
  }

  /** @internal */
  private received(
    group: string,
    node: string,
    requests: LeaseRequest[],
    exchange: LeaseExchange,
    sentMs: number,
  ): void {
    if (exchange.late) {
      this.lost(node, requests, new Error("the lease call reached Redis after its deadline"), true);
      return;
    }
    const now = this.now(WHERE);
    // The delay from asking to having: a quick rise, a slow decay.
    const delay = now - sentMs + this.config.batchWindowMs;
    this.leaseDelayMs = delay > this.leaseDelayMs ? delay : this.leaseDelayMs * 0.9 + delay * 0.1;
    this.down.delete(node);
    this.settled("lease", requests.length, undefined);
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i] as LeaseRequest;
      const grant = exchange.grants[i];
      if (grant === undefined) continue;
      this.counters.tokensTaken += grant.granted;
      const e = this.table.entries.get(r.key);
      if (e === undefined || !e.inFlight) {
        // The entry went meanwhile: its grant goes straight back.
        this.giveBack(r.key, group, grant.granted);
        continue;
      }
      e.inFlight = false;
      e.leased = true;
      e.credit = 0;
      e.shared = grant.tokens;
      if (e.fallback !== undefined) {
        // Recovery: what the fallback spent and has not refilled is charged as debt.
        e.tokens -= e.fallback.spent(now);
        e.fallback = undefined;
      }
      if (grant.granted > 0) {
        e.tokens += grant.granted;
        e.grantedAtMs = now;
        e.deniedUntilMs = Number.NEGATIVE_INFINITY;
      } else if (r.want > 0) {
        e.deniedUntilMs = now + this.emptyWaitMs(grant.waitMs, r.need);
      }
      if (this.closed && e.tokens > 0) {
        e.give += e.tokens;
        e.tokens = 0;
        this.enqueue(e);
      }
    }
  }

  /**
   * @internal How long to deny after the shared bucket answered "empty, `need` tokens in
   * `waitMs`": that wait, or longer when other live processes compete for the same tokens,
   * up to this process's fair turn (N x need at the refill rate), so that N processes do not
   * all call at once for the same few tokens. The longer wait loses no tokens: they stay in
   * the bucket, and it never passes the time half the capacity takes to come back, well
   * before the bucket could overflow.
   */
  private emptyWaitMs(waitMs: number, need: number): number {
    const rate = this.refillPerSecond;
    if (!(rate > 0) || !Number.isFinite(waitMs)) return waitMs;
    const fairTokens = Math.min(this.heartbeat.live * need, this.capacity / 2);
    const fairMs = (fairTokens * 1000) / rate;
    return fairMs > waitMs ? fairMs : waitMs;
  }

  /** @internal An exchange failed (or came late: nothing was written, so gives can be retried). */
  private lost(node: string, requests: LeaseRequest[], error: unknown, late: boolean): void {
    this.counters.failedExchanges++;
    this.lastError = error;
    const now = this.now(WHERE);
    this.down.set(node, now + Math.min(1000, Math.max(this.config.batchWindowMs, 100)));
    for (const r of requests) {
      const e = this.table.entries.get(r.key);
      if (late) this.counters.tokensGivenBack -= r.give;
      if (e === undefined || !e.inFlight) {
        if (late && r.give > 0) this.returns.set(r.key, (this.returns.get(r.key) ?? 0) + r.give);
        continue;
      }
      e.inFlight = false;
      // A give-back that may have been applied is never sent twice; a late one was not applied.
      if (late) e.give += r.give;
    }
    this.settled("lease", requests.length, late ? new StoreTimeoutError(0) : error, late);
  }

  /** @internal Reports a failed call (onError) or a recovery (onRecover). */
  private settled(operation: LeaseOperation, keys: number, error: unknown, late = false): void {
    if (error === undefined) {
      const failedCalls = this.failedCalls[operation];
      if (failedCalls === 0) return;
      this.failedCalls[operation] = 0;
      this.config.onRecover?.({ operation, failedCalls });
      return;
    }
    this.failedCalls[operation]++;
    const onError = this.config.onError;
    if (onError === undefined) return;
    const timedOut = error instanceof StoreTimeoutError || late;
    const detail = late
      ? "the call reached Redis after its deadline (nothing was charged)"
      : error instanceof Error
        ? error.message
        : describe(error);
    const where = `${WHERE}.${operation}`;
    onError({
      error: new RateLimitStoreError(
        timedOut && !late ? `${where}: ${detail}` : `${where}: Redis failed: ${detail}`,
        {
          cause: error,
          operation: where,
          timedOut,
        },
      ),
      operation,
      keys,
    });
  }

  /** @internal The periodic sweep: idle keys and expired leases give tokens back; free entries go. */
  private armSweep(): void {
    const period = Math.max(
      this.config.batchWindowMs,
      Math.min(this.config.idleAfterMs, this.config.leaseTtlMs) / 4,
    );
    const tick = () => {
      if (this.closed) return;
      this.cancelSweep = this.config.scheduler(tick, period);
      this.sweep();
    };
    this.cancelSweep = this.config.scheduler(tick, period);
  }

  /** @internal */
  private sweep(): void {
    const now = this.now(WHERE);
    const { idleAfterMs, leaseTtlMs } = this.config;
    const count = Math.min(this.table.size, 4096);
    for (const e of this.table.chunk(count)) {
      if (e.inFlight || e.queued) continue;
      const idle = now - e.lastUsedMs >= idleAfterMs;
      if (idle && e.fallback !== undefined) {
        // A quiet key's fallback bucket: once full again it is a fresh one and can go; once
        // Redis is back, what it spent and has not refilled becomes debt (as on a lease's
        // arrival). Either way the entry can then leave: a key flood during an outage must
        // not hold the table (and refuse every new key) for good.
        const spent = e.fallback.spent(now);
        if (spent <= 1e-9 || !this.isDown(e, now)) {
          e.tokens -= spent;
          e.fallback = undefined;
        }
      }
      if (idle && e.isFree(now)) {
        this.table.entries.delete(e.key);
        this.table.counts.evictedIdle++;
        continue;
      }
      if (e.tokens < 0 && now >= e.deniedUntilMs && !this.isDown(e, now)) {
        // A debt is paid off even if the key went quiet.
        this.request(e, 0);
        continue;
      }
      if (e.tokens <= 0) continue;
      if (idle) {
        e.give += e.tokens;
        e.tokens = 0;
        this.enqueue(e);
      } else if (now - e.grantedAtMs >= leaseTtlMs) {
        // An expired lease keeps what the key's current rate needs; the rest goes back.
        const keep = Math.min(e.tokens, this.sizing.target(e.demand.rate(now)));
        if (e.tokens - keep > 1e-9) {
          e.give += e.tokens - keep;
          e.tokens = keep;
          this.enqueue(e);
        }
        e.grantedAtMs = now;
      }
    }
  }
}
