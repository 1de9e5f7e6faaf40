import type { Scheduler } from "./exchange.js";

/** Most keys in one exchange call. */
export const MAX_BATCH_KEYS = 512;

/** One call of a batch window: keys of one group, at most {@link MAX_BATCH_KEYS}. */
export interface BatchCall {
  readonly group: string;
  readonly keys: string[];
}

/**
 * Collects the keys that need an exchange and hands them over once per batch window, all at once:
 * grouped (one group per hash slot in a cluster, one in all on a standalone server) and cut into
 * calls of at most {@link MAX_BATCH_KEYS} keys, so that the caller can send the calls of one node
 * back to back (one round trip per node per window). Keeping at most one exchange in flight per key
 * is the caller's part (a key is added only when it has none).
 */
export class Batcher {
  private readonly queue = new Map<string, string[]>();
  private cancel: (() => void) | undefined;

  constructor(
    private readonly windowMs: number,
    private readonly scheduler: Scheduler,
    private readonly send: (calls: BatchCall[]) => void,
  ) {}

  /** Queues `key` of `group` for the next batch. */
  add(group: string, key: string): void {
    const keys = this.queue.get(group);
    if (keys === undefined) this.queue.set(group, [key]);
    else keys.push(key);
    if (this.cancel === undefined) {
      this.cancel = this.scheduler(() => {
        this.cancel = undefined;
        this.flush();
      }, this.windowMs);
    }
  }

  /** Sends every queued key now. */
  flush(): void {
    this.stop();
    if (this.queue.size === 0) return;
    const calls: BatchCall[] = [];
    for (const [group, keys] of this.queue) {
      for (let i = 0; i < keys.length; i += MAX_BATCH_KEYS) {
        calls.push({ group, keys: keys.slice(i, i + MAX_BATCH_KEYS) });
      }
    }
    this.queue.clear();
    this.send(calls);
  }

  /** Stops the timer (queued keys stay queued until {@link flush}). */
  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }
}
