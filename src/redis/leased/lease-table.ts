import type { LocalShare } from "./local-share.js";
import { RateWindow } from "./sizing.js";

/** One key's local state in a `LeasedTokenBucket`. */
export class LeaseEntry {
  /** Unspent leased tokens; negative: debt (credit admitted, not yet paid by a lease). */
  tokens = 0;
  /** Units still admissible on credit before the first lease (initialCredit, then less). */
  credit: number;
  /** A lease reply has arrived for this key (credit is over). */
  leased = false;
  /** An exchange for this key is under way. */
  inFlight = false;
  /** In the batcher's queue for the next exchange. */
  queued = false;
  /** The queued exchange should take tokens (false: it only gives back). */
  wants = false;
  /** The cost of the request that asked for the lease (what the next lease must cover). */
  needCost = 0;
  /** Tokens to give back with the next exchange. */
  give = 0;
  /** The shared bucket was empty: deny without calls until then (local clock, ms). */
  deniedUntilMs = Number.NEGATIVE_INFINITY;
  /** Last decision (local clock, ms). */
  lastUsedMs: number;
  /** When the last lease was granted (local clock, ms). */
  grantedAtMs = Number.NEGATIVE_INFINITY;
  /** Tokens the shared bucket had at the last reply. */
  shared: number;
  /** Refill when `tokens` falls below this. */
  lowWater = 0;
  /** The batch (hash slot) the key belongs to. */
  readonly group: string;
  /** The local bucket while Redis fails (policy `'local'`). */
  fallback: LocalShare | undefined = undefined;
  /** The key's observed demand. */
  readonly demand: RateWindow;

  constructor(
    readonly key: string,
    group: string,
    credit: number,
    shared: number,
    nowMs: number,
    windowMs: number,
  ) {
    this.group = group;
    this.credit = credit;
    this.shared = shared;
    this.lastUsedMs = nowMs;
    this.demand = new RateWindow(nowMs, windowMs);
  }

  /** True when dropping the entry loses nothing: no tokens, debt, call or fallback state. */
  isFree(nowMs: number): boolean {
    return (
      !this.inFlight &&
      !this.queued &&
      this.give === 0 &&
      Math.abs(this.tokens) < 1e-9 &&
      this.fallback === undefined &&
      nowMs >= this.deniedUntilMs
    );
  }
}

/** Counters of the table, since the limiter was created. */
export interface LeaseTableCounts {
  created: number;
  evictedIdle: number;
  evictedLossy: number;
  refused: number;
}

/**
 * The local lease table: at most `maxKeys` entries. When full, a new key takes the place
 * of one of the oldest entries that holds no debt and no call in flight (its unused tokens
 * are handed to `onEvict` to go back); when there is none, the new key is refused.
 */
export class LeaseTable {
  readonly entries = new Map<string, LeaseEntry>();
  readonly counts: LeaseTableCounts = { created: 0, evictedIdle: 0, evictedLossy: 0, refused: 0 };
  /** The sweep's position. */
  private cursor: Iterator<LeaseEntry> | undefined;

  constructor(
    private readonly maxKeys: number,
    private readonly onEvict: (entry: LeaseEntry) => void,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Makes room for one more entry; false when none could be made. */
  makeRoom(nowMs: number, idleAfterMs: number): boolean {
    if (this.entries.size < this.maxKeys) return true;
    let scanned = 0;
    for (const entry of this.entries.values()) {
      if (++scanned > 8) break;
      if (entry.inFlight || entry.queued || entry.tokens < 0 || entry.fallback !== undefined)
        continue;
      const idle = nowMs - entry.lastUsedMs >= idleAfterMs;
      this.entries.delete(entry.key);
      if (idle || entry.isFree(nowMs)) this.counts.evictedIdle++;
      else this.counts.evictedLossy++;
      this.onEvict(entry);
      return true;
    }
    this.counts.refused++;
    return false;
  }

  /** Up to `count` entries, continuing round-robin from the last call. */
  *chunk(count: number): Generator<LeaseEntry> {
    for (let i = 0; i < count && this.entries.size > 0; i++) {
      let next = this.cursor?.next();
      if (next === undefined || next.done === true) {
        this.cursor = this.entries.values();
        next = this.cursor.next();
        if (next.done === true) return;
      }
      yield next.value;
    }
  }
}
