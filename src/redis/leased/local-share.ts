import { fits } from "../../core/numeric.js";

/**
 * The local bucket a key falls back to while the store cannot answer (policy `'local'`):
 * at most `capacity / N` tokens refilled at `refillPerSecond / N`, N the processes that
 * share the limit ({@link Heartbeat.counted}, or `expectedProcesses`), so that N processes
 * together stay within one shared bucket (the per-process split). It starts at this
 * process's share of what the shared bucket held when last seen (refilled since, at most
 * full; a key never seen counts as full): a key whose bucket was empty stays empty, and a
 * debt still owed is owed here too. Every unit it admits is charged to the shared bucket
 * once the store answers again, so leases resume without a burst on top of it.
 */
export class LocalShare {
  /** Tokens it started with (at most `capacity`; below zero: a debt refilled first). */
  readonly startTokens: number;
  private tokens: number;
  private anchorMs: number;

  constructor(
    /** Most tokens: `capacity / N`. */
    readonly capacity: number,
    /** Tokens per ms: `refillPerSecond / N / 1000`. */
    private readonly perMs: number,
    /** Tokens at the start (below zero: a debt to refill first; at most `capacity`). */
    startTokens: number,
    nowMs: number,
  ) {
    this.startTokens = startTokens < capacity ? startTokens : capacity;
    this.tokens = this.startTokens;
    this.anchorMs = nowMs;
  }

  /** Tokens available at `nowMs` (below zero while a debt is refilled). */
  available(nowMs: number): number {
    if (nowMs > this.anchorMs) {
      const refilled = this.tokens + (nowMs - this.anchorMs) * this.perMs;
      this.tokens = refilled < this.capacity ? refilled : this.capacity;
      this.anchorMs = nowMs;
    }
    return this.tokens;
  }

  /** Takes `cost` when it fits (true), else changes nothing (false). */
  take(cost: number, nowMs: number, commit: boolean): boolean {
    const available = this.available(nowMs);
    if (!fits(cost, available)) return false;
    if (commit) this.tokens = available - cost;
    return true;
  }

  /** Gives `units` back at `nowMs`, never past `capacity`; returns what it took back. */
  refund(units: number, nowMs: number): number {
    const available = this.available(nowMs);
    const room = this.capacity - available;
    const given = units < room ? units : room > 0 ? room : 0;
    this.tokens = available + given;
    return given;
  }

  /** Ms until `cost` fits (Infinity when it never can). */
  waitMs(cost: number, nowMs: number): number {
    if (cost > this.capacity || this.perMs === 0) return Number.POSITIVE_INFINITY;
    return Math.max(0, (cost - this.available(nowMs)) / this.perMs);
  }
}
