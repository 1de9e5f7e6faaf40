import type { Scheduler } from "../../../src/redis/leased/exchange.js";

/**
 * Virtual time for the lease simulator: one clock, and a queue of timers ordered by time,
 * then by creation (a binary heap; cancelled timers are skipped when they come up). Each
 * timer belongs to an owner (a process, or the store): a killed owner's timers never run,
 * a stopped one's wait until it resumes (SIGSTOP, SIGCONT).
 * @module
 */

interface Timer {
  atMs: number;
  seq: number;
  owner: number;
  run: () => void;
  cancelled: boolean;
  /** Running it may settle a promise (a store's answer, a call's timeout). */
  settles: boolean;
}

/** Owner id of the store, the network and the simulation itself (never stopped or killed). */
export const WORLD = 0;

export class World {
  /** Virtual now, ms. */
  nowMs: number;
  /** The last timer run may have settled a promise: let promises run before going on. */
  settling = false;
  /** Timers of this length from a process's scheduler settle a promise (its call timeout). */
  settlingDelayMs = Number.NaN;
  /** Timers run. */
  timersRun = 0;
  private readonly heap: Timer[] = [];
  private seq = 0;
  /** Owners that are stopped, with what waits for them. */
  private readonly stopped = new Map<number, Timer[]>();
  private readonly killed = new Set<number>();

  constructor(startMs: number) {
    this.nowMs = startMs;
  }

  /** A scheduler whose timers belong to `owner`. */
  scheduler(owner: number): Scheduler {
    return (run, delayMs) => {
      const timer = this.add(owner, run, delayMs, delayMs === this.settlingDelayMs);
      return () => {
        timer.cancelled = true;
      };
    };
  }

  /** Schedules `run` after `delayMs` for `owner` (`settles`: it may settle a promise). */
  add(owner: number, run: () => void, delayMs: number, settles = false): Timer {
    const timer: Timer = {
      atMs: this.nowMs + (delayMs > 0 ? delayMs : 0),
      seq: this.seq++,
      owner,
      run,
      cancelled: false,
      settles,
    };
    if (this.killed.has(owner)) timer.cancelled = true;
    else this.push(timer);
    return timer;
  }

  /** The time of the next timer, or Infinity. */
  nextAtMs(): number {
    this.dropCancelled();
    return this.heap.length > 0 ? (this.heap[0] as Timer).atMs : Number.POSITIVE_INFINITY;
  }

  /** Runs the next timer due at or before `untilMs` (moving the clock to it); false when none. */
  runNext(untilMs: number): boolean {
    this.dropCancelled();
    const top = this.heap[0];
    if (top === undefined || top.atMs > untilMs) return false;
    this.pop();
    if (top.atMs > this.nowMs) this.nowMs = top.atMs;
    const waiting = this.stopped.get(top.owner);
    if (waiting !== undefined) {
      waiting.push(top);
      return true;
    }
    this.timersRun++;
    this.settling = top.settles;
    top.run();
    return true;
  }

  /** Stops `owner` (SIGSTOP): its timers wait until {@link resume}. */
  stop(owner: number): void {
    if (!this.stopped.has(owner)) this.stopped.set(owner, []);
  }

  /** Resumes `owner` (SIGCONT): what came due meanwhile runs now, in order. */
  resume(owner: number): void {
    const waiting = this.stopped.get(owner);
    if (waiting === undefined) return;
    this.stopped.delete(owner);
    for (const t of waiting) {
      t.atMs = this.nowMs;
      this.push(t);
    }
  }

  /** True while `owner` is stopped. */
  isStopped(owner: number): boolean {
    return this.stopped.has(owner);
  }

  /** Kills `owner`: its timers never run. */
  kill(owner: number): void {
    this.killed.add(owner);
    this.stopped.delete(owner);
  }

  isKilled(owner: number): boolean {
    return this.killed.has(owner);
  }

  private dropCancelled(): void {
    for (;;) {
      const top = this.heap[0];
      if (top === undefined) return;
      if (!top.cancelled && !this.killed.has(top.owner)) return;
      this.pop();
    }
  }

  private less(a: Timer, b: Timer): boolean {
    return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
  }

  private push(t: Timer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i] as Timer, h[parent] as Timer)) break;
      [h[i], h[parent]] = [h[parent] as Timer, h[i] as Timer];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop() as Timer;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.less(h[l] as Timer, h[m] as Timer)) m = l;
      if (r < h.length && this.less(h[r] as Timer, h[m] as Timer)) m = r;
      if (m === i) return;
      [h[i], h[m]] = [h[m] as Timer, h[i] as Timer];
      i = m;
    }
  }
}

/**
 * Lets every queued promise callback run (store answers and what they set off): ten turns
 * of the microtask queue, more than the deepest chain here takes (an answer through the
 * client, `RedisLeaseStore` and the limiter; 60 seeds run alike with 7 turns and with 30).
 * A reaction that needed more would only run at the next turn of the simulation.
 */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await undefined;
}
