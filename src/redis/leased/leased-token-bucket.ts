import { randomUUID } from "node:crypto";
import type { BlockTable } from "../../core/blocks.js";
import { checkCost, checkNumber, checkOptions, describe, mustBe } from "../../core/errors.js";
import type { Decision, Receipt } from "../../core/limiter.js";
import { fits, wholeUnits } from "../../core/numeric.js";
import { checkReceipt } from "../../core/receipt.js";
import type { StoreHealth } from "../../metrics/store-health.js";
import { LOCAL_MAX_KEYS } from "../../store/local.js";
import { RateLimitStoreError, StoreTimeoutError } from "../errors.js";
import { FAIL_CLOSED_RETRY_AFTER_MS } from "../policy.js";
import { type BatchCall, Batcher } from "./batcher.js";
import type { LeaseOperation } from "./events.js";
import {
  deferredTimerScheduler,
  type LeaseExchange,
  type LeaseRequest,
  type LeaseStore,
} from "./exchange.js";
import { Heartbeat } from "./heartbeat.js";
import { BLOCKED, LeaseBlocks, SEND } from "./lease-blocks.js";
import { LeaseChargeReceipt } from "./lease-receipt.js";
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

/**
 * Who decided a {@link LeasedDecision}: `'lease'` (this process's lease of the shared bucket, or
 * the cached answer that the shared bucket has nothing for this process until `retryAfterMs`),
 * `'credit'` (a key with no lease yet, admitted on `initialCredit`), `'pending'` (denied: no lease
 * covers the cost and one is on its way; `remaining` is 0, `retryAfterMs` about one batch window),
 * `'full'` (denied: a new key, and the lease table is full of entries that cannot go yet;
 * `retryAfterMs` until the next exchange window or the next try of a failed store), `'stopped'`
 * (denied: after {@link LeasedTokenBucket.close}; `retryAfterMs` Infinity), `'blocked'` (denied:
 * the key is blocked, here or in another process; `retryAfterMs` and `resetAfterMs` at least the
 * time left, `remaining` 0), `'local'` (Redis failed and the key's lease ran out: the `'local'`
 * fallback bucket or a fallback limiter), `'open'`, `'closed'` (the same, with those policies).
 */
export type LeasedSource =
  | "lease"
  | "credit"
  | "pending"
  | "full"
  | "stopped"
  | "blocked"
  | "local"
  | "open"
  | "closed";

/** A {@link Decision} plus where it came from. */
export interface LeasedDecision extends Decision {
  /** See {@link LeasedSource}. */
  readonly source: LeasedSource;
}

/**
 * What {@link LeasedTokenBucket.charge} returns: the decision, its `source`, the key, the
 * units taken and when (the process clock), for `refund(receipt, units?)`. `units` is 0 for
 * a denial and for a charge that took nothing (`'open'`, a fallback limiter of yours).
 */
export interface LeasedReceipt extends Receipt, LeasedDecision {}

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
  /** New keys denied because the table was full of entries that could not go (`source: 'full'`). */
  readonly refused: number;
  /**
   * Exchange calls made to the store: per batch window, one per group of keys (a hash slot
   * in a cluster; one server is one group), each one script call.
   */
  readonly exchanges: number;
  /**
   * Round trips of exchanges: per batch window, one per node that got a call (the calls of one node
   * are sent back to back, without waiting for each other). On one server, equal to `exchanges`.
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
  /**
   * Units charged to the shared bucket (admitted on credit or by the `'local'` fallback),
   * counted when the charge was sent; a charge whose call failed is sent again.
   */
  readonly tokensCharged: number;
  /** Decisions made by the failure policy. */
  readonly fallbackDecisions: number;
  /** Live processes as last counted by the heartbeats. */
  readonly liveProcesses: number;
  /** Units given back by refunds (through receipts or without), into leases, fallback buckets or the shared bucket. */
  readonly refunded: number;
  /** Keys in the local block table now (blocked here, or learned from the store). */
  readonly blockedKeys: number;
  /** Blocks of new keys the full block table refused (they are sent to the store all the same). */
  readonly blocksRefused: number;
}

const NO_LEASE_RETRY_FLOOR_MS = 1;
/** The first back-off after a failed exchange (ms); it doubles up to {@link MAX_BACKOFF_MS}. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 250;
/**
 * Most rounds of exchanges close() waits for: rounds whose calls came back late (Redis up,
 * the deadline wrong) go on past a failing store's three, this far, so that a charge whose
 * calls came back late three times in a row is still sent (else: admitted, never charged).
 */
const CLOSE_ROUNDS = 8;

/**
 * A node whose last exchange failed: no exchange until its back-off has passed (timed by the
 * scheduler, so a clock that goes back does not hold it), then one call, the probe.
 */
interface DownMark {
  /** When the back-off ends, on this process's clock (for `retryAfterMs` only). */
  retryAtMs: number;
  /** The back-off has passed: the next call may go. */
  ready: boolean;
  /** Keys whose calls wait for the back-off, by group. */
  readonly waiting: Map<string, Set<string>>;
  backoffMs: number;
}

