import type { LeaseStore, Scheduler } from "./store.js";

/**
 * This process's heartbeat: announces it as live every third of `ttlMs` and keeps the
 * number of live processes from the last answer (1 until one arrives; the last known value
 * while Redis fails), which the `'local'` fallback divides the limit by.
 */
export class Heartbeat {
  /** Live processes, this one included, as last counted (>= 1). */
  live = 1;
  /** Heartbeats sent. */
  sent = 0;
  private cancel: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly store: LeaseStore,
    readonly processId: string,
    private readonly ttlMs: number,
    private readonly scheduler: Scheduler,
    private readonly onResult: (error: unknown) => void,
  ) {}

  /** Sends one now and keeps sending. */
  start(): void {
    this.beat();
  }

  private beat(): void {
    if (this.stopped) return;
    this.sent++;
    this.store.heartbeat(this.processId, this.ttlMs, false).then(
      (live) => {
        if (live >= 1) this.live = live;
        this.onResult(undefined);
      },
      (error: unknown) => this.onResult(error),
    );
    this.cancel = this.scheduler(() => this.beat(), this.ttlMs / 3);
  }

  /** Stops and withdraws this process (resolves whatever Redis answers). */
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
