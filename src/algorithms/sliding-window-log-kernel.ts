import type { Decision } from "../core/limiter.js";
import { fits, TOLERANCE } from "../core/numeric.js";
import type { Kernel } from "./kernel.js";
import { LogArena } from "./log-arena.js";
import { BASE, checkSavedLog, HEAD, LogRing, RING_DOUBLES, SIZE } from "./log-ring.js";
import { logExactEntries } from "./window-math.js";

/** Where a layout accounts the bytes its logs gain or lose: the slab engine. */
export interface ByteSink {
  /** Adds `delta` (possibly negative) accounted bytes. */
  addBytes(delta: number, slot?: number): void;
  /** True when `slot` may grow by `delta` bytes (making room among the other keys first). */
  reserve(delta: number, slot: number): boolean;
}

/**
 * Accounted bytes of a key's log beyond its slot's doubles and its entries, charged per key
 * up front (as `keyExtraBytes`): its row in the entry arena (block offset and entry count).
 */
export const LOG_RING_BYTES = 2 * 8;
/**
 * Accounted bytes of a ring's entries once it has a block: 16 bytes per entry of the block,
 * counted twice: once for the block, once for its share of the arena's slack (free blocks
 * and unused tail), which the arena keeps at most its live blocks (see `LogArena`), so
 * `maxBytes` bounds the whole arena.
 */
export function logEntryBytes(slotCount: number): number {
  return 32 * slotCount;
}

/** The sink before {@link SlidingWindowLogKernel.bind}: a ring that grows then is a bug. */
const unbound = (): never => {
  throw new Error("SlidingWindowLogKernel: bind(engine) before the first request");
};
const UNBOUND: ByteSink = { addBytes: unbound, reserve: unbound };

/**
 * The slot of a `SlidingWindowLog`: its ring's head, size and base (the engine threads its free
 * list through the first of a free slot), its entries in a block of the kernel's {@link LogArena}
 * (owner: the slot), made at the first logged entry and decided by {@link LogRing} (the one rule
 * text). A slot without a block is an empty log. No object or array per key.
 *
 * Bytes: each key is charged {@link LOG_RING_BYTES} up front (`keyExtraBytes`); a ring's entries
 * ({@link logEntryBytes}) are added and taken back through the sink given to {@link bind} as the
 * block grows, shrinks and is released. @internal
 */
export class SlidingWindowLogKernel implements Kernel {
  readonly doubles = RING_DOUBLES;
  readonly keyExtraBytes = LOG_RING_BYTES;
  limit: number;
  windowMs: number;
  /** `logExactEntries(limit)`: entries kept at their exact time (see `logLeaveAt`). */
  private exactEntries: number;
  /**
   * The most units of a restored state's one entry: `limit` plus twice the most a log can go
   * over it (`fits` lets a log hold up to `limit + TOLERANCE * max(1, cost)`), so it is at
   * least any log's sum and admits no cost > 0 while it counts.
   */
  private boundUnits: number;
  /** The entries of every slot's ring (owner: the slot). */
  private readonly arena = new LogArena();
  /** The entries of a key without a slot being decided (`peek` of a traced new key): owner 0. */
  private readonly scratch = new LogArena();
  /** The cursor every decision reads its ring through. */
  private readonly ring = new LogRing();
  private sink: ByteSink = UNBOUND;

