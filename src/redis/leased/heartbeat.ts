import type { HeartbeatAnswer, LeaseStore, Scheduler } from "./exchange.js";

/** The first retry after a failed heartbeat (ms); it doubles up to {@link MAX_RETRY_MS}. */
const FIRST_RETRY_MS = 100;
/** The longest wait between failed heartbeats (ms), or the beat interval if shorter. */
const MAX_RETRY_MS = 1000;
/**
 * How late, in beat intervals after the last answer, the next heartbeat may be sent for the count
 * to stay safe (a timer fires late on a busy event loop; a stopped process sends none); a process
 * is counted after as long a membership, so that every other process beat meanwhile.
 */
const LATE_INTERVALS = 1.25;
/**
 * The beat that makes a new membership counted goes this much (ms) after it would be due:
 * a timer may fire up to a millisecond early by the clock the membership is measured on
 * (Node's `setTimeout` against `performance.now()`), and a quick answer would then come
 * just short of it, leaving the process uncounted until the beat after.
 */
const EARLY_TIMER_MS = 2;

/**
 * This process's heartbeat: announces it as live every third of `ttlMs` (after a failure sooner,
 * from 100 ms doubling up to 1 s) and keeps the number of live processes from the answers of the
 * last `ttlMs`, the largest of which ({@link peak}) the `'local'` fallback divides the limit by.
 *
 * That count is a safe divisor only when the others counted this process and it counted them: it
 * has been live for an interval and a quarter (each other process beat meanwhile) and beat on time
 * until the store failed (a stopped process sent nothing while the others counted on). A membership
 * the store forgot (a restart, `FLUSHALL`: `joined`) or that a failed call may have renewed unseen
 * (its answer lost) starts that wait again; a store that answers exchanges after the heartbeats
 * began to fail may answer the others too, whose counts go on. {@link counted} says whether all
 * that holds (docs/distributed.md).
 */
export class Heartbeat {
  /** Live processes, this one included, as last counted (>= 1; 1 until an answer). */
  live = 1;
  /** The counts answered within `ttlMs` of the last answer, oldest first. */
  private readonly recent: { atMs: number; live: number }[] = [];
  /** Heartbeats sent (also each call's sequence number: LeaseStore.heartbeat). */
  sent = 0;
  /** The last answered heartbeat (local clock, ms); -Infinity: none yet. */
  lastOkAtMs = Number.NEGATIVE_INFINITY;
  /** The first answered heartbeat of the current membership (unbroken by a lapse). */
  private streakStartMs = Number.NEGATIVE_INFINITY;
  /** The first failed heartbeat since the last answered one; undefined: none failed. */
  failingSinceMs: number | undefined = undefined;
  private cancel: (() => void) | undefined;
  private stopped = false;
  /** A probe ({@link beatNow}) is under way. */
  private probing = false;
  private retryMs = FIRST_RETRY_MS;
  /** When the first heartbeat since the last answer was sent; undefined: none since. */
  private pendingSinceMs: number | undefined = undefined;
  /** A heartbeat failed since the last answer: it may have run, and joined, unseen. */
  private unsure = false;
  /** The store answered an exchange after the heartbeats began to fail. */
  private answeredWhileFailing = false;

  constructor(
    private readonly store: LeaseStore,
    readonly processId: string,
    private readonly ttlMs: number,
    private readonly scheduler: Scheduler,
    private readonly now: () => number,
    private readonly onResult: (error: unknown) => void,
  ) {}

  /** Ms between heartbeats while they are answered. */
  get intervalMs(): number {
    return this.ttlMs / 3;
  }

  /**
   * Whether the last count is a safe divisor at `nowMs` (see the class doc): counted for an
   * interval and a quarter, the next beat sent (or due) within as long of the last answer, and
   * no exchange answered while the heartbeats failed.
   */
  counted(nowMs: number): boolean {
    const lateMs = this.intervalMs * LATE_INTERVALS;
    if (!(this.lastOkAtMs - this.streakStartMs >= lateMs)) return false;
    if (this.answeredWhileFailing) return false;
    const nextSentMs = this.pendingSinceMs ?? nowMs;
    return nextSentMs - this.lastOkAtMs <= lateMs;
  }

