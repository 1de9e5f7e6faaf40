import type { Clock } from "../../limiter.js";
import { fits } from "../../numeric.js";
import type { LeaseExchange, LeaseGrant, LeaseRequest, LeaseStore, Scheduler } from "./store.js";

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
  private readonly scheduler: Scheduler | undefined;

  /**
   * @param capacity Most tokens a key's bucket holds (each starts full).
   * @param refillPerSecond Tokens added per second.
   * @param clock The simulation's clock (ms).
   * @param latencyMs Delay of every answer, through `scheduler` (0: answers at once).
   * @param scheduler The simulation's timers, for `latencyMs`.
   */
  constructor(
    readonly capacity: number,
    readonly refillPerSecond: number,
    clock: Clock,
    latencyMs = 0,
    scheduler?: Scheduler,
  ) {
    this.clock = clock;
    this.latencyMs = latencyMs;
    this.scheduler = scheduler;
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
    if (this.latencyMs <= 0 || this.scheduler === undefined) return Promise.resolve(run());
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
