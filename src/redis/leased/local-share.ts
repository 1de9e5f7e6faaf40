import { fits } from "../../numeric.js";

/**
 * The local bucket a key falls back to while Redis cannot answer (policy `'local'`):
 * `capacity / N` tokens refilled at `refillPerSecond / N`, N the live processes last
 * counted, so that N processes together stay near the shared limit (the compromise of a
 * per-process split). It starts full. On recovery, what it spent and has not refilled
 * yet ({@link spent}) is charged to the key's lease as debt, so leases resume without a
 * burst on top of what the fallback just admitted.
 */
export class LocalShare {
  private tokens: number;
  private anchorMs: number;

  constructor(
    /** Most tokens: `capacity / N`. */
    readonly capacity: number,
    /** Tokens per ms: `refillPerSecond / N / 1000`. */
    private readonly perMs: number,
    nowMs: number,
  ) {
    this.tokens = capacity;
    this.anchorMs = nowMs;
  }

  /** Tokens available at `nowMs`. */
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

  /** Ms until `cost` fits (Infinity when it never can). */
  waitMs(cost: number, nowMs: number): number {
    if (cost > this.capacity || this.perMs === 0) return Number.POSITIVE_INFINITY;
    return Math.max(0, (cost - this.available(nowMs)) / this.perMs);
  }

  /** Spent and not yet refilled at `nowMs`: `capacity - available`. */
  spent(nowMs: number): number {
    return Math.max(0, this.capacity - this.available(nowMs));
  }
}