  /**
   * The most live processes an answer counted within `ttlMs` of the last one (>= 1): each may be
   * live still (a membership lasts `ttlMs`); a Redis restarted or flushed since counts too few.
   */
  get peak(): number {
    let most = this.live;
    for (const c of this.recent) if (c.live > most) most = c.live;
    return most;
  }

  /** The store answered an exchange at `nowMs`: if the heartbeats fail, the count is not safe. */
  exchangeAnswered(nowMs: number): void {
    const since = this.failingSinceMs;
    if (since !== undefined && nowMs > since) this.answeredWhileFailing = true;
  }

  /** Sends one heartbeat now, beside the schedule (a probe of a store marked down). */
  beatNow(): void {
    if (this.stopped || this.probing) return;
    this.probing = true;
    this.send().finally(() => {
      this.probing = false;
    });
  }

  /** Sends one now and keeps sending. */
  start(): void {
    if (this.stopped) return;
    this.cancel = this.scheduler(() => this.start(), this.intervalMs);
    void this.send();
  }

  /** One heartbeat call and its handling; resolves when it settled. */
  private send(): Promise<void> {
    this.sent++;
    this.pendingSinceMs ??= this.now();
    let call: Promise<HeartbeatAnswer>;
    try {
      call = this.store.heartbeat(this.processId, this.ttlMs, false, this.sent);
    } catch (error) {
      call = Promise.reject(error);
    }
    return call
      .then(
        ({ live, joined }) => {
          if (this.stopped) return;
          const now = this.now();
          // A new membership: the first, one that lapsed, or one the store forgot (a
          // restart or a flush emptied the set, so the others' counts lack this process
          // until they beat again, and this count lacks them); or maybe one, when a
          // heartbeat failed since the last answer (it may have run and joined unseen).
          if (joined || this.unsure || now - this.lastOkAtMs >= this.ttlMs) {
            this.streakStartMs = now;
            // The next beat as long after this answer as a membership must last to be
            // counted, not an interval after this call was sent: an answer that came late
            // (the connection being made) would otherwise leave the next one short, and
            // this process uncounted until the beat after it.
            this.cancel?.();
            const counted = this.intervalMs * LATE_INTERVALS + EARLY_TIMER_MS;
            this.cancel = this.scheduler(() => this.start(), counted);
          }
          this.unsure = false;
          this.pendingSinceMs = undefined;
          this.answeredWhileFailing = false;
          this.lastOkAtMs = now;
          this.failingSinceMs = undefined;
          this.retryMs = FIRST_RETRY_MS;
          if (live >= 1) {
            this.live = live;
            const recent = this.recent;
            while ((recent[0]?.atMs ?? now) < now - this.ttlMs) recent.shift();
            recent.push({ atMs: now, live });
          }
          this.onResult(undefined);
        },
        (error: unknown) => {
          if (this.stopped) return;
          this.failingSinceMs ??= this.now();
          this.unsure = true;
          // Retry sooner than the interval: a process that waits to be counted, or a store
          // that came back, should not wait a whole interval to be heard.
          const retryMs = Math.min(this.retryMs, MAX_RETRY_MS);
          if (retryMs < this.intervalMs) {
            this.cancel?.();
            this.cancel = this.scheduler(() => this.start(), retryMs);
            this.retryMs = retryMs * 2;
          }
          this.onResult(error);
        },
      )
      .catch(() => {
        // A throwing onError or onRecover has nowhere left to go.
      });
  }

  /** Stops and withdraws this process (resolves whatever the store answers). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    try {
      await this.store.heartbeat(this.processId, this.ttlMs, true, ++this.sent);
    } catch {
      // Its heartbeat lapses after ttlMs anyway.
    }
  }
}
