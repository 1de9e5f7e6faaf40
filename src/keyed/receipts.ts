import type { Decision } from "../core/limiter.js";
import { ChargeReceipt } from "../core/receipt.js";

/**
 * What `KeyedLimiter` keeps to judge refunds through receipts on its fast path
 * (docs/semantics.md#refunds): one epoch for the registry (moved by `reconfigure` and
 * `clear`: receipts from before give nothing back), and, per key that needs it, an entry
 * with the key's own epoch (moved by `reset(key)`) and the units its refunds credited
 * (receipts of a bucket count them as refill). Nothing is kept until the first receipt is
 * issued; an entry lives until every receipt it could concern has passed its
 * `refundableUntilMs`, and at most `maxEntries` live at once (past that, a reset moves the
 * registry's epoch, and a credit that cannot be recorded gives nothing back). @internal
 */
export class ReceiptGuard {
  /** Moved by `reconfigure` and `clear` (and a reset the table cannot record). */
  epoch = 0;
  private readonly entries = new Map<string, GuardEntry>();

  constructor(private readonly maxEntries: number) {}

  /** Entries kept now. */
  get size(): number {
    return this.entries.size;
  }

  /** The live entry of `key` at `now`, if any (an entry past its time is dropped here). */
  live(key: string, now: number): GuardEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.untilMs > now) return entry;
    this.entries.delete(key);
    return undefined;
  }

  /**
   * `key` was reset at `now`, its state fresh again no sooner than `idleAtMs` before the
   * reset: receipts issued before give nothing back.
   */
  reset(key: string, now: number, idleAtMs: number): void {
    const entry = this.entryOf(key, now, idleAtMs);
    if (entry === undefined) this.epoch++;
    else entry.epoch++;
  }

  /**
   * A refund credited `units` to `key` at `now` (its bucket full again at `idleAtMs` before
   * it). False when that cannot be recorded: then nothing may be given back.
   */
  credit(key: string, now: number, idleAtMs: number, units: number): boolean {
    const entry = this.entryOf(key, now, idleAtMs);
    if (entry === undefined) return false;
    entry.credited += units;
    return true;
  }

  /** May a credit be recorded for `key` now? */
  canCredit(key: string, now: number): boolean {
    return this.live(key, now) !== undefined || this.entries.size < this.maxEntries;
  }

  /** Voids every receipt issued so far (`reconfigure`, `clear`): the epoch moves, entries go. */
  voidAll(): void {
    this.epoch++;
    this.entries.clear();
  }

  /** Drops the entries whose time has passed; returns how many. */
  sweep(now: number): number {
    let dropped = 0;
    for (const [key, entry] of this.entries) {
      if (entry.untilMs <= now) {
        this.entries.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  /** @internal The live entry of `key`, made when there is room; its time at least `untilMs`. */
  private entryOf(key: string, now: number, untilMs: number): GuardEntry | undefined {
    let entry = this.live(key, now);
    if (entry === undefined) {
      if (this.entries.size >= this.maxEntries) this.sweep(now);
      if (this.entries.size >= this.maxEntries) return undefined;
      entry = { epoch: 0, credited: 0, untilMs };
      this.entries.set(key, entry);
    }
    if (untilMs > entry.untilMs) entry.untilMs = untilMs;
    return entry;
  }
}

/** One key's entry (see {@link ReceiptGuard}). @internal */
export interface GuardEntry {
  /** Moved by `reset(key)`. */
  epoch: number;
  /** Units the key's refunds credited since the entry was made. */
  credited: number;
  /** Kept until this clock reading: no receipt it concerns can give back after it. */
  untilMs: number;
}

/**
 * A receipt of `KeyedLimiter`'s fast path: per leaf of the policy, the mark its refund
 * needs and what it gave back; the guard entry and credit at the charge. @internal
 */
export class KeyedReceipt extends ChargeReceipt {
  /**
   * What each leaf gave back so far, for an `allOf` policy (`undefined` for one leaf:
   * `refunded` says it, and the one mark is `a`: no array for the common case).
   */
  readonly refundedBy: Float64Array | undefined;
  /** The epoch of the key's guard entry at the charge (0 without one). */
  readonly entryEpoch: number;
  /** What that entry had credited at the charge (0 without one). */
  readonly credited: number;

  constructor(
    decision: Decision,
    key: string,
    units: number,
    atMs: number,
    refundableUntilMs: number,
    owner: object,
    epoch: number,
    /** The one leaf's mark (`Kernel.markReceipt`). */
    mark: number,
    /** Each leaf's mark, for an `allOf` policy. */
    readonly marks: Float64Array | undefined,
    /** The key's guard entry at the charge, if it had one. */
    readonly entry: GuardEntry | undefined,
  ) {
    super(decision, key, units, atMs, refundableUntilMs, owner, epoch, mark, 0, undefined);
    this.refundedBy = marks === undefined ? undefined : new Float64Array(marks.length);
    this.entryEpoch = entry?.epoch ?? 0;
    this.credited = entry?.credited ?? 0;
  }
}
