import type { LeaseRequest } from "./exchange.js";
import type { LocalShare } from "./local-share.js";
import { RateWindow } from "./sizing.js";

/** One key's local state in a `LeasedTokenBucket`. */
export class LeaseEntry {
  /** Unspent leased tokens (>= 0). */
  tokens = 0;
  /** A lease reply has arrived for this key (credit is over). */
  leased = false;
  /** An exchange for this key is under way. */
  inFlight = false;
  /** In the batcher's queue for the next exchange. */
  queued = false;
  /** The queued exchange should take tokens (false: it only gives back or charges). */
  wants = false;
  /** The queued exchange is a probe of a node marked down (it may carry nothing). */
  probe = false;
  /** The cost of the request that asked for the lease (what the next lease must cover). */
  needCost = 0;
  /** Tokens to give back with the next exchange. */
  give = 0;
  /** Units admitted without a lease (credit, the `'local'` fallback), to charge with the next exchange. */
  charge = 0;
  /** The charge of the exchange under way (charged again if that call fails). */
  sentCharge = 0;
  /** No exchange that takes tokens before this, and a denial once the lease ran out (local clock, ms). */
  deniedUntilMs = Number.NEGATIVE_INFINITY;
  /**
   * The store's last wait was endless (no refill): until `deniedUntilMs` (when it is asked
   * again) denials say Infinity, and the entry is kept as one with a wait.
   */
  endless = false;
  /** Last decision (local clock, ms). */
  lastUsedMs: number;
  /** When the last lease was granted (local clock, ms). */
  grantedAtMs = Number.NEGATIVE_INFINITY;
  /** When `shared` was seen (local clock, ms); -Infinity: never. */
  sharedAtMs = Number.NEGATIVE_INFINITY;
  /** Refill when `tokens` falls below this. */
  lowWater = 0;
  /** The local bucket while the store fails (policy `'local'`). */
  fallback: LocalShare | undefined = undefined;
  /**
   * The last fallback bucket, kept once the store answered while it was not full: should
   * the store fail again soon, the fallback goes on from it rather than from a fresh share
   * (a process whose calls fail on and off must not get a share per failure).
   */
  pausedShare: LocalShare | undefined = undefined;
  /** When {@link pausedShare} was kept (local clock, ms). */
  pausedAtMs = 0;
  /** The key's observed demand. */
  readonly demand: RateWindow;
  /** Moved by `reset(key)` and when the entry goes: receipts of charges before it give nothing back. */
  epoch = 0;
  /**
   * Units the entry admitted (its lease, credit, the `'local'` fallback bucket), in all:
   * with {@link refunded}, the most a refund without a receipt may give back.
   */
  admitted = 0;
  /** Units refunds gave back for the entry, in all (a receipt counts those since its charge). */
  refunded = 0;
  /** The request of the exchange under way for the entry (another one for the key is not its). */
  sent: LeaseRequest | undefined = undefined;

  constructor(
    readonly key: string,
    /** The batch (hash slot) the key belongs to. */
    readonly group: string,
    /** Units still admissible on credit before the first lease (initialCredit, then less). */
    public credit: number,
    /** Tokens the shared bucket had at the last reply (capacity until one came). */
    public shared: number,
    nowMs: number,
    windowMs: number,
  ) {
    this.lastUsedMs = nowMs;
    this.demand = new RateWindow(nowMs, windowMs);
  }

  /** Its unspent tokens go back with the next exchange. */
  giveAll(): void {
    this.give += this.tokens;
    this.tokens = 0;
  }

  /** True while the entry holds a call, a charge or a fallback bucket: it must not go. */
  get pinned(): boolean {
    return (
      this.inFlight ||
      this.queued ||
      this.charge > 0 ||
      this.sentCharge > 0 ||
      this.fallback !== undefined
    );
  }

  /** True when dropping the entry loses nothing: no tokens, call, charge, fallback or "empty" answer. */
  isFree(nowMs: number): boolean {
    return (
      !this.pinned &&
      this.give === 0 &&
      this.tokens < 1e-9 &&
      nowMs >= this.deniedUntilMs &&
      !this.endless
    );
  }
}

