import type { HeartbeatAnswer, LeaseStore, Scheduler } from "./exchange.js";

/** The first retry after a failed heartbeat (ms); it doubles up to {@link MAX_RETRY_MS}. */
const FIRST_RETRY_MS = 100;
/** The longest wait between failed heartbeats (ms), or the beat interval if shorter. */
const MAX_RETRY_MS = 1000;

/**
 * This process's heartbeat: announces it as live every third of `ttlMs` (after a failure
 * sooner, from 100 ms doubling up to 1 s) and keeps the number of live processes from the
 * answers of the last `ttlMs`, the largest of which ({@link peak}) the `'local'` fallback
 * divides the limit by.
 *
 * The count is only a safe divisor when every other process counted this one too: the
 * others count at their own beats, so this process must have been live for one whole beat
 * interval (each other process beat meanwhile), and its membership must not have lapsed
 * before the store began to fail (the others' last counts, frozen during an outage, then
 * include it). A store that forgot the set (a restart, `FLUSHALL`) answers that this
 * process joined anew, and the interval starts again: the counts right after such a loss
 * lack the processes that have not beaten since. {@link counted} says whether that holds.
 */
export class Heartbeat {
  /** Live processes, this one included, as last counted (>= 1; 1 until an answer). */
  live = 1;
  /** The counts answered within `ttlMs` of the last answer, oldest first. */
  private readonly recent: { atMs: number; live: number }[] = [];
  /** Heartbeats sent. */
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

  /** Sends one now and keeps sending. */
  start(): void {
    this.beat();
  }

  /**
   * True when the last count is a safe divisor at `nowMs`: this process has been counted
   * for at least one beat interval, and its membership had not lapsed when the store began
   * to fail (or now, while it answers).
   */
  counted(nowMs: number): boolean {
    if (!(this.lastOkAtMs - this.streakStartMs >= this.intervalMs)) return false;
    const since = this.failingSinceMs ?? nowMs;
    return since < this.lastOkAtMs + this.ttlMs;
  }

  /**
   * The most live processes an answer counted within `ttlMs` of the last one (>= 1): the
   * fallback's divisor. A process counted then may be live still (its membership lasts
   * `ttlMs`), though a Redis that restarted or was flushed since forgot it until its next
   * heartbeat: the first answers after that count too few.
   */
  get peak(): number {
    let most = this.live;
    for (const c of this.recent) if (c.live > most) most = c.live;
    return most;
  }

  /** Sends one heartbeat now, beside the schedule (a probe of a store marked down). */
  beatNow(): void {
    if (this.stopped || this.probing) return;
    this.probing = true;
    this.send().finally(() => {
      this.probing = false;
    });
  }

  private beat(): void {
    if (this.stopped) return;
    this.cancel = this.scheduler(() => this.beat(), this.intervalMs);
    void this.send();
  }

  /** One heartbeat call and its handling; resolves when it settled. */
  private send(): Promise<void> {
    this.sent++;
    let call: Promise<HeartbeatAnswer>;
    try {
      call = this.store.heartbeat(this.processId, this.ttlMs, false);
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
          // until they beat again, and this count lacks them).
          if (joined || now - this.lastOkAtMs >= this.ttlMs) {
            this.streakStartMs = now;
            // The next beat a whole interval after this answer, not after this call was
            // sent: an answer that came late (the connection being made) would otherwise
            // leave the next one short of an interval, and this process uncounted until
            // the beat after it.
            this.cancel?.();
            this.cancel = this.scheduler(() => this.beat(), this.intervalMs);
          }
          this.lastOkAtMs = now;
          this.failingSinceMs = undefined;
          this.retryMs = FIRST_RETRY_MS;
          if (live >= 1) {
            this.live = live;
            const recent = this.recent;
            while (recent.length > 0 && (recent[0] as { atMs: number }).atMs < now - this.ttlMs) {
              recent.shift();
            }
            recent.push({ atMs: now, live });
          }
          this.onResult(undefined);
        },
        (error: unknown) => {
          if (this.stopped) return;
          this.failingSinceMs ??= this.now();
          // Retry sooner than the interval: a process that waits to be counted, or a store
          // that came back, should not wait a whole interval to be heard.
          const retryMs = Math.min(this.retryMs, MAX_RETRY_MS);
          if (retryMs < this.intervalMs) {
            this.cancel?.();
            this.cancel = this.scheduler(() => this.beat(), retryMs);
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
      await this.store.heartbeat(this.processId, this.ttlMs, true);
    } catch {
      // Its heartbeat lapses after ttlMs anyway.
    }
  }
}
