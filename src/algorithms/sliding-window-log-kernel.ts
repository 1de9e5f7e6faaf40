import type { Decision } from "../core/limiter.js";
import { fits, TOLERANCE } from "../core/numeric.js";
import type { Kernel } from "./kernel.js";
import { LogRing } from "./log-ring.js";
import { logExactEntries } from "./window-math.js";

/** Where a layout accounts the bytes its logs gain or lose: the slab engine. */
export interface ByteSink {
  /** Adds `delta` (possibly negative) accounted bytes. */
  addBytes(delta: number, slot?: number): void;
  /** True when `slot` may grow by `delta` bytes (making room among the other keys first). */
  reserve(delta: number, slot: number): boolean;
}

/**
 * Accounted bytes of a ring object beyond its entries, charged per key up front (as
 * `keyExtraBytes`): the object (header and five fields, 64 bytes on 64-bit V8 without
 * pointer compression), the box of its `base` once it holds a fraction (16) and its
 * pointer in `rings` (8).
 */
export const LOG_RING_BYTES = 64 + 16 + 8;
/**
 * Accounted bytes of a ring's entries once it has any: its `Float64Array` with its buffer
 * and backing store (measured at about 200 bytes beyond the data on Node 20 x64) and 16
 * bytes per entry slot.
 */
export function logEntryBytes(slotCount: number): number {
  return slotCount === 0 ? 0 : 200 + 16 * slotCount;
}

/** The sink before {@link SlidingWindowLogKernel.bind}: a ring that grows then is a bug. */
const UNBOUND: ByteSink = {
  addBytes() {
    throw new Error("SlidingWindowLogKernel: bind(engine) before the first request");
  },
  reserve() {
    throw new Error("SlidingWindowLogKernel: bind(engine) before the first request");
  },
};

/**
 * The slot of a `SlidingWindowLog` key: one double (unused by the layout; the engine
 * threads its free list through it) and, by slot, a {@link LogRing} made at the key's
 * first logged entry, decided by the ring as the class decides (same functions, same
 * arithmetic), so a key decides bit for bit as a `SlidingWindowLog` of its own. A slot
 * without a ring is an empty log.
 *
 * Bytes: each key is charged {@link LOG_RING_BYTES} up front (`keyExtraBytes`); a ring's
 * entries ({@link logEntryBytes}) are added and taken back through the sink given to
 * {@link bind} as the ring grows, shrinks and is released.
 * @internal
 */
export class SlidingWindowLogKernel implements Kernel {
  readonly doubles = 1;
  readonly keyExtraBytes = LOG_RING_BYTES;
  /** A full ring: `2 * exactEntries + 1` entries, the class's bound (see `logLeaveAt`). */
  maxGrowthBytes: number;
  limit: number;
  windowMs: number;
  /** `logExactEntries(limit)`: entries kept at their exact time (see `logLeaveAt`). */
  private exactEntries: number;
  /**
   * Units of the one entry of a restored state ({@link restoreUntil}):
   * `limit` plus twice the most a log can go over it (the cost tolerance of `fits` lets a
   * log hold up to `limit + TOLERANCE * max(1, cost)`), so it is at least any log's sum and
   * admits no cost > 0 while it counts.
   */
  private boundUnits: number;
  /** The ring of each slot; `undefined` for an empty log. */
  private readonly rings: (LogRing | undefined)[] = [];
  private sink: ByteSink = UNBOUND;
  /** The ring of a key without a slot being decided (`peek` of a traced new key). */
  private scratch: LogRing | undefined;
  /** An empty log for the decisions of a slot without a ring; never logged to. */
  private readonly empty = new LogRing();

