import { checkClock, checkNumber, checkOptionNames, checkOptions, describe } from "../../errors.js";
import { type Clock, systemClock } from "../../limiter.js";
import { fits } from "../../numeric.js";
import { optionNames } from "../../option-names.js";
import {
  type LeaseExchange,
  type LeaseGrant,
  type LeaseRequest,
  type LeaseStore,
  type Scheduler,
  timerScheduler,
} from "./store.js";

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
}

const WHERE = "MemoryLeaseStore";
const OPTIONS = optionNames<MemoryLeaseStoreOptions>()([
  "capacity",
  "refillPerSecond",
  "clock",
  "latencyMs",
  "scheduler",
]);

/** One key's shared bucket and record in a {@link MemoryLeaseStore}. */
interface Bucket {
  tokens: number;
  anchorMs: number;
  taken: number;
  given: number;
}

/**
 * A {@link LeaseStore} in memory, with the lease script's semantics (give back never
 * above capacity, then take up to `want` when `need` fits, else the time until it does),
 * on an injected clock: the shared bucket of a deterministic simulation (N limiters on one
 * store, a manual clock and scheduler) and of the tests. With `latencyMs`, answers arrive
 * that long after the call through `scheduler`; `failing` makes every call reject.
 * Options: {@link MemoryLeaseStoreOptions}.
 */
export class MemoryLeaseStore implements LeaseStore {
  /** Every call rejects while true. */
  failing = false;
  /** Calls made (exchanges and heartbeats). */
  roundTrips = 0;
  /** @internal */
  private readonly buckets = new Map<string, Bucket>();
  /** @internal */
  private readonly live = new Map<string, number>();
  /** @internal */
  private readonly clock: Clock;
  /** @internal */
  private readonly latencyMs: number;
  /** @internal */
  private readonly scheduler: Scheduler;

  /** Most tokens a key's bucket holds. */
  readonly capacity: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;

  /**
   * `new MemoryLeaseStore({ capacity, refillPerSecond, clock, latencyMs?, scheduler? })`.
   * @throws {TypeError} For options that are not an object, an unknown option or a wrong
   *   type; {RangeError} for a number out of range
   *   (`MemoryLeaseStore: capacity must be a finite number > 0, got 0`).
   */
  constructor(options: MemoryLeaseStoreOptions) {
    const o = checkOptions<MemoryLeaseStoreOptions>(WHERE, options);
    checkOptionNames(WHERE, o, OPTIONS);
    this.capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    this.refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.latencyMs =
      o.latencyMs === undefined ? 0 : checkNumber(WHERE, "latencyMs", o.latencyMs, 0, true);
    if (o.scheduler !== undefined && typeof o.scheduler !== "function") {
      throw new TypeError(`${WHERE}: scheduler must be a function, got ${describe(o.scheduler)}`);
    }
    this.scheduler = o.scheduler ?? timerScheduler;
  }

  groupOf(): string {
    return "";
  }

  /** Tokens in `key`'s shared bucket now. */
  tokens(key: string): number {
    return this.refill(key, this.clock()).tokens;
  }

  /** The record of `key`: tokens taken and given back. */
  record(key: string): { readonly taken: number; readonly given: number } {
    const b = this.buckets.get(key);
    return { taken: b?.taken ?? 0, given: b?.given ?? 0 };
  }

  exchange(requests: readonly LeaseRequest[]): Promise<LeaseExchange> {
    return this.answer(() => {
      const now = this.clock();
      const grants: LeaseGrant[] = requests.map((r) => {
        const b = this.refill(r.key, now);
        const back = Math.max(0, Math.min(r.give, this.capacity - b.tokens));
        b.tokens += back;
        b.given += back;
        let granted = 0;
        let waitMs = 0;
        if (r.want > 0) {
          if (fits(r.need, b.tokens)) {
            granted = Math.max(0, Math.min(r.want, b.tokens));
            b.tokens -= granted;
            b.taken += granted;
          } else {
            waitMs =
              this.refillPerSecond > 0
                ? ((r.need - b.tokens) * 1000) / this.refillPerSecond
                : Number.POSITIVE_INFINITY;
          }
        }
        return { granted, waitMs, tokens: b.tokens };
      });
      return { late: false, grants };
    });
  }

  heartbeat(processId: string, ttlMs: number, leave: boolean): Promise<number> {
    return this.answer(() => {
      const now = this.clock();
      for (const [id, until] of this.live) if (until < now) this.live.delete(id);
      if (leave) this.live.delete(processId);
      else this.live.set(processId, now + ttlMs);
      return this.live.size;
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

  /** @internal */
  private refill(key: string, now: number): Bucket {
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.capacity, anchorMs: now, taken: 0, given: 0 };
      this.buckets.set(key, b);
    } else if (now > b.anchorMs) {
      b.tokens = Math.min(
        this.capacity,
        b.tokens + ((now - b.anchorMs) * this.refillPerSecond) / 1000,
      );
      b.anchorMs = now;
    }
    return b;
  }
}
