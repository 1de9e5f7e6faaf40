import { checkClock, checkNumber, checkOptionNames, checkOptions } from "../../core/errors.js";
import { type Clock, systemClock } from "../../core/limiter.js";
import { optionNames } from "../../core/option-names.js";
import { checkHook } from "../../store/options.js";
import {
  type HeartbeatAnswer,
  type LeaseExchange,
  type LeaseGrant,
  type LeaseRequest,
  type LeaseStore,
  type Scheduler,
  timerScheduler,
} from "./exchange.js";
import {
  type BucketConfig,
  type BucketState,
  exchangeKey,
  freshBucket,
  repeated,
} from "./shared-bucket.js";

/** Options of {@link MemoryLeaseStore}. */
export interface MemoryLeaseStoreOptions {
  /** Most tokens a key's shared bucket holds (each starts full): a finite number > 0. */
  readonly capacity: number;
  /** Tokens added to a key's bucket per second: a finite number >= 0. */
  readonly refillPerSecond: number;
  /** The simulation's clock, in ms; give the limiters the same one. @default systemClock */
  readonly clock?: Clock | undefined;
  /** Delay of every answer in ms, through `scheduler` (0: answers at once). @default 0 */
  readonly latencyMs?: number | undefined;
  /** The simulation's timers, for `latencyMs`. @default setTimeout, unref'd */
  readonly scheduler?: Scheduler | undefined;
  /**
   * A process contending for a key that does not ask again within this many ms (plus twice
   * the wait it was given) loses what was set aside for it; give the limiters' `idleAfterMs`.
   * @default 2000
   */
  readonly staleMs?: number | undefined;
}

const WHERE = "MemoryLeaseStore";
const OPTIONS = optionNames<MemoryLeaseStoreOptions>()([
  "capacity",
  "refillPerSecond",
  "clock",
  "latencyMs",
  "scheduler",
  "staleMs",
]);

/** One key's shared bucket and record in a {@link MemoryLeaseStore}. */
interface Bucket {
  readonly state: BucketState;
  taken: number;
  given: number;
  charged: number;
}

/** What a key's record holds: tokens taken, given back and charged, in all. */
export interface LeaseRecord {
  readonly taken: number;
  readonly given: number;
  readonly charged: number;
}

/**
 * A {@link LeaseStore} in memory, with the lease script's semantics (its model, `exchangeKey`
 * in src/redis/leased/shared-bucket.ts), on an injected clock: the shared bucket of a
 * deterministic simulation (N limiters on one store, a manual clock and scheduler) and of the
 * tests. With `latencyMs`, answers arrive that long after the call through `scheduler`;
 * `failing` makes every call reject; `flush()` forgets every bucket (as `FLUSHALL`). Options:
 * {@link MemoryLeaseStoreOptions}.
 */
export class MemoryLeaseStore implements LeaseStore {
  /** Every call rejects while true. */
  failing = false;
  /** Calls made (exchanges and heartbeats). */
  roundTrips = 0;
  /** @internal */
  private readonly buckets = new Map<string, Bucket>();
  /** @internal Live processes: when each lapses, and the heartbeat (sequence) that made it live. */
  private readonly live = new Map<string, { untilMs: number; join: number }>();
  /** @internal */
  private readonly clock: Clock;
  /** @internal */
  private readonly latencyMs: number;
  /** @internal */
  private readonly scheduler: Scheduler;
  /** @internal */
  private readonly bucket: BucketConfig;

  /** Most tokens a key's bucket holds. */
  readonly capacity: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;

  /**
   * @throws {TypeError} For options that are not an object, an unknown option or a wrong type;
   *   {RangeError} for a number out of range
   *   (`MemoryLeaseStore: capacity must be a finite number > 0, got 0`).
   */
  constructor(options: MemoryLeaseStoreOptions) {
    const o = checkOptions<MemoryLeaseStoreOptions>(WHERE, options);
    checkOptionNames(WHERE, o, OPTIONS);
    this.capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    this.refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.latencyMs = checkNumber(WHERE, "latencyMs", o.latencyMs, 0, true, 0);
    this.scheduler = checkHook<Scheduler>(WHERE, "scheduler", o.scheduler) ?? timerScheduler;
    const staleMs = checkNumber(WHERE, "staleMs", o.staleMs, 0, true, 2000);
    this.bucket = { capacity: this.capacity, refillPerSecond: this.refillPerSecond, staleMs };
  }