/** Entries looked at per {@link LeaseTable.makeRoom} before a new key is refused. */
const MAKE_ROOM_LOOKS = 32;

/**
 * What a table keeps of a key whose entry went while its shared bucket was last seen less
 * than full: that level and when, and its last fallback bucket, so that a new entry for the
 * key starts from them rather than from a full bucket's (an entry pushed out, or swept,
 * between two failures of the store must not come back with a fresh share).
 */
interface LeaseTrace {
  readonly key: string;
  readonly shared: number;
  readonly sharedAtMs: number;
  readonly pausedShare: LocalShare | undefined;
  readonly pausedAtMs: number;
  /** When the bucket, as last seen, is full again (local clock, ms): then it says nothing. */
  readonly fullAtMs: number;
}

/** Traces looked at for the one to drop when a table keeps `maxKeys` of them. */
const TRACE_LOOKS = 8;

/**
 * The local lease table: at most `maxKeys` entries. Entries that are not pinned (no call, charge or
 * fallback bucket: {@link LeaseEntry.pinned}) wait in a set in the order they settled, so a full
 * table finds one to push out at its head, whatever the table holds (its unused tokens go to
 * `onEvict`, to go back). An entry the caller would rather keep (its key would get a budget again
 * if it came back) moves to the back instead; after {@link MAKE_ROOM_LOOKS} of those, the first of
 * them goes when `force` allows, else the new key is refused.
 */
export class LeaseTable {
  readonly entries = new Map<string, LeaseEntry>();
  /** Counters of the table, since the limiter was created. */
  readonly counts = { created: 0, evictedIdle: 0, evictedLossy: 0, refused: 0 };
  /** Entries that are not pinned, oldest settled first. */
  private readonly settled = new Set<LeaseEntry>();
  /** The sweep's position. */
  private cursor: Iterator<LeaseEntry> | undefined;
  /** Traces of entries that went (at most `maxKeys`). */
  private readonly traces = new Map<string, LeaseTrace>();
  /**
   * The traces in turn, from {@link head}: those looked at for one to drop, and kept, go
   * to the back; some went since (not in {@link traces}). An array, not the map's order:
   * a map whose first entries went walks over them at each look (tens of microseconds per
   * entry that goes, in a table of 100,000 traces).
   */
  private order: LeaseTrace[] = [];
  private head = 0;

