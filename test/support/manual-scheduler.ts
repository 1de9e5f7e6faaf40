import type { Scheduler } from "../../src/redis/leased/exchange.js";
import type { ManualClock } from "./manual-clock.js";

/** A {@link Scheduler} on a manual clock: timers run only inside {@link ManualScheduler.advance}. */
export interface ManualScheduler {
  readonly schedule: Scheduler;
  /** Timers waiting. */
  readonly pending: number;
  /**
   * Moves the clock forward by `ms`, running each timer when its time comes (in time order)
   * and letting promises settle after each one.
   */
  advance(ms: number): Promise<void>;
}

/** Lets every queued promise callback run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

export function manualScheduler(clock: ManualClock): ManualScheduler {
  let seq = 0;
  const timers = new Map<number, { atMs: number; run: () => void }>();
  const schedule: Scheduler = (run, delayMs) => {
    const id = seq++;
    timers.set(id, { atMs: clock() + delayMs, run });
    return () => timers.delete(id);
  };
  return {
    schedule,
    get pending() {
      return timers.size;
    },
    async advance(ms) {
      const end = clock() + ms;
      for (;;) {
        await settle();
        let next: [number, { atMs: number; run: () => void }] | undefined;
        for (const t of timers)
          if (t[1].atMs <= end && (next === undefined || t[1].atMs < next[1].atMs)) next = t;
        if (next === undefined) break;
        timers.delete(next[0]);
        if (next[1].atMs > clock()) clock.set(next[1].atMs);
        next[1].run();
      }
      clock.set(end);
      await settle();
    },
  };
}