/**
 * One token bucket per key in Redis, shared by every process (the token bucket script's
 * semantics, the server's clock), with each process deciding in memory, synchronously,
 * from a lease of the key's tokens (docs/redis.md#leases-one-global-limit-at-in-process-speed).
 * Leases refill in the background below a low-water mark, batched across keys; sizes
 * follow the key's local rate, capped; a contended bucket is shared max-min fairly among
 * the processes asking (docs/distributed.md#fairness); unused tokens go back when idle,
 * expired and on {@link close}. The store's answer that nothing is there for this process
 * is kept: denied without calls until then. Bounds and invariants: docs/distributed.md#invariants.
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
  /** This process's id in the heartbeats and the buckets' fair shares. */
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
  /**
   * @internal Keys with an exchange under way: a key goes in one call at a time, so that
   * the store can tell a call a client ran twice from a newer one (LeaseStore.exchange).
   */
  private readonly busy = new Set<string>();
  /** @internal Busy keys asked for meanwhile: they go with the next batch once it settles. */
  private readonly waitingForBusy = new Set<string>();
  /** @internal The sequence number of the last exchange call. */
  private sequence = 0;
  /** @internal Nodes whose last exchange failed, until one answers. */
  private readonly down = new Map<string, DownMark>();
  /** @internal Nodes whose last answer came late (past its deadline), until one is on time. */
  private readonly lateNodes = new Set<string>();
  /** @internal Exchange calls that came back late (among `failedExchanges`). */
  private lateAnswers = 0;
  /** @internal */
  private readonly counters = {
    exchanges: 0,
    roundTrips: 0,
    failedExchanges: 0,
    tokensTaken: 0,
    tokensGivenBack: 0,
    tokensCharged: 0,
    creditAdmitted: 0,
    fallbackDecisions: 0,
    refunded: 0,
  };
  /** @internal The blocks and their link to the store (docs/redis.md#blocks-shared-by-every-process). */
  private readonly blocks = new LeaseBlocks(LOCAL_MAX_KEYS);
  /** @internal `blocks.table`, one hop away: the hot path tests its size first. */
  private readonly blockTable: BlockTable = this.blocks.table;
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
  /** @internal The table refused a key and has not taken one since (onTableFull fired). */
  private full = false;
  /** @internal The store has no nodes: one answered heartbeat says every node answers. */
  private readonly oneNode: boolean;

  constructor(options: LeasedTokenBucketOptions) {
    const o = checkOptions<LeasedTokenBucketOptions>(WHERE, options);
    const config = checkLeaseOptions(o);
    this.config = config;
    this.capacity = config.capacity;
    this.refillPerSecond = config.refillPerSecond;
    this.processId = randomUUID();
    const redis = config.redis;
    this.store =
      redis === undefined
        ? (config.store as LeaseStore)
        : new RedisLeaseStore({
            // client, maxTtlMs, timeoutMs; capacity, refillPerSecond, record, clock
            ...redis,
            ...config,
            keyPrefix: `${redis.prefix}${redis.keyspace}:`,
            heartbeatKey: `${redis.prefix}${redis.keyspace}#processes`,
            staleMs: config.idleAfterMs,
            scheduler: o.scheduler === undefined ? deferredTimerScheduler : config.scheduler,
          });
    this.oneNode = this.store.nodeOf === undefined || this.store.nodeOf("") === undefined;
    this.sizing = new LeaseSizing(config.leaseCap, config.leaseHorizonMs, config.lowWaterShare);
    this.table = new LeaseTable(
      config.maxKeys,
      (e) => this.giveBack(e.key, e.group, e.tokens + e.give),
      (e) => this.fullAtMs(e),
      () => this.now(WHERE),
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
      () => this.now(WHERE),
      (error) => {
        // On a store of one node, an answered heartbeat says the node answers: its keys go
        // back to leases at once (a failed exchange after it marks it down again).
        if (error === undefined && this.oneNode && this.down.size > 0) {
          for (const mark of this.down.values()) this.release(mark);
          this.down.clear();
        }
        this.settled("heartbeat", 0, error);
      },
    );
    this.heartbeat.start();
    // The periodic sweep: idle keys and expired leases give tokens back; free entries go.
    const period = Math.max(
      config.batchWindowMs,
      Math.min(config.idleAfterMs, config.leaseTtlMs) / 4,
    );
    const tick = () => {
      if (this.closed) return;
      this.cancelSweep = config.scheduler(tick, period);
      this.sweep();
    };
    this.cancelSweep = config.scheduler(tick, period);
  }

  /** Keys in the local lease table. */
  get size(): number {
    return this.table.size;
  }

  /** The counters; see {@link LeasedTokenBucketStats}. */
  get stats(): LeasedTokenBucketStats {
    return {
      keys: this.table.size,
      ...this.table.counts,
      ...this.counters,
      heartbeats: this.heartbeat.sent,
      liveProcesses: this.heartbeat.live,
      blockedKeys: this.blockTable.size,
      blocksRefused: this.blockTable.stats.refused,
    };
  }

  /**
   * The store's health for metrics (`withMetrics` reads it at each scrape): `failures`, the
   * lease exchanges that failed or came late (`stats.failedExchanges`); one circuit for the
   * client (`node: ""`), `'open'` while a node's last exchange failed or the heartbeats fail
   * (until one answers: a heartbeat or a probe after the back-off), else `'closed'`.
   */
  storeHealth(): StoreHealth {
    return {
      failures: this.counters.failedExchanges,
      circuits: [{ node: "", state: this.failing ? "open" : "closed" }],
    };
  }

  /** @internal A node's last exchange failed, or the heartbeats fail. */
  private get failing(): boolean {
    return this.down.size > 0 || this.heartbeat.failingSinceMs !== undefined;
  }

  /** Live processes as last counted by the heartbeats. */
  get liveProcesses(): number {
    return this.heartbeat.live;
  }

  /**
   * The N the `'local'` fallback divides the limit by now: `expectedProcesses` or the heartbeats'
   * count (the largest answered within `heartbeatTtlMs` of the last answer: a Redis that restarted
   * or was flushed counts too few until every process beat again), whichever is larger; undefined
   * when there is no `expectedProcesses` and the others may not have counted this process yet (the
   * fallback then denies). A count not yet safe may lack processes, but those it has were live:
   * with `expectedProcesses` it is still a floor.
   */
  get fallbackProcesses(): number | undefined {
    const expected = this.config.expectedProcesses;
    const live = this.heartbeat.peak;
    if (expected === undefined) return this.heartbeat.counted(this.now(WHERE)) ? live : undefined;
    return live > expected ? live : expected;
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
    if (this.blockTable.size !== 0 && !this.closed && this.blockedLeft(k, now, true) > 0) {
      return false;
    }
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
   * empty answer, the failure policy). A blocked key is denied first, whatever the lease,
   * the store or the policy (`source: 'blocked'`). A denied request takes nothing.
   * @throws {TypeError} For a non-string key or a non-number cost; {RangeError} for a key
   *   longer than `maxKeyLength`, or NaN, a negative or an infinite cost;
   *   {@link RateLimitStoreError} when Redis fails, the lease ran out and `failure` is `'throw'`.
   */
  consume(key: string, cost?: number): LeasedDecision {
    const where = `${WHERE}.consume`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    return this.take(k, c, this.now(where));
  }

  /**
   * `consume(key, cost)` with a receipt (docs/semantics.md#receipts): the decision, its
   * `source`, and what it took and when, for {@link refund}`(receipt, units?)`. A charge the
   * lease, credit or the `'local'` fallback bucket admitted took `cost`; a denial, `'open'`
   * and a fallback limiter of yours took nothing from the shared bucket (`units` 0).
   * @example
   * const receipt = limiter.charge("user:42", 4000) // an LLM call's most
   * limiter.refund(receipt, 4000 - used)           // give back what it did not use
   * @throws Like {@link consume}.
   */
  charge(key: string, cost?: number): LeasedReceipt {
    const where = `${WHERE}.charge`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    const now = this.now(where);
    const d = this.take(k, c, now);
    const e = this.table.entries.get(k);
    const source = d.source;
    // Admitted by the lease, credit or the 'local' fallback bucket (not 'open', nor a
    // fallback limiter of yours: the only other sources an allowed decision has).
    const yours = source === "local" && typeof this.config.failure === "object";
    const took = d.allowed && c > 0 && e !== undefined && source !== "open" && !yours;
    if (!took) return new LeaseChargeReceipt(d, k, 0, now, now, this, 0, undefined, undefined, 0);
    // Refundable until the refill has repaid it (docs/redis.md#refunds-and-receipts-of-a-lease):
    // what the shared bucket, as this process sees it (its last count refilled since, less
    // what this process owes it, plus its lease), lacks of capacity after the charge, and at
    // least the charge itself, at refillPerSecond from now.
    const rate = this.refillPerSecond;
    const view = this.estimate(e, now) + e.tokens;
    const deficit = this.capacity - view > c ? this.capacity - view : c;
    const until = rate === 0 ? Number.POSITIVE_INFINITY : now + (deficit * 1000) / rate;
    const share = source === "local" ? e.fallback : undefined;
    return new LeaseChargeReceipt(d, k, c, now, until, this, e.epoch, e, share, e.refunded);
  }

  /**
   * Gives back units taken earlier and returns how many came back
   * (docs/redis.md#refunds-and-receipts-of-a-lease). Through the receipt of a {@link charge}:
   * `units` of what it took (default: all it still holds; a receipt gives back at most its units in
   * all), at most what the shared bucket's refill has not yet repaid of them
   * (`refillPerSecond x (refundableUntilMs - now) / 1000`, less the key's refunds since the charge;
   * all of it at a rate of 0), back where they came from: a lease's into this process's lease
   * (never above the lease cap, none while the key is blocked; the rest to the shared bucket with
   * the next batch, which takes it up to its capacity); credit's and the `'local'` fallback's off
   * the charge still owed (back into the credit or the fallback bucket that admitted them), the
   * rest as tokens as a lease's. Nothing after a `reset(key)` since the charge, once the key's
   * entry went (idle, or pushed out of a full table: its lease went back), nor after {@link close}.
   * Without a receipt: `cost` units (default 1), at most what the key's entry admitted and was not
   * given back, into its fallback bucket while it has one (never past its capacity), else into its
   * lease as above; a key without local state is left as it is (0).
   * @throws {TypeError} For a non-string key, a non-number cost or units, or another limiter's
   *   receipt. {RangeError} For NaN, a negative or an infinite cost or units.
   */
  refund(receipt: Receipt, units?: number): number;
  refund(key: string, cost?: number): number;
  refund(key: string | Receipt, cost?: number): number {
    const where = `${WHERE}.refund`;
    if (typeof key === "object" && key !== null) return this.refundReceipt(where, key, cost);
    const k = this.checkKey(where, key);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    const now = this.now(where);
    const e = this.table.entries.get(k);
    if (this.closed || e === undefined || !(c > 0)) return 0;
    // At most what the entry admitted and did not give back: what was never taken cannot come back.
    const left = e.admitted - e.refunded;
    const units = c < left ? c : left;
    if (!(units > 0)) return 0;
    const share = e.fallback;
    let given = units;
    if (share !== undefined) {
      // Into the fallback bucket, off the charge it owes (what it admits again is charged again).
      given = share.refund(units, now);
      const off = given < e.charge ? given : e.charge;
      if (off > 0) {
        e.charge -= off;
        this.table.settle(e);
      }
    } else this.intoLease(e, k, e.group, units, now);
    e.refunded += given;
    this.counters.refunded += given;
    return given;
  }

  /**
   * Blocks `key` for `durationMs` from now (a ban after abuse), in this process at once and, with
   * the next batch, in the store for every process (each learns it at its next exchange of the key:
   * docs/redis.md#blocks-shared-by-every-process). Every decision of the key is denied until then
   * (`source: 'blocked'`), whatever its lease, the store or the failure policy; its lease goes
   * back. A block that ends later already in place stays. Returns the ms the key is blocked here
   * from now (0 when the block table is full: the store gets the block all the same).
   * @throws {TypeError} For a non-string key or a non-number duration.
   * @throws {RangeError} If `durationMs` is not a finite number > 0, or the key is too long.
   */
  block(key: string, durationMs: number): number {
    return this.setBlock(`${WHERE}.block`, key, durationMs, false);
  }

  /**
   * {@link block}, except that a block in place is kept as it is (neither extended nor shortened),
   * here and in the store: what the HTTP middleware's `blockDurationMs` calls, so that requests
   * during a block do not extend it. Returns the ms left of the block in place, or of the new one.
   */
  blockOnce(key: string, durationMs: number): number {
    return this.setBlock(`${WHERE}.blockOnce`, key, durationMs, true);
  }

  /**
   * Lifts the block of `key` here at once and, with the next batch, in the store; the other
   * processes lift it at their next exchange of the key (a blocked key asked there checks
   * with the store at most once a second). Its usage stays. Returns whether it was blocked here.
   * @throws {TypeError} For a non-string key. {RangeError} For a key too long.
   */
  unblock(key: string): boolean {
    const where = `${WHERE}.unblock`;
    const k = this.checkKey(where, key);
    const lifted = this.blocks.lift(k, this.now(where));
    if (!this.closed) this.batcher.add(this.store.groupOf(k), k);
    return lifted;
  }

  /**
   * Milliseconds until the block this process knows of `key` ends (set here, or learned
   * from the store); 0 when none. Changes nothing.
   * @throws {TypeError} For a non-string key. {RangeError} For a key too long.
   */
  blockedMs(key: string): number {
    const where = `${WHERE}.blockedMs`;
    const k = this.checkKey(where, key);
    const now = this.now(where);
    return this.blockTable.size === 0 ? 0 : this.blockTable.blockedMs(k, now);
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
    const now = this.now(where);
    if (this.blockTable.size !== 0 && !this.closed) {
      const left = this.blockedLeft(k, now, false);
      if (left > 0) return this.blockedDecision(k, left);
    }
    return this.decide(k, c, now, false);
  }

  /**
   * Forgets `key`'s local state: its unused tokens go back with the next batch, its receipts give
   * nothing back from now, and its block is lifted as by {@link unblock}. A charge still owed is
   * sent all the same (a reset must not hand out credit again). The shared bucket is not reset.
   */
  reset(key: string): void {
    const where = `${WHERE}.reset`;
    const k = this.checkKey(where, key);
    const e = this.table.entries.get(k);
    if (typeof this.config.failure === "object") this.config.failure.reset(k);
    this.blocks.lift(k, this.now(where));
    if (!this.closed) this.batcher.add(this.store.groupOf(k), k);
    this.table.forget(k);
    if (e === undefined) return;
    if (e.pinned) {
      // It stays for its call, charge or fallback: its usage here is forgotten all the same.
      e.epoch++;
      e.admitted = 0;
      e.refunded = 0;
      e.giveAll();
      return;
    }
    this.table.remove(e, false);
    this.giveBack(k, e.group, e.tokens + e.give);
  }

  /**
   * Stops the timers, gives every unused token back to the shared buckets and sends the
   * charges still owed, waits for the exchanges under way and withdraws this process from
   * the heartbeats. From the call on, every decision is denied (`source: 'stopped'`,
   * `retryAfterMs` Infinity): a closed limiter holds no lease. Resolves when done; never
   * rejects (failures go to `onError`; what a failing store did not take is lost: unused
   * tokens, which admits less, and this process's unsent charges).
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
    for (const mark of this.down.values()) this.release(mark);
    for (const e of this.table.entries.values()) {
      e.giveAll();
      e.wants = false;
      if ((e.give > 0 || e.charge > 0) && !e.queued && !e.inFlight) this.enqueue(e);
    }
    // Blocks and lifts not sent yet still reach the store.
    for (const key of this.blocks.pendingKeys()) this.batcher.add(this.store.groupOf(key), key);
    // Rounds until nothing is under way: what went out, what came back meanwhile (grants of
    // calls under way go straight back), and what a failed call owes again. A failing store
    // holds close() at most three rounds with a failure; a late answer is no store failure
    // (Redis answered; the reply set right the offset to its clock): see CLOSE_ROUNDS.
    let failedRounds = 0;
    for (let round = 0; round < CLOSE_ROUNDS && failedRounds < 3; round++) {
      this.batcher.flush();
      if (this.inFlight.size === 0) break;
      const failedBefore = this.counters.failedExchanges - this.lateAnswers;
      await Promise.all([...this.inFlight]);
      if (this.counters.failedExchanges - this.lateAnswers > failedBefore) failedRounds++;
    }
    this.batcher.stop();
    await this.heartbeat.stop();
  }

  /** @internal */
  private checkKey(where: string, key: unknown): string {
    if (typeof key !== "string") throw mustBe(where, "key", "a string", key, TypeError);
    if (key.length <= this.config.maxKeyLength) return key;
    const range = `at most ${this.config.maxKeyLength} UTF-16 code units long (maxKeyLength)`;
    throw mustBe(where, "key", range, key.length);
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
    e.admitted += cost;
    e.lastUsedMs = now;
    e.demand.observe(cost, now);
    // No refill before the store said this process may have more.
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

  /** @internal consume() of a checked key and cost: the block table, the lease, else {@link decide}. */
  private take(key: string, cost: number, now: number): LeasedDecision {
    if (this.blockTable.size !== 0 && !this.closed) {
      const left = this.blockedLeft(key, now, true);
      if (left > 0) return this.blockedDecision(key, left);
    }
    const e = this.table.entries.get(key);
    if (e !== undefined && cost > 0 && fits(cost, e.tokens)) {
      this.spend(e, cost, now);
      return this.granted(e, "lease");
    }
    return this.decide(key, cost, now, true);
  }

  /**
   * @internal Ms left of `key`'s block here (0: none). `asked`: a request of the key, which
   * checks the block with the store again now and then (a lift made in another process).
   */
  private blockedLeft(key: string, now: number, asked: boolean): number {
    const left = this.blockTable.blockedMs(key, now);
    if (left > 0 && asked && this.blocks.probe(key, now)) {
      this.batcher.add(this.store.groupOf(key), key);
    }
    return left;
  }

  /** @internal The denial of a blocked key, `leftMs` more: at least that long, nothing left now. */
  private blockedDecision(key: string, leftMs: number): LeasedDecision {
    const e = this.table.entries.get(key);
    const view = e === undefined ? this.capacity : e.tokens + e.shared - e.charge - e.sentCharge;
    const d = this.shape(false, leftMs, view, "blocked");
    return { ...d, remaining: 0, resetAfterMs: d.resetAfterMs > leftMs ? d.resetAfterMs : leftMs };
  }

  /** @internal block() and blockOnce(). */
  private setBlock(where: string, key: string, durationMs: number, once: boolean): number {
    const k = this.checkKey(where, key);
    const ms = checkNumber(where, "durationMs", durationMs, 0, false);
    const now = this.now(where);
    const left = this.blocks.set(k, ms, once, now);
    if (!this.blocks.pending(k)) return left; // blockOnce of a key blocked here already
    this.blocked(this.table.entries.get(k));
    if (!this.closed) this.batcher.add(this.store.groupOf(k), k);
    return left;
  }

  /** @internal A key now blocked: its lease goes back with the next batch. */
  private blocked(e: LeaseEntry | undefined): void {
    if (e === undefined) return;
    e.wants = false;
    if (!(e.tokens > 0)) return;
    e.giveAll();
    if (!e.queued && !e.inFlight && !this.closed) this.enqueue(e);
  }

  /** @internal refund(receipt, units): see {@link refund}. */
  private refundReceipt(where: string, receipt: unknown, units: unknown): number {
    const r = checkReceipt(where, receipt, this, units);
    const c = r.receipt as LeaseChargeReceipt;
    const e = c.entry;
    if (this.closed || r.units === 0 || e === undefined || e.epoch !== c.epoch) return 0;
    const now = this.now(where);
    const rate = this.refillPerSecond;
    // The bucket rule (docs/semantics.md#receipts): what the refill has not yet repaid of
    // it, less the refunds of the key since the charge (the refill repaid those first).
    let bound = r.units;
    if (rate > 0) {
      bound = ((c.refundableUntilMs - now) * rate) / 1000 - (e.refunded - c.refundedBefore);
    }
    const give = bound < r.units ? bound : r.units;
    if (!(give > 0)) return 0;
    const key = c.key as string;
    const current = this.table.entries.get(key) === e ? e : undefined;
    if (c.source === "lease") this.intoLease(current, key, e.group, give, now);
    else {
      // Credit and the fallback were charged to the shared bucket: what is still owed is
      // not sent (and goes back into the fallback bucket that admitted it, or the credit);
      // what was sent comes back as tokens. One refund adds at most its units in all.
      let owed = 0;
      if (current !== undefined && current.charge > 0) {
        owed = give < current.charge ? give : current.charge;
        current.charge -= owed;
        if (c.source === "credit" && !current.leased) {
          const most = Math.min(this.config.initialCredit, this.capacity);
          current.credit = Math.min(most, current.credit + owed);
        }
        const share = c.share;
        if (share !== undefined && current.fallback === share) share.refund(owed, now);
        this.table.settle(current);
      }
      if (give - owed > 0) this.intoLease(current, key, e.group, give - owed, now);
    }
    c.refunded += give;
    e.refunded += give;
    this.counters.refunded += give;
    return give;
  }

  /**
   * @internal `units` back into the lease of `key` (its entry `e`, or undefined when it went):
   * up to the lease cap (none while the key is blocked), the rest to the shared bucket with
   * the next batch.
   */
  private intoLease(
    e: LeaseEntry | undefined,
    key: string,
    group: string,
    units: number,
    now: number,
  ): void {
    if (e === undefined) {
      this.giveBack(key, group, units);
      return;
    }
    let room = this.config.leaseCap - e.tokens;
    if (this.blockTable.size !== 0 && this.blockTable.blockedMs(key, now) > 0) room = 0;
    const kept = units < room ? units : room > 0 ? room : 0;
    e.tokens += kept;
    if (units - kept > 0) {
      e.give += units - kept;
      if (!e.queued && !e.inFlight) this.enqueue(e);
    }
  }

  /** @internal The slow path: no lease covers the cost. */
  private decide(key: string, cost: number, now: number, take: boolean): LeasedDecision {
    if (this.closed) return this.shape(false, Number.POSITIVE_INFINITY, 0, "stopped");
    let e = this.table.entries.get(key);
    if (e === undefined) {
      if (!take) {
        // A peek: what a first consume would answer.
        if (cost === 0) return this.shape(true, 0, 0, "lease");
        if (!fits(cost, this.config.initialCredit)) return this.pending();
        return this.shape(true, 0, this.capacity - cost, "credit");
      }
      // While the store answers, a full table of drained keys still takes a new one (the
      // drained key, if it comes back, gets its credit again, charged like any credit);
      // while it fails, a new key is refused rather than a drained one's fallback renewed.
      const force = !this.failing;
      if (!this.table.makeRoom(now, this.config.idleAfterMs, (x) => this.keep(x, now), force)) {
        return this.refuse(key, now);
      }
      this.full = false;
      e = new LeaseEntry(
        key,
        this.store.groupOf(key),
        Math.min(this.config.initialCredit, this.capacity),
        this.capacity,
        now,
        this.config.leaseHorizonMs / 4,
      );
      this.table.add(e);
      if (e.sharedAtMs !== Number.NEGATIVE_INFINITY) {
        // From its key's trace: the level then, refilled since (what `remaining` shows).
        e.shared = this.estimate(e, now);
        e.sharedAtMs = now;
      }
    }
    if (cost === 0 || fits(cost, e.tokens)) {
      if (take && cost > 0) this.spend(e, cost, now);
      return this.granted(e, "lease", take ? 0 : cost);
    }
    if (take) {
      e.lastUsedMs = now;
      e.demand.observe(cost, now);
    }
    if (!e.leased && fits(cost, e.credit)) {
      if (take) {
        e.credit -= cost;
        e.charge += cost;
        e.admitted += cost;
        this.counters.creditAdmitted += cost;
        this.request(e, cost);
      }
      return this.granted(e, "credit", take ? 0 : cost);
    }
    if (this.down.size > 0 && this.down.has(this.nodeOf(e.group, e.key))) {
      return this.failed(e, cost, now, take); // its node is down
    }
    if (cost > this.capacity) return this.shape(false, Number.POSITIVE_INFINITY, e.shared, "lease");
    if (now < e.deniedUntilMs) {
      const retryAfterMs = e.endless ? Number.POSITIVE_INFINITY : e.deniedUntilMs - now;
      return this.shape(false, retryAfterMs, e.shared, "lease");
    }
    if (take) this.request(e, cost);
    return this.pending();
  }

  /** @internal Denied until a lease arrives: nothing here to admit with, 0 left now. */
  private pending(): LeasedDecision {
    return this.shape(false, Math.max(NO_LEASE_RETRY_FLOOR_MS, this.leaseDelayMs), 0, "pending");
  }

  /**
   * @internal Whether a full table would rather keep `e` than make room with it: while the
   * store fails, an entry whose bucket was last seen less than full (a new entry would fall
   * back to a full share); otherwise one the store said has nothing for this process now
   * (a new entry would be admitted on credit again).
   */
  private keep(e: LeaseEntry, now: number): boolean {
    if (this.failing) return this.estimate(e, now) < this.capacity;
    return this.config.initialCredit > 0 && (now < e.deniedUntilMs || e.endless);
  }

  /** @internal A new key the full table cannot take: denied, with when to try again. */
  private refuse(key: string, now: number): LeasedDecision {
    let retryAfterMs = Math.max(NO_LEASE_RETRY_FLOOR_MS, this.leaseDelayMs);
    for (const mark of this.down.values()) {
      if (mark.retryAtMs - now > retryAfterMs) retryAfterMs = mark.retryAtMs - now;
    }
    if (!this.full) {
      this.full = true;
      const { size: keys, pinned } = this.table;
      this.config.onTableFull?.({ key, keys, pinned, retryAfterMs });
    }
    return this.shape(false, retryAfterMs, 0, "full");
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
    this.table.settle(e);
    this.batcher.add(e.group, e.key);
  }

  /**
   * @internal The node a group's calls go to now: the store's answer for one of its keys
   * (a cluster's master of the slot), else the group itself.
   */
  private nodeOf(group: string, key: string): string {
    const node = this.store.nodeOf?.(key);
    return node === undefined ? `group ${group}` : `node ${node}`;
  }

  /**
   * @internal What the shared bucket of `e` holds now as far as this process knows: the
   * last reply's count refilled since (at most full; below zero while a charge is repaid),
   * less what this process owes it; a key never answered for counts as full.
   */
  private estimate(e: LeaseEntry, now: number): number {
    let level = this.capacity;
    if (e.sharedAtMs !== Number.NEGATIVE_INFINITY) {
      const refilled = e.shared + ((now - e.sharedAtMs) * this.refillPerSecond) / 1000;
      if (refilled < level) level = refilled;
    }
    return level - e.charge - e.sentCharge;
  }

  /**
   * @internal When the shared bucket of `e` is full again, as this process last saw it, once
   * what `e` holds is given back (local clock, ms): -Infinity for a key never answered;
   * Infinity when it never refills.
   */
  private fullAtMs(e: LeaseEntry): number {
    if (e.sharedAtMs === Number.NEGATIVE_INFINITY) return Number.NEGATIVE_INFINITY;
    const missing = this.capacity - (e.shared + e.tokens + e.give - e.charge - e.sentCharge);
    if (!(missing > 0)) return e.sharedAtMs;
    const rate = this.refillPerSecond;
    return rate > 0 ? e.sharedAtMs + (missing * 1000) / rate : Number.POSITIVE_INFINITY;
  }

  /** @internal A decision of the failure policy for a key whose lease ran out. */
  private failed(e: LeaseEntry, cost: number, now: number, take: boolean): LeasedDecision {
    if (take) {
      this.counters.fallbackDecisions++;
      this.request(e, cost);
    }
    const policy = this.config.failure;
    if (policy === "open") return this.shape(true, 0, this.capacity - cost, "open");
    if (policy === "closed") return this.shape(false, FAIL_CLOSED_RETRY_AFTER_MS, 0, "closed");
    if (policy === "throw") {
      const operation = `${WHERE}.${take ? "consume" : "peek"}`;
      const message = `${operation}: Redis failed and the lease of this key ran out`;
      const timedOut = this.lastError instanceof StoreTimeoutError;
      throw new RateLimitStoreError(message, { cause: this.lastError, operation, timedOut });
    }
    if (typeof policy === "object") {
      const local = take ? policy.consume(e.key, cost) : policy.peek(e.key, cost);
      return { ...local, source: "local" };
    }
    let share = e.fallback;
    if (share === undefined) {
      const n = this.fallbackProcesses;
      if (n === undefined) {
        // Not counted by the others yet: this process's share is unknown, so it is none,
        // until the store is tried again (its node's back-off, or the next heartbeat).
        const mark = this.down.get(this.nodeOf(e.group, e.key));
        const ms = mark === undefined ? this.heartbeat.intervalMs : mark.retryAtMs - now;
        return this.shape(false, Math.max(NO_LEASE_RETRY_FLOOR_MS, ms), 0, "local");
      }
      let start = this.estimate(e, now) / n;
      const paused = e.pausedShare;
      if (paused !== undefined) {
        // Failing again: go on from the last fallback bucket, refilled at this share's rate
        // while the store answered (what the leases did meanwhile is in the estimate).
        const resumed =
          paused.available(e.pausedAtMs) + ((now - e.pausedAtMs) * this.refillPerSecond) / n / 1000;
        if (resumed < start) start = resumed;
      }
      share = new LocalShare(this.capacity / n, this.refillPerSecond / n / 1000, start, now);
      if (take) {
        e.fallback = share;
        e.pausedShare = undefined;
        this.table.settle(e);
      }
    }
    if (share.take(cost, now, take)) {
      if (take) {
        e.charge += cost;
        e.admitted += cost;
      }
      // A peek answers what the consume would: what is left after the cost.
      return this.shape(true, 0, share.available(now) - (take ? 0 : cost), "local");
    }
    return this.shape(false, share.waitMs(cost, now), share.available(now), "local");
  }

  /**
   * @internal An allowed decision from the lease or credit: what is left after it, the
   * lease plus the shared bucket's last count, less what this process still owes it, less
   * `ahead` (a peek's cost, not taken: what its consume would leave).
   */
  private granted(e: LeaseEntry, source: LeasedSource, ahead = 0): LeasedDecision {
    return this.shape(true, 0, e.tokens + e.shared - e.charge - e.sentCharge - ahead, source);
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
    if (this.busy.has(key)) {
      // One call per key at a time (and each key once in a call): this waits for it.
      this.waitingForBusy.add(key);
      return undefined;
    }
    const returned = this.returns.get(key) ?? 0;
    if (returned > 0) this.returns.delete(key);
    // A block change to send, or a blocked key to ask about (null).
    const change = this.blocks.size === 0 ? undefined : this.blocks.outgoing(key, now);
    const block = change ?? undefined;
    const e = this.table.entries.get(key);
    if (e === undefined || !e.queued) {
      // Not the entry's exchange (it has one under way, or none is due): its answer will
      // not be taken for the entry's.
      if (!(returned > 0) && change === undefined) return undefined;
      this.busy.add(key);
      return { key, give: returned, charge: 0, want: 0, need: 0, demand: MIN_DEMAND, block };
    }
    e.queued = false;
    const give = e.give + returned;
    e.give = 0;
    const charge = e.charge;
    e.charge = 0;
    let want = 0;
    let need = 0;
    const rate = e.demand.rate(now);
    const blocked = this.blockTable.size !== 0 && this.blockTable.blockedMs(key, now) > 0;
    if (e.wants && !this.closed && !blocked) {
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
    // A fallback bucket ends with an answer, so it asks for one even with nothing to send.
    const probe = e.probe || e.fallback !== undefined;
    e.wants = false;
    e.probe = false;
    e.needCost = 0;
    if (give <= 0 && want <= 0 && charge <= 0 && !probe && change === undefined) {
      this.table.settle(e);
      return undefined;
    }
    e.inFlight = true;
    this.busy.add(key);
    e.sentCharge = charge;
    const perSecond = rate * 1000;
    const demand = perSecond > MIN_DEMAND ? perSecond : MIN_DEMAND;
    e.sent = { key, give, charge, want, need, demand, block };
    return e.sent;
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
    const mark = this.down.get(node);
    if (mark !== undefined && !mark.ready && !this.closed) {
      // Back off: the keys wait for the next batch after it (its first call is the probe).
      let waiting = mark.waiting.get(group);
      if (waiting === undefined) mark.waiting.set(group, (waiting = new Set()));
      for (const key of keys) waiting.add(key);
      return false;
    }
    const requests: LeaseRequest[] = [];
    for (const key of keys) {
      const r = this.requestOf(key, now);
      if (r !== undefined) requests.push(r);
    }
    if (requests.length === 0) return false;
    this.counters.exchanges++;
    for (const r of requests) {
      this.counters.tokensGivenBack += r.give;
      this.counters.tokensCharged += r.charge;
    }
    let call: Promise<LeaseExchange>;
    try {
      call = this.store.exchange(requests, this.processId, ++this.sequence);
    } catch (error) {
      call = Promise.reject(error);
    }
    // Settling an answer cannot fail but through a bad clock reading or a throwing hook;
    // either is reported, and `done` never rejects (close() awaits it).
    const done = call
      .then(
        (exchange) => {
          this.free(group, requests);
          this.received(group, node, requests, exchange, now);
        },
        (error: unknown) => {
          this.free(group, requests);
          this.lost(node, requests, error, false);
        },
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
    // The store answered (late or not): if this process's heartbeats fail meanwhile, the
    // others' may not, and its count is stale (Heartbeat.counted).
    const now = this.now(WHERE);
    this.heartbeat.exchangeAnswered(now);
    if (exchange.late) {
      this.lateAnswers++;
      this.lost(node, requests, new Error("the lease call reached Redis after its deadline"), true);
      return;
    }
    // The delay from asking to having: a quick rise, a slow decay.
    const delay = now - sentMs + this.config.batchWindowMs;
    this.leaseDelayMs = delay > this.leaseDelayMs ? delay : this.leaseDelayMs * 0.9 + delay * 0.1;
    this.up(node);
    if (this.lateNodes.size > 0) this.lateNodes.delete(node);
    this.settled("lease", requests.length, undefined);
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i] as LeaseRequest;
      const grant = exchange.grants[i];
      if (grant === undefined) continue;
      this.counters.tokensTaken += grant.granted;
      // The key's block in the store: learned, lifted, or set again (docs/redis.md#blocks-shared-by-every-process).
      const flags = this.blocks.answered(r.key, r.block, grant, now);
      if (flags & SEND && !this.closed) this.batcher.add(group, r.key);
      const e = this.table.entries.get(r.key);
      if (e === undefined || e.sent !== r) {
        // Not the entry's exchange (the entry went meanwhile): its grant goes straight back.
        this.giveBack(r.key, group, grant.granted);
        if (flags & BLOCKED) this.blocked(e);
        continue;
      }
      e.inFlight = false;
      e.sent = undefined;
      e.sentCharge = 0;
      e.leased = true;
      e.credit = 0;
      e.shared = grant.tokens;
      e.sharedAtMs = now;
      // The store answers again: what the fallback admitted is charged (sent or owed); a
      // bucket not full again is kept, should the store fail again soon.
      const share = e.fallback;
      if (share !== undefined) {
        e.fallback = undefined;
        if (share.available(now) < share.capacity - 1e-9) {
          e.pausedShare = share;
          e.pausedAtMs = now;
        }
      }
      if (grant.granted > 0) {
        e.tokens += grant.granted;
        e.grantedAtMs = now;
      }
      if (r.want > 0) {
        // An endless wait (no refill) ends only with give-backs (other processes' idle
        // leases, refunds, resets): the store is asked again after idleAfterMs, when idle
        // leases have gone back, the denials meanwhile saying Infinity all the same.
        e.endless = !(grant.waitMs < Number.POSITIVE_INFINITY);
        const waitMs = e.endless ? this.config.idleAfterMs : grant.waitMs;
        e.deniedUntilMs = waitMs > 0 ? now + waitMs : Number.NEGATIVE_INFINITY;
      }
      if ((this.closed || flags & BLOCKED) && e.tokens > 0) e.giveAll();
      // What came meanwhile (a charge, tokens a refund or a block gave back) goes next.
      if (e.charge > 0 || e.give > 0) this.enqueue(e);
      else this.table.settle(e);
    }
  }

  /** @internal A call settled: its keys may go in the next, those that waited for it do. */
  private free(group: string, requests: readonly LeaseRequest[]): void {
    for (const r of requests) {
      this.busy.delete(r.key);
      if (this.waitingForBusy.delete(r.key)) this.batcher.add(group, r.key);
    }
  }

  /** @internal An exchange failed or came late (that run wrote nothing; an earlier one may have). */
  private lost(node: string, requests: LeaseRequest[], error: unknown, late: boolean): void {
    this.counters.failedExchanges++;
    this.lastError = error;
    const now = this.now(WHERE);
    const mark = this.down.get(node);
    // A late answer is an answer: the node is up, only the deadline was wrong, and this answer set
    // right the offset to the node's clock it was made of (a process clock that went back, a
    // failover to a server whose clock is ahead). The first in a row ends any mark and its keys go
    // again with the next batch window, with no back-off and no fallback; another right after it
    // says the offset was not the cause: the back-off starts over, as for a failure.
    const again = late && !this.lateNodes.has(node);
    if (late) this.lateNodes.add(node);
    if (again) this.up(node);
    else {
      const backoffMs =
        mark === undefined || late
          ? Math.max(FIRST_BACKOFF_MS, this.config.batchWindowMs)
          : Math.min(MAX_BACKOFF_MS, mark.backoffMs * 2);
      const waiting = mark?.waiting ?? new Map<string, Set<string>>();
      const next: DownMark = { retryAtMs: now + backoffMs, backoffMs, ready: false, waiting };
      this.down.set(node, next);
      // Once it passed, the keys that waited go with the next batch (unless a later mark took over).
      this.config.scheduler(() => {
        next.ready = true;
        if (this.down.get(node) === next || !this.down.has(node)) this.release(next);
      }, backoffMs);
    }
    for (const r of requests) {
      const e = this.table.entries.get(r.key);
      if (r.block !== undefined && this.blocks.failed(r.key, r.block, late, now) && !this.closed) {
        this.batcher.add(this.store.groupOf(r.key), r.key);
      }
      if (e === undefined || e.sent !== r) continue;
      e.inFlight = false;
      e.sent = undefined;
      // A give-back that may have been applied is never sent twice (it would add tokens),
      // even after a late answer: the call may have run before, in time, its answer lost
      // with a connection, and the late run is the client sending it again. A charge is
      // sent again (twice costs this key time, never the bound).
      e.charge += e.sentCharge;
      e.sentCharge = 0;
      // Sent again at once, the call asks again for what it asked (the decision that asked
      // for it was told the lease is on its way).
      if (again && r.want > 0 && !this.closed) {
        e.wants = true;
        const cost = r.need + e.tokens;
        if (cost > e.needCost) e.needCost = cost;
      }
      // Whatever it owes or holds is sent again once the back-off allows; so is a probe for
      // a fallback bucket, which only an answer ends.
      if ((again && e.wants) || e.charge > 0 || e.give > 0 || e.fallback !== undefined) {
        this.enqueue(e);
      } else this.table.settle(e);
    }
    this.settled("lease", requests.length, late ? new StoreTimeoutError(0) : error, late);
  }

  /** @internal Puts the keys a down mark held back into the batcher. */
  private release(mark: DownMark): void {
    for (const [group, keys] of mark.waiting) for (const key of keys) this.batcher.add(group, key);
    mark.waiting.clear();
  }

  /** @internal `node` answered: its mark ends and the keys it held go with the next batch. */
  private up(node: string): void {
    const mark = this.down.get(node);
    if (mark === undefined) return;
    this.down.delete(node);
    this.release(mark);
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
    const where = `${WHERE}.${operation}`;
    // A timeout's message says so itself; a late call and other failures are Redis's.
    const timeout = error instanceof StoreTimeoutError && !late;
    const detail = late
      ? "the call reached Redis after its deadline (nothing was charged)"
      : error instanceof Error
        ? error.message
        : describe(error);
    const message = `${where}: ${timeout ? "" : "Redis failed: "}${detail}`;
    const cause = { cause: error, operation: where, timedOut: timeout || late };
    onError({ error: new RateLimitStoreError(message, cause), operation, keys });
  }

  /** @internal One run of the periodic sweep. */
  private sweep(): void {
    const now = this.now(WHERE);
    if (this.blocks.size > 0) this.blocks.sweep(now, 4096);
    const { idleAfterMs, leaseTtlMs } = this.config;
    const count = Math.min(this.table.size, 4096);
    let probed: Set<string> | undefined;
    for (const e of this.table.chunk(count)) {
      if (e.inFlight || e.queued) continue;
      if (this.down.size > 0) {
        // A node marked down past its back-off, with nothing queued for it: one probe, so
        // that the mark ends once it answers (nothing stays down after an outage ended).
        const node = this.nodeOf(e.group, e.key);
        const mark = this.down.get(node);
        if (mark?.ready && !(probed ??= new Set()).has(node)) {
          probed.add(node);
          e.probe = true;
          this.enqueue(e);
          continue;
        }
      }
      const idle = now - e.lastUsedMs >= idleAfterMs;
      if (idle && e.isFree(now) && !this.keep(e, now)) {
        this.table.remove(e);
        this.table.counts.evictedIdle++;
        continue;
      }
      if (e.tokens <= 0) continue;
      if (idle) {
        e.giveAll();
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
    // Marks past their back-off that no key's call probed: on one server a heartbeat asks
    // (its answer ends them); on a cluster a node no key of this process waits for is
    // forgotten (its next call will tell). Either way no mark outlives the outage.
    if (this.down.size === 0) return;
    for (const [node, mark] of this.down) {
      if (!mark.ready || probed?.has(node) || mark.waiting.size > 0) continue;
      if (this.oneNode) {
        this.heartbeat.beatNow();
        return;
      }
      this.down.delete(node);
    }
  }
}

/** The demand sent for a key that asks nothing (tokens per second): > 0, as the store requires. */
const MIN_DEMAND = 1e-9;