  /**
   * @param fullAtOf When the shared bucket of an entry that goes is full again, as last
   *   seen with what the entry gives back (local clock, ms); at or before now, or for a key
   *   never answered, it leaves no trace (it would start full anyway). When `maxKeys`
   *   traces are kept, the one whose bucket is full again soonest among the next few in
   *   turn goes, so a flood of keys that took little cannot push out a drained key's.
   * @param nowMs The local clock (ms).
   */
  constructor(
    private readonly maxKeys: number,
    private readonly onEvict: (entry: LeaseEntry) => void,
    private readonly fullAtOf: (entry: LeaseEntry) => number = () => Number.NEGATIVE_INFINITY,
    private readonly nowMs: () => number = () => 0,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Entries that hold a call, a charge or a fallback bucket. */
  get pinned(): number {
    return this.entries.size - this.settled.size;
  }

  /** Adds a new entry, from the trace its key left, if any. */
  add(entry: LeaseEntry): void {
    const trace = this.traces.get(entry.key);
    if (trace !== undefined) {
      this.traces.delete(entry.key);
      entry.shared = trace.shared;
      entry.sharedAtMs = trace.sharedAtMs;
      entry.pausedShare = trace.pausedShare;
      entry.pausedAtMs = trace.pausedAtMs;
    }
    this.entries.set(entry.key, entry);
    this.counts.created++;
    this.settle(entry);
  }

  /**
   * Drops an entry (its tokens are the caller's to give back); the receipts of its charges
   * give nothing back from now (a `reset(key)` of a key with no entry must end them too).
   * It leaves a trace unless `leaveTrace` is false (a `reset(key)`: one kept for it would push
   * out another key's, then be forgotten).
   */
  remove(entry: LeaseEntry, leaveTrace = true): void {
    entry.epoch++;
    this.entries.delete(entry.key);
    this.settled.delete(entry);
    this.traces.delete(entry.key);
    if (!leaveTrace) return;
    const now = this.nowMs();
    const fullAtMs = this.fullAtOf(entry);
    if (!(fullAtMs > now)) return;
    if (this.traces.size >= this.maxKeys) {
      let drop: LeaseTrace | undefined;
      let dropAtMs = fullAtMs;
      const looked: LeaseTrace[] = [];
      while (looked.length < TRACE_LOOKS && this.head < this.order.length) {
        const trace = this.order[this.head++] as LeaseTrace;
        this.traceLooks++;
        if (this.traces.get(trace.key) !== trace) continue; // went since
        looked.push(trace);
        if (trace.fullAtMs < dropAtMs) {
          drop = trace;
          dropAtMs = trace.fullAtMs;
        }
        if (dropAtMs <= now) break;
      }
      for (const trace of looked) if (trace !== drop) this.order.push(trace);
      if (drop !== undefined) this.traces.delete(drop.key);
      this.compact();
      if (drop === undefined) return;
    }
    const { key, shared, sharedAtMs, pausedShare, pausedAtMs } = entry;
    const trace: LeaseTrace = { key, shared, sharedAtMs, pausedShare, pausedAtMs, fullAtMs };
    this.traces.set(key, trace);
    this.order.push(trace);
    this.compact();
  }

  /** Keeps {@link order} within twice the traces (and a few), in amortized constant time. */
  private compact(): void {
    const length = this.order.length - this.head;
    if (length > 2 * this.traces.size + 64) {
      this.order = this.order.slice(this.head).filter((t) => this.traces.get(t.key) === t);
      this.head = 0;
    } else if (this.head > 64 && this.head > length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }

  /** Forgets the trace of `key` (a `reset(key)`: its usage here is forgotten). */
  forget(key: string): void {
    this.traces.delete(key);
  }

  /** @internal Traces looked at to drop one, in all, holes included (for tests of the cost). */
  traceLooks = 0;

  /** Traces kept (for stats and tests). */
  get traceCount(): number {
    return this.traces.size;
  }

  /** Files `entry` again after its call, charge or fallback changed (it goes to the back). */
  settle(entry: LeaseEntry): void {
    this.settled.delete(entry);
    if (!entry.pinned && this.entries.get(entry.key) === entry) this.settled.add(entry);
  }

  /**
   * Makes room for one more entry; false when none could be made: every entry is pinned,
   * or (without `force`) the ones looked at are all to keep.
   */
  makeRoom(
    nowMs: number,
    idleAfterMs: number,
    keep: (entry: LeaseEntry) => boolean,
    force: boolean,
  ): boolean {
    if (this.entries.size < this.maxKeys) return true;
    let looked = 0;
    let first: LeaseEntry | undefined;
    for (const entry of this.settled) {
      if (++looked > MAKE_ROOM_LOOKS || entry === first) break;
      if (keep(entry)) {
        first ??= entry;
        // Looked at again after the others: the next call starts further on.
        this.settled.delete(entry);
        this.settled.add(entry);
        continue;
      }
      this.evict(entry, nowMs, idleAfterMs);
      return true;
    }
    if (force && first !== undefined) {
      this.evict(first, nowMs, idleAfterMs);
      return true;
    }
    this.counts.refused++;
    return false;
  }

  private evict(entry: LeaseEntry, nowMs: number, idleAfterMs: number): void {
    this.remove(entry);
    const idle = entry.isFree(nowMs) || nowMs - entry.lastUsedMs >= idleAfterMs;
    this.counts[idle ? "evictedIdle" : "evictedLossy"]++;
    this.onEvict(entry);
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