  groupOf(): string {
    return "";
  }

  /** Tokens in `key`'s shared bucket now (below zero while charges are being repaid). */
  tokens(key: string): number {
    const b = this.buckets.get(key);
    if (b === undefined) return this.capacity;
    const now = this.clock();
    const t = now > b.state.anchorMs ? now : b.state.anchorMs;
    const refilled = b.state.tokens + ((t - b.state.anchorMs) * this.refillPerSecond) / 1000;
    return refilled < this.capacity ? refilled : this.capacity;
  }

  /** Ms until `key`'s block ends in this store, 0 when it is not blocked. */
  blockedMs(key: string): number {
    const b = this.buckets.get(key);
    if (b === undefined) return 0;
    const left = b.state.blockedUntilMs - this.clock();
    return left > 0 ? left : 0;
  }

  /** The record of `key`: tokens taken, given back and charged. */
  record(key: string): LeaseRecord {
    const b = this.buckets.get(key);
    return { taken: b?.taken ?? 0, given: b?.given ?? 0, charged: b?.charged ?? 0 };
  }

  /** Forgets every bucket and live process, as `FLUSHALL` does (the records too). */
  flush(): void {
    this.buckets.clear();
    this.live.clear();
  }

  /**
   * One exchange (LeaseStore.exchange). A call run again (same process and sequence) is
   * answered as it was, not applied twice: each key keeps each process's last call, for as
   * long as this store keeps the key (it has no deadline to drop them at).
   */
  exchange(
    requests: readonly LeaseRequest[],
    processId: string,
    sequence: number,
  ): Promise<LeaseExchange> {
    return this.answer(() => {
      const now = this.clock();
      const grants: LeaseGrant[] = requests.map((r) => {
        let b = this.buckets.get(r.key);
        if (b === undefined) {
          b = { state: freshBucket(this.capacity, now), taken: 0, given: 0, charged: 0 };
          this.buckets.set(r.key, b);
        }
        let answer = repeated(b.state, processId, sequence, now);
        if (answer === undefined) {
          answer = exchangeKey(b.state, r, processId, now, this.bucket, sequence, Infinity);
          b.taken += answer.granted;
          b.given += answer.back;
          b.charged += r.charge > 0 ? r.charge : 0;
        }
        const { back, ...grant } = answer;
        return grant;
      });
      return { late: false, grants };
    });
  }

  /**
   * One heartbeat (LeaseStore.heartbeat): a heartbeat run again while its membership lasts
   * answers `joined` as its first run did.
   */
  heartbeat(
    processId: string,
    ttlMs: number,
    leave: boolean,
    sequence: number,
  ): Promise<HeartbeatAnswer> {
    return this.answer(() => {
      const now = this.clock();
      for (const [id, m] of this.live) if (m.untilMs < now) this.live.delete(id);
      const member = this.live.get(processId);
      if (leave) this.live.delete(processId);
      else if (member === undefined)
        this.live.set(processId, { untilMs: now + ttlMs, join: sequence });
      else member.untilMs = now + ttlMs;
      const joined = !leave && (member === undefined || member.join === sequence);
      return { live: this.live.size, joined };
    });
  }

  /** @internal */
  private answer<T>(run: () => T): Promise<T> {
    this.roundTrips++;
    if (this.failing) return Promise.reject(new Error("store down"));
    if (this.latencyMs <= 0) return Promise.resolve(run());
    const schedule = this.scheduler;
    return new Promise((resolve, reject) => {
      schedule(() => {
        if (this.failing) reject(new Error("store down"));
        else resolve(run());
      }, this.latencyMs);
    });
  }
}