  /** `limit` and `windowMs` as a `SlidingWindowLog` has them (already checked). */
  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.exactEntries = logExactEntries(limit);
    this.boundUnits = limit + 2 * TOLERANCE * (limit > 1 ? limit : 1);
    this.scratch.setOwners(1);
  }

  /** Expired to now; a longer window moves every entry out by the difference (as the class). */
  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void {
    const ring = this.expired(st, s, slot, now);
    const grow = (next as SlidingWindowLogKernel).windowMs - this.windowMs;
    if (grow > 0) ring.extend(grow);
  }

  /** `[idleAtMs, sum]`: a longer window moves the time out by the difference; the sum is kept. */
  retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    const grow = (next as SlidingWindowLogKernel).windowMs - this.windowMs;
    if (grow > 0 && this.traceApplies(table, o, now)) table[o]! += grow;
  }

  adopt(next: Kernel): void {
    const n = next as SlidingWindowLogKernel;
    this.limit = n.limit;
    this.windowMs = n.windowMs;
    this.exactEntries = n.exactEntries;
    this.boundUnits = n.boundUnits;
  }

  bind(sink: ByteSink): void {
    this.sink = sink;
  }

  init(st: Float64Array, s: number, slot: number): void {
    // A pinned key reset in place keeps its slot: its block goes.
    if (slot < 0) this.scratch.clear();
    else this.release(slot, this.sink);
    this.ringAt(st, s, slot).init();
  }

  isIdle(st: Float64Array, s: number, slot: number, now: number): boolean {
    return this.expired(st, s, slot, now).size === 0;
  }

  /** The slot's ring expired to `now` (a cursor), the bytes of a block that shrank given back. */
  private expired(st: Float64Array, s: number, slot: number, now: number): LogRing {
    const ring = this.ringAt(st, s, slot);
    const slots = ring.slotCount;
    ring.expire(now, this.limit);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return ring;
  }

  /** When the newest entry leaves (then the log is empty), a float step or so later. */
  idleAtMs(st: Float64Array, s: number, slot: number, now: number): number {
    const at = this.ringAt(st, s, slot).newestLeaveAt();
    if (!(at > now)) return now;
    return at + Math.abs(at) * 2 ** -50; // a few float steps later: never early
  }

  usage(st: Float64Array, s: number, slot: number, now: number): number {
    return this.expired(st, s, slot, now).sum() / this.limit;
  }

  /** The time the log is empty, then the units it holds: each bound grows with use. */
  readonly traceWidth = 2;

  /** `[idleAtMs, sum]`: by the first the log is empty, until then it holds at most the second. */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    out[o] = this.idleAtMs(st, s, slot, now); // expires the ring to now first
    out[o + 1] = this.ringAt(st, s, slot).sum();
  }

  /** The later time and the larger sum: one entry of both bounds either log. */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void {
    if (!(table[o]! > now)) {
      table[o] = fresh[f]!;
      table[o + 1] = fresh[f + 1]!;
      return;
    }
    if (fresh[f]! > table[o]!) table[o] = fresh[f]!;
    if (fresh[f + 1]! > table[o + 1]!) table[o + 1] = fresh[f + 1]!;
  }

  traceApplies(table: Float64Array, o: number, now: number): boolean {
    return table[o]! > now;
  }

  traceExpiresMs(table: Float64Array, o: number): number {
    return table[o]!;
  }

  /**
   * One entry of the entry's units (and a hair: the cost tolerance of `fits` lets a log hold
   * a little over what it admitted) leaving at the entry's time: until then it holds at
   * least what any log that wrote the entry holds; from then on it is empty, as that log is
   * (docs/keyed.md#bounds). A fresh log where the entry no longer applies.
   */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    const untilMs = table[o]!;
    if (!(untilMs > now)) {
      this.init(st, s, slot);
      return;
    }
    const margin = 2 * TOLERANCE * (this.limit > 1 ? this.limit : 1);
    // A sum below 0 is none a log writes (a tampered snapshot's trace table): as 0, never
    // a negative entry that would admit past the limit.
    const sum = table[o + 1]!;
    const units = (sum > 0 ? sum : 0) + margin;
    const ring = this.ringAt(st, s, slot);
    const slots = ring.slotCount;
    ring.replace(untilMs, units < this.boundUnits ? units : this.boundUnits);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
  }

  /**
   * Sets whether a full ring may grow: only when the engine has (or makes) room for it
   * within `maxBytes`; otherwise its next entry merges into the newest (docs/keyed.md#bounds).
   */
  private mayGrow(st: Float64Array, s: number, slot: number): void {
    const ring = this.ringAt(st, s, slot);
    const n = ring.slotCount;
    if (ring.size !== n || n === 0 || slot < 0) {
      ring.growable = true;
      return;
    }
    const cap = 2 * this.exactEntries + 1;
    const next = Math.min(2 * n, n < this.exactEntries ? this.exactEntries : cap);
    const growable = next <= n || this.sink.reserve(logEntryBytes(next) - logEntryBytes(n), slot);
    // Making room decides other keys through the same cursor: point it back.
    this.ringAt(st, s, slot).growable = growable;
  }

  /**
   * The ring of `slot` at `st[s]` (a cursor, valid until the next call), or of the key
   * without a slot (`slot` -1) being decided, whose block is in the scratch arena: never
   * kept nor accounted. For a class's white-box tests too.
   */
  ringAt(st: Float64Array, s: number, slot: number): LogRing {
    return this.ring.at(slot < 0 ? this.scratch : this.arena, slot < 0 ? 0 : slot, st, s);
  }

  /** True when `cost` fits the log now (after expiring it), as `allowAt` would answer. */
  fitsAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    return cost === 0 || fits(cost, this.limit - this.expired(st, s, slot, now).sum());
  }

  takeAt(st: Float64Array, s: number, slot: number, now: number, cost: number): void {
    if (cost === 0) return;
    const ring = this.ringAt(st, s, slot);
    const slots = ring.slotCount;
    ring.expire(now, this.limit);
    this.mayGrow(st, s, slot);
    ring.append(now, cost, this.windowMs, this.exactEntries);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
  }

  /** From the newest entries first, as `SlidingWindowLog.refund`; an emptied ring is released. */
  refundAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number {
    // Expired to now first: an empty log has nothing left to give back.
    given[o] = this.isIdle(st, s, slot, now) ? 0 : this.ringAt(st, s, slot).refund(cost);
    return 0;
  }

  readonly refundsWithoutReceipt = true;
  readonly leafCount = 1;

  /** When the entry the charge went into leaves. */
  markReceipt(
    st: Float64Array,
    s: number,
    slot: number,
    _now: number,
    marks: Float64Array,
    o: number,
  ): number {
    const at = this.ringAt(st, s, slot).newestLeaveAt();
    marks[o] = at;
    return at;
  }

  /** As `SlidingWindowLog.refund(receipt)`: out of the entry it logged, while it is in the window. */
  refundMarkedAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    asked: Float64Array,
    _creditSince: number,
    given: Float64Array,
    o: number,
  ): number {
    // The entry has left, or the log (expired to now) is empty: nothing to give back.
    const gone = !(marks[o]! > now) || this.isIdle(st, s, slot, now);
    given[o] = gone ? 0 : this.ringAt(st, s, slot).refundEntry(marks[o]!, asked[o]!);
    return 0;
  }

  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    // Every request's path, read in place (no cursor until the log changes) and small enough
    // for V8 to inline into `allow` with the ring's common append: an empty log, a cost of 0,
    // an entry to expire or a block that must grow take the long way, a call of their own.
    const size = st[s + SIZE]!;
    if (size !== 0 && cost !== 0) {
      const arena = slot < 0 ? this.scratch : this.arena;
      const r = slot < 0 ? 0 : 2 * slot;
      const rows = arena.rows;
      const off = rows[r]!;
      const data = arena.data;
      const head = st[s + HEAD]!;
      if (data[off + 2 * head]! > now) {
        const n = rows[r + 1]!;
        const p = head + size - 1;
        const sum = data[off + 2 * (p < n ? p : p - n) + 1]! - st[s + BASE]!;
        if (!fits(cost, this.limit - sum)) return false;
        if (size !== n) {
          this.ringAt(st, s, slot).append(now, cost, this.windowMs, this.exactEntries);
          return true;
        }
      }
    }
    return this.allowLogged(st, s, slot, now, cost);
  }

  /** {@link allowAt} the long way: expires the ring, then logs `cost` when it fits. */
  private allowLogged(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
  ): boolean {
    const ring = this.ringAt(st, s, slot);
    // SlidingWindowLog.allow's steps on the ring, written out (V8 inlines them).
    const slots = ring.slotCount;
    const limit = this.limit;
    ring.expire(now, limit);
    const allowed = cost === 0 || fits(cost, limit - ring.sum());
    if (allowed && cost > 0) {
      if (ring.size === ring.slotCount) this.mayGrow(st, s, slot);
      ring.append(now, cost, this.windowMs, this.exactEntries);
    }
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return allowed;
  }

  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision {
    // An empty log decides as any: a block is made only for an entry it logs.
    const ring = this.ringAt(st, s, slot);
    const slots = ring.slotCount;
    if (take && cost > 0) {
      ring.expire(now, this.limit);
      this.mayGrow(st, s, slot);
    }
    const decision = ring.decide(now, cost, take, this.limit, this.windowMs, this.exactEntries);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return decision;
  }

  /** A log's snapshot says its own length: `[base, leaveAt, total, ...]`, or `[]` for an empty log. */
  readonly savedWidth = 0;

  saveSlot(st: Float64Array, s: number, slot: number): number[] {
    return this.ringAt(st, s, slot).save();
  }

  /** A block holding the saved entries (none for an empty log); the old one is released. */
  loadSlot(st: Float64Array, s: number, slot: number, values: readonly number[]): void {
    checkSavedLog(values);
    // More entries than a ring of this limit holds (a log kept from before a lower limit,
    // or a crafted one): the oldest merge into the first kept entry, whose running total
    // holds their units until it leaves: never in the client's favour, and bounded.
    const maxEntries = 2 * this.exactEntries + 1;
    const excess = (values.length - 1) / 2 - maxEntries;
    const kept = excess > 0 ? [values[0]!, ...values.slice(1 + 2 * excess)] : values;
    this.init(st, s, slot);
    if (kept.length === 0) return;
    const ring = this.ringAt(st, s, slot);
    ring.load(kept, maxEntries);
    this.account(slot, 0, ring.slotCount);
  }

  release(slot: number, bytes: ByteSink): void {
    // Not through a cursor: a slot is released while another's ring is in use (making room).
    const n = this.arena.release(slot);
    if (n !== 0) bytes.addBytes(-logEntryBytes(n));
  }

  /** The engine has `slots` slots now (more, or fewer after a `clear` that released all). */
  grow(slots: number): void {
    this.arena.setOwners(slots);
  }

  /** Accounted bytes of the slot's ring entries (0 without a block): for tests and stats. */
  entryBytesOf(slot: number): number {
    return slot < 0 ? 0 : logEntryBytes(this.arena.rows[2 * slot + 1] ?? 0);
  }

  /** A ring went from `before` to `after` entry slots: accounts the difference (not for the scratch ring). */
  private account(slot: number, before: number, after: number): void {
    if (slot < 0) return;
    this.sink.addBytes(logEntryBytes(after) - logEntryBytes(before), slot);
  }
}