  /** `limit` and `windowMs` as a `SlidingWindowLog` has them (already checked). */
  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.exactEntries = logExactEntries(limit);
    this.maxGrowthBytes = logEntryBytes(2 * this.exactEntries + 1);
    this.boundUnits = limit + 2 * TOLERANCE * (limit > 1 ? limit : 1);
  }

  /**
   * Gives the layout the engine whose slots it serves, where the rings' bytes are
   * accounted: call it once, right after the engine is made and before its first request.
   */
  /** Expired to now; a longer window moves every entry out by the difference (as the class). */
  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void {
    this.isIdle(st, s, slot, now); // expires the ring to now
    const grow = (next as SlidingWindowLogKernel).windowMs - this.windowMs;
    if (grow > 0) this.ringAt(slot)?.extend(grow);
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
    this.maxGrowthBytes = n.maxGrowthBytes;
    this.boundUnits = n.boundUnits;
  }

  bind(sink: ByteSink): void {
    this.sink = sink;
  }

  init(st: Float64Array, s: number, slot: number): void {
    st[s] = 0;
    if (slot < 0) {
      this.scratch = undefined;
      return;
    }
    // A pinned key reset in place keeps its slot: its ring goes.
    if (this.rings[slot] !== undefined) this.release(slot, this.sink);
  }

  isIdle(_st: Float64Array, _s: number, slot: number, now: number): boolean {
    const ring = this.ringAt(slot);
    if (ring === undefined) return true;
    const slots = ring.slotCount;
    ring.expire(now, this.limit);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return ring.size === 0;
  }

  /** When the newest entry leaves (then the log is empty), a float step or so later. */
  idleAtMs(_st: Float64Array, _s: number, slot: number, now: number): number {
    const ring = this.ringAt(slot);
    const at = ring === undefined ? Number.NEGATIVE_INFINITY : ring.newestLeaveAt();
    if (!(at > now)) return now;
    return at + Math.abs(at) * 2 ** -50; // a few float steps later: never early
  }

  usage(st: Float64Array, s: number, slot: number, now: number): number {
    this.isIdle(st, s, slot, now); // expires the ring to now
    const ring = this.ringAt(slot);
    return ring === undefined ? 0 : ring.sum() / this.limit;
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
    const ring = this.ringAt(slot);
    out[o + 1] = ring === undefined ? 0 : ring.sum();
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
    const ring = slot < 0 ? this.scratchRing() : (this.rings[slot] ?? this.create(slot));
    const slots = ring.slotCount;
    ring.replace(untilMs, units < this.boundUnits ? units : this.boundUnits);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
  }

  /** A ring for deciding a key without a slot (`peek` of a new key): never kept nor accounted. */
  private scratchRing(): LogRing {
    this.scratch = new LogRing();
    return this.scratch;
  }

  /**
   * Sets whether a full ring may grow: only when the engine has (or makes) room for it
   * within `maxBytes`; otherwise its next entry merges into the newest (docs/keyed.md#bounds).
   */
  private mayGrow(ring: LogRing, slot: number): void {
    if (ring.size !== ring.slotCount || ring.slotCount === 0 || slot < 0) {
      ring.growable = true;
      return;
    }
    const cap = 2 * this.exactEntries + 1;
    const next = Math.min(
      2 * ring.slotCount,
      ring.slotCount < this.exactEntries ? this.exactEntries : cap,
    );
    ring.growable =
      next <= ring.slotCount ||
      this.sink.reserve(logEntryBytes(next) - logEntryBytes(ring.slotCount), slot);
  }

  /** The ring of `slot` (`undefined` for an empty log): for a class's white-box tests and snapshots. */
  ringOf(slot: number): LogRing | undefined {
    return this.rings[slot];
  }

  /** The ring of `slot`, or of the key without a slot (`slot` -1) being decided. */
  private ringAt(slot: number): LogRing | undefined {
    return slot < 0 ? this.scratch : this.rings[slot];
  }

  /** True when `cost` fits the log now (after expiring it), as `allowAt` would answer. */
  fitsAt(_st: Float64Array, _s: number, slot: number, now: number, cost: number): boolean {
    const ring = this.ringAt(slot);
    if (ring === undefined || cost === 0) return cost === 0 || fits(cost, this.limit);
    const slots = ring.slotCount;
    ring.expire(now, this.limit);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return fits(cost, this.limit - ring.sum());
  }

  /** Logs `cost` (> 0) now, unchecked: `allOf` checked every part with {@link fitsAt}. */
  takeAt(_st: Float64Array, _s: number, slot: number, now: number, cost: number): void {
    if (cost === 0) return;
    const ring = this.rings[slot] ?? this.create(slot);
    const slots = ring.slotCount;
    ring.expire(now, this.limit);
    this.mayGrow(ring, slot);
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
    given[o] = 0;
    const ring = this.ringAt(slot);
    if (ring === undefined) return 0;
    if (this.isIdle(st, s, slot, now)) return 0; // expired to now: nothing left to give back
    given[o] = ring.refund(cost);
    return 0;
  }

  readonly refundsWithoutReceipt = true;
  readonly leafCount = 1;

  /** When the entry the charge went into leaves. */
  markReceipt(
    _st: Float64Array,
    _s: number,
    slot: number,
    _now: number,
    marks: Float64Array,
    o: number,
  ): number {
    const at = this.ringAt(slot)?.newestLeaveAt() ?? Number.NEGATIVE_INFINITY;
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
    given[o] = 0;
    const ring = this.ringAt(slot);
    if (ring === undefined || !(marks[o]! > now)) return 0;
    if (this.isIdle(st, s, slot, now)) return 0; // expired to now
    given[o] = ring.refundEntry(marks[o]!, asked[o]!);
    return 0;
  }

  allowAt(_st: Float64Array, _s: number, slot: number, now: number, cost: number): boolean {
    let ring = this.ringAt(slot);
    if (ring === undefined) {
      if (cost === 0) return true;
      if (!fits(cost, this.limit)) return false;
      ring = this.create(slot);
    }
    // SlidingWindowLog.allow's steps on the ring, written out as there (V8 inlines them).
    const slots = ring.slotCount;
    const limit = this.limit;
    ring.expire(now, limit);
    const allowed = cost === 0 || fits(cost, limit - ring.sum());
    if (allowed && cost > 0) {
      if (ring.size === ring.slotCount) this.mayGrow(ring, slot);
      ring.append(now, cost, this.windowMs, this.exactEntries);
    }
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return allowed;
  }

  decideAt(
    _st: Float64Array,
    _s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision {
    let ring = this.ringAt(slot);
    if (ring === undefined) {
      // An empty log decides as any: a ring is made only for a cost it may log.
      if (!(take && cost > 0 && fits(cost, this.limit))) {
        return this.empty.decide(now, cost, false, this.limit, this.windowMs, this.exactEntries);
      }
      ring = this.create(slot);
    }
    const slots = ring.slotCount;
    if (take && cost > 0) {
      ring.expire(now, this.limit);
      this.mayGrow(ring, slot);
    }
    const decision = ring.decide(now, cost, take, this.limit, this.windowMs, this.exactEntries);
    if (ring.slotCount !== slots) this.account(slot, slots, ring.slotCount);
    return decision;
  }

  /** A log's snapshot says its own length: `[base, leaveAt, total, ...]`, or `[]` for an empty log. */
  readonly savedWidth = 0;

  saveSlot(_st: Float64Array, _s: number, slot: number): number[] {
    return this.ringAt(slot)?.save() ?? [];
  }

  /** A new ring holding the saved entries (none for an empty log); the old one is released. */
  loadSlot(st: Float64Array, s: number, slot: number, values: readonly number[]): void {
    const ring = new LogRing();
    ring.load(values);
    // More entries than a ring of this limit holds (a log kept from before a lower limit,
    // or a crafted one): the oldest merge into the first kept entry, whose running total
    // holds their units until it leaves: never in the client's favour, and bounded.
    const excess = ring.size - (2 * this.exactEntries + 1);
    if (excess > 0) ring.load([values[0]!, ...values.slice(1 + 2 * excess)]);
    this.init(st, s, slot);
    if (ring.size === 0) return;
    if (slot < 0) {
      this.scratch = ring;
      return;
    }
    this.create(slot);
    this.rings[slot] = ring;
    this.account(slot, 0, ring.slotCount);
  }

  /** Frees the slot's ring and gives its entries' bytes back. */
  release(slot: number, bytes: ByteSink): void {
    const ring = this.ringAt(slot);
    if (ring === undefined) return;
    this.rings[slot] = undefined;
    const n = logEntryBytes(ring.slotCount);
    if (n !== 0) bytes.addBytes(-n);
  }

  /** The engine has `slots` slots now (more, or fewer after a `clear` that released all). */
  grow(slots: number): void {
    const rings = this.rings;
    if (rings.length > slots) rings.length = slots;
    while (rings.length < slots) rings.push(undefined);
  }

  /** Accounted bytes of the slot's ring entries (0 without a ring): for tests and stats. */
  entryBytesOf(slot: number): number {
    const ring = this.ringAt(slot);
    return ring === undefined ? 0 : logEntryBytes(ring.slotCount);
  }

  /** A ring for `slot`, empty (its bytes are in `keyExtraBytes` until it has entries). */
  private create(slot: number): LogRing {
    const rings = this.rings;
    while (rings.length <= slot) rings.push(undefined);
    const ring = new LogRing();
    rings[slot] = ring;
    return ring;
  }

  /** A ring went from `before` to `after` entry slots: accounts the difference (not for the scratch ring). */
  private account(slot: number, before: number, after: number): void {
    if (slot < 0) return;
    this.sink.addBytes(logEntryBytes(after) - logEntryBytes(before), slot);
  }
}
