import { checkWindowClock } from "../algorithms/time.js";
import { badClock } from "../errors.js";
import type { Clock } from "../limiter.js";
import type { SlotLayout } from "./layout.js";
import type { Slab } from "./layouts/index.js";
import { EVICT_SCAN, type KeyedLimiterStats, SWEEP_CHUNK, SWEEP_EVERY } from "./store.js";

/**
 * Slots one scan at the bound visits at most once it has found a key to look at (pinned
 * ones are skipped; at most half the slots are, and the cursor moves on, so a scan is
 * amortized O(1) even past a run of pinned slots).
 */
const MAX_VISIT = 4 * EVICT_SCAN;
/** The trace table before its first entry. */
const EMPTY_TRACE = /* @__PURE__ */ new Float64Array(0);
/** Slots allocated at first. */
const FIRST_SLOTS = 16;
/** Flag of a slot with pending waiters: never swept nor evicted. */
export const PINNED = 1;

/**
 * Bytes a key costs beyond its slot, as accounted: the key string (2 bytes per UTF-16
 * code unit, an upper bound of both V8 string kinds, plus a 24-byte header), its
 * `Map` entry with its share of the hash buckets (32) and its slot-to-key pointer (8).
 */
export function keyBytes(key: string): number {
  return 2 * key.length + KEY_OVERHEAD_BYTES;
}
/** See {@link keyBytes}. */
export const KEY_OVERHEAD_BYTES = 24 + 32 + 8;

/** What an engine is built with. */
export interface EngineOptions {
  readonly layout: SlotLayout;
  readonly clock: Clock;
  readonly maxKeys: number;
  readonly maxBytes: number;
  /** Longest key, in UTF-16 code units (for the smallest `maxBytes` that holds a few). */
  readonly maxKeyLength: number;
  /** At the bound: drop a key in use (leaving a trace) or refuse new keys. */
  readonly whenFull: "evict" | "refuse";
  /**
   * The policy's class and its smallest window (ms), when a reading must stay within the
   * window's float-step bound (see `checkWindowClock`); `Infinity` for the buckets.
   */
  readonly clockBoundMs: number;
  readonly clockWhere: string;
  readonly windowMs: number;
}

/**
 * The one slab engine of {@link KeyedLimiter}'s fast path, for every built-in policy: the
 * key-to-slot index, the slab of state doubles (it grows by doubling, never shrinks but on
 * `clear`), the free list threaded through it, the last-key cache, the incremental idle
 * sweep ({@link SWEEP_CHUNK} slots every {@link SWEEP_EVERY} calls), the bound (`maxKeys`,
 * `maxBytes`) and the trace table. A slot's content and decisions are its
 * {@link SlotLayout}'s. One clock reading per call, one high-water mark for the registry.
 *
 * At the bound idle keys go first; then (`whenFull: "evict"`) the key of {@link EVICT_SCAN}
 * looked at that is idle soonest goes, its trace kept under a seeded hash of its key, and a
 * new key whose entry still applies starts from the state it bounds (`restore`), never
 * fresher; with `"refuse"` the new key is refused. Pinned keys (waiters) never go.
 * See docs/keyed.md#bounds.
 * @internal
 */
export class SlabEngine {
  readonly layout: SlotLayout;
  readonly stride: number;
  readonly index = new Map<string, number>();
  /** Slot to key; `undefined` marks a free slot. */
  keys: (string | undefined)[];
  /** The slot doubles (see {@link SlotLayout}). */
  state: Float64Array;
  /** Per slot: {@link UNCERTAIN}, {@link PINNED}. */
  flags: Uint8Array;
  /** `[seenMs]`: the latest clock reading seen, kept as a raw double (never boxed). */
  readonly seen = new Float64Array([Number.NEGATIVE_INFINITY]);
  /** The last key found and its slot: a hot key's repeated calls skip the Map. */
  lastKey: string | undefined;
  lastSlot = 0;
  /** @internal */
  private readonly clock: Clock;
  /** @internal */
  private readonly maxKeys: number;
  /** @internal */
  private readonly maxBytes: number;
  /** @internal */
  private readonly refuse: boolean;
  /** @internal */
  private clockBoundMs: number;
  /** @internal */
  private clockWhere: string;
  /** @internal */
  private windowMs: number;
  /** @internal */
  private slots: number;
  /** @internal Slots ever handed out: slots at or above it were never used. */
  private highWater = 0;
  /** @internal */
  private free = -1;
  /** @internal */
  private count = 0;
  /** Pinned slots (keys with waiters): while 0, no slot's flag needs reading. */
  pinned = 0;
  /** @internal */
  private cursor = 0;
  /** @internal */
  private countdown = SWEEP_EVERY;
  /** @internal Accounted bytes of the keys kept and of their logs (slots and table apart). */
  private keyBytesKept = 0;
  /**
   * The trace table: `traceWidth` numbers per entry (see {@link SlotLayout.traceValue}),
   * entries by seeded hash of a key.
   */
  trace: Float64Array = EMPTY_TRACE;
  /** @internal */
  private readonly traceWidth: number;
  /** @internal The table's bytes, accounted before it is made. */
  private readonly traceBytes: number;
  /** @internal One entry's worth, for the trace of a key being dropped. */
  private readonly traceScratch: Float64Array;
  /** @internal */
  private readonly traceMask: number;
  /** @internal */
  private readonly traceSeed: number;
  /** @internal The latest "busy until" in the table: at or after it, no entry applies. */
  private traceUntil = Number.NEGATIVE_INFINITY;
  /** @internal */
  private created = 0;
  /** @internal */
  private evictedIdle = 0;
  /** @internal */
  private evictedLossy = 0;
  /** @internal */
  private refused = 0;
  /** @internal */
  private restored = 0;
  /**
   * The soonest "idle at" among the keys the last full scan looked at (`Infinity` when all
   * were pinned): when a refused new key may try again.
   */
  soonestIdleMs = Number.POSITIVE_INFINITY;

  constructor(o: EngineOptions) {
    this.layout = o.layout;
    this.stride = o.layout.doubles;
    this.clock = o.clock;
    this.maxKeys = o.maxKeys;
    this.maxBytes = o.maxBytes;
    this.refuse = o.whenFull === "refuse";
    this.clockBoundMs = o.clockBoundMs;
    this.clockWhere = o.clockWhere;
    this.windowMs = o.windowMs;
    this.traceWidth = o.layout.traceWidth;
    const entries = traceSlots(o.maxKeys, o.maxBytes / this.traceWidth);
    // Counted from the start, made at the first key pushed out in use: most registries never are.
    this.traceBytes = entries * this.traceWidth * 8;
    this.traceScratch = new Float64Array(this.traceWidth);
    this.traceMask = entries - 1;
    this.traceSeed = (Math.random() * 2 ** 32) >>> 0;
    this.slots = Math.min(FIRST_SLOTS, o.maxKeys);
    this.state = new Float64Array(this.slots * this.stride);
    this.flags = new Uint8Array(this.slots);
    this.keys = new Array<string | undefined>(this.slots).fill(undefined);
    this.layout.grow(this.slots);
    this.layout.bind(this);
    // Room for a few keys: beyond what is left, a log merges its entries rather than grow.
    const floor =
      this.committed() +
      4 * (o.layout.keyExtraBytes + 2 * o.maxKeyLength + KEY_OVERHEAD_BYTES + this.slotBytes());
    if (o.maxBytes < floor) {
      throw new RangeError(
        `KeyedLimiter: maxBytes must be at least ${floor} for this policy (room for four keys), got ${o.maxBytes}`,
      );
    }
  }

  /** Keys kept. */
  get size(): number {
    return this.count;
  }

  /**
   * The bytes the bounds count: {@link bytes} with the trace table's reserved from the
   * start, so that making it at the first key pushed out never passes `maxBytes`.
   */
  private committed(): number {
    return this.keyBytesKept + this.slots * this.slotBytes() + this.traceBytes;
  }

  /** Accounted bytes now: keys, allocated slots, waits, logs and the trace table once made. */
  get bytes(): number {
    return this.keyBytesKept + this.slots * this.slotBytes() + this.trace.length * 8;
  }

  get stats(): KeyedLimiterStats {
    return {
      created: this.created,
      evictedIdle: this.evictedIdle,
      evictedLossy: this.evictedLossy,
      slots: this.slots,
      bytes: this.bytes,
      refused: this.refused,
      restored: this.restored,
    };
  }

  /** Reads the clock once; a reading behind the latest one counts as the latest. */
  now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock("KeyedLimiter", t);
    const seen = this.seen;
    if (t > seen[0]!) {
      if (!(t < this.clockBoundMs && t > -this.clockBoundMs)) {
        checkWindowClock(this.clockWhere, t, this.windowMs, this.clockBoundMs);
      }
      seen[0] = t;
    }
    return seen[0]!;
  }

  /**
   * The slot of `key`, or -1 when it has none; first runs the incremental sweep when due
   * (after {@link now}, whose reading it uses).
   */
  find(key: string): number {
    if (--this.countdown === 0) this.step();
    if (key === this.lastKey) return this.lastSlot;
    const slot = this.index.get(key);
    if (slot === undefined) return -1;
    this.lastKey = key;
    this.lastSlot = slot;
    return slot;
  }

  /** The slot of `key` without sweeping or caching, or -1. */
  lookup(key: string): number {
    if (key === this.lastKey) return this.lastSlot;
    const slot = this.index.get(key);
    return slot === undefined ? -1 : slot;
  }

  /**
   * Where a key without a slot stands: -1 when it starts fresh, else the offset in
   * {@link trace} of the entry it starts from ({@link SlotLayout.restore}).
   */
  traceOf(key: string, now: number): number {
    if (this.traceUntil <= now) return -1;
    const o = (this.hash(key) & this.traceMask) * this.traceWidth;
    return this.layout.traceApplies(this.trace, o, now) ? o : -1;
  }

  /**
   * A slot for a new key, its state written (fresh, or restored from its trace entry);
   * makes room first at the bound. Returns -1 when no room can
   * be made (`whenFull: "refuse"`, or every key pinned): nothing is kept.
   */
  insert(key: string, now: number): number {
    const need = keyBytes(key) + this.layout.keyExtraBytes;
    if (!this.hasRoom(need) && !this.makeRoom(now, need)) {
      this.refused++;
      return -1;
    }
    let slot = this.free;
    if (slot >= 0) {
      this.free = this.state[slot * this.stride]!;
    } else {
      if (this.highWater === this.slots) this.grow(need);
      slot = this.highWater++;
    }
    this.keys[slot] = key;
    this.index.set(key, slot);
    this.count++;
    this.created++;
    this.keyBytesKept += need;
    const o = this.traceOf(key, now);
    const s = slot * this.stride;
    this.flags[slot] = 0;
    if (o < 0) this.layout.init(this.state, s, slot, now);
    else {
      this.restored++;
      this.layout.restore(this.state, s, slot, this.trace, o, now);
    }
    return slot;
  }

  /**
   * True when {@link insert} of a new `key` would be refused now (for `peek`, which keeps
   * nothing): the registry is full and, with `"refuse"`, none of the keys a scan would look
   * at is idle (or, with `"evict"`, every key waits). Changes nothing.
   */
  wouldRefuse(key: string, now: number): boolean {
    if (this.hasRoom(keyBytes(key) + this.layout.keyExtraBytes)) return false;
    if (!this.refuse) return this.pinned >= this.count;
    let slot = this.cursor;
    let seen = 0;
    for (let visited = 0; visited < this.highWater && seen < EVICT_SCAN; visited++) {
      if (this.keys[slot] !== undefined && (this.flags[slot]! & PINNED) === 0) {
        seen++;
        if (this.layout.isIdle(this.state, slot * this.stride, slot, now)) return false;
        const idleAt = this.layout.idleAtMs(this.state, slot * this.stride, slot, now);
        if (seen === 1 || idleAt < this.soonestIdleMs) this.soonestIdleMs = idleAt;
      }
      slot = slot + 1 < this.highWater ? slot + 1 : 0;
    }
    return true;
  }

  /** Pins a slot while it has waiters: never swept nor evicted. */
  pin(slot: number): void {
    if ((this.flags[slot]! & PINNED) === 0) this.pinned++;
    this.flags[slot]! |= PINNED;
  }

  /** Unpins a slot; drops it when idle. */
  unpin(slot: number): void {
    if ((this.flags[slot]! & PINNED) === 0) return;
    this.flags[slot]! &= ~PINNED;
    this.pinned--;
    if (this.layout.isIdle(this.state, slot * this.stride, slot, this.seen[0]!)) {
      this.drop(slot);
      this.evictedIdle++;
    }
  }

  /**
   * Called by a layout when `slot`'s log grows or shrinks by `delta` accounted bytes. A
   * growth past `maxBytes` makes room at once among the other keys (idle ones first; with
   * `whenFull: "evict"` then keys in use, with traces), never `slot` itself nor a pinned key.
   */
  addBytes(delta: number, slot = -1): void {
    this.keyBytesKept += delta;
    if (delta > 0 && this.committed() > this.maxBytes) this.shed(slot, 0);
  }

  /** True when `slot` may grow by `delta` bytes within `maxBytes`, after making room if needed. */
  reserve(delta: number, slot: number): boolean {
    if (this.committed() + delta <= this.maxBytes) return true;
    this.shed(slot, delta);
    return this.committed() + delta <= this.maxBytes;
  }

  /** @internal Drops other keys until the bytes and `extra` are within `maxBytes`, or none can go. */
  private shed(keep: number, extra: number): void {
    const now = this.seen[0]!;
    for (
      let rounds = 0;
      this.committed() + extra > this.maxBytes && rounds <= this.count;
      rounds++
    ) {
      const victim = this.scan(now, keep);
      if (this.committed() + extra <= this.maxBytes) return;
      if (this.refuse || victim < 0) return; // "refuse" never drops a key in use
      this.evict(victim, now);
    }
  }

  /** @internal Drops a key in use, keeping its trace. */
  private evict(victim: number, now: number): void {
    const key = this.keys[victim]!;
    if (this.trace.length === 0) {
      this.trace = new Float64Array(this.traceBytes / 8).fill(Number.NEGATIVE_INFINITY);
    }
    const o = (this.hash(key) & this.traceMask) * this.traceWidth;
    this.layout.traceValue(this.state, victim * this.stride, victim, now, this.traceScratch, 0);
    this.layout.traceCombine(this.trace, o, this.traceScratch, 0, now);
    const expires = this.layout.traceExpiresMs(this.trace, o);
    if (expires > this.traceUntil) this.traceUntil = expires;
    this.drop(victim);
    this.evictedLossy++;
  }

  /**
   * `reconfigure`: carries every kept key's state over to the numbers of `next` (the slab of
   * the reconfigured policy, of the same kind) at `now`, the trace table's entries too (so a
   * key pushed out comes back as it would be had it been kept, never fresher), then takes its
   * numbers and window bound; keys created later start from them. `skip(slot)` is true for a
   * slot whose state another owner carries over (a bucket key with waiters). O(slots +
   * trace entries).
   */
  retune(next: Slab, now: number, skip: (slot: number) => boolean): void {
    const layout = this.layout;
    for (let slot = 0; slot < this.highWater; slot++) {
      if (this.keys[slot] === undefined || skip(slot)) continue;
      layout.retuneSlot(next.layout, this.state, slot * this.stride, slot, now);
    }
    const trace = this.trace;
    for (let o = 0; o < trace.length; o += this.traceWidth) {
      layout.retuneTrace(next.layout, trace, o, now);
    }
    layout.adopt(next.layout);
    let until = Number.NEGATIVE_INFINITY;
    for (let o = 0; o < trace.length; o += this.traceWidth) {
      const expires = layout.traceExpiresMs(trace, o);
      if (expires > until) until = expires;
    }
    this.traceUntil = until;
    this.clockBoundMs = next.clockBoundMs;
    this.clockWhere = next.clockWhere;
    this.windowMs = next.windowMs;
  }

  /** Forgets a key's state (its next request starts as a new key). */
  reset(key: string): void {
    const slot = this.index.get(key);
    if (slot === undefined) return;
    if ((this.flags[slot]! & PINNED) !== 0) {
      this.layout.init(this.state, slot * this.stride, slot, this.now());
      return;
    }
    this.drop(slot);
  }

  /** Forgets every key that is not pinned, and the trace table; with none pinned, the slab shrinks back. */
  clear(): void {
    this.trace = EMPTY_TRACE;
    this.traceUntil = Number.NEGATIVE_INFINITY;
    if (this.pinned === 0) {
      for (let slot = 0; slot < this.highWater; slot++) {
        if (this.keys[slot] !== undefined) this.layout.release(slot, this);
      }
      this.index.clear();
      this.slots = Math.min(FIRST_SLOTS, this.maxKeys);
      this.state = new Float64Array(this.slots * this.stride);
      this.flags = new Uint8Array(this.slots);
      this.keys = new Array<string | undefined>(this.slots).fill(undefined);
      this.layout.grow(this.slots);
      this.highWater = 0;
      this.free = -1;
      this.count = 0;
      this.cursor = 0;
      this.keyBytesKept = 0;
      this.lastKey = undefined;
      return;
    }
    for (let slot = 0; slot < this.highWater; slot++) {
      if (this.keys[slot] === undefined) continue;
      if ((this.flags[slot]! & PINNED) !== 0) {
        this.layout.init(this.state, slot * this.stride, slot, this.seen[0]!);
      } else this.drop(slot);
    }
  }

  /** Drops every idle key now; returns how many. */
  sweep(): number {
    const now = this.now();
    let dropped = 0;
    for (let slot = 0; slot < this.highWater; slot++) {
      if (this.droppable(slot, now)) {
        this.drop(slot);
        dropped++;
      }
    }
    this.evictedIdle += dropped;
    return dropped;
  }

  /** @internal True when the slot holds a key that is idle and not pinned. */
  private droppable(slot: number, now: number): boolean {
    return (
      this.keys[slot] !== undefined &&
      (this.flags[slot]! & PINNED) === 0 &&
      this.layout.isIdle(this.state, slot * this.stride, slot, now)
    );
  }

  /** @internal The incremental sweep: looks at the next few slots and drops the idle ones. */
  private step(): void {
    const now = this.seen[0]!;
    this.countdown = SWEEP_EVERY;
    const n = this.highWater < SWEEP_CHUNK ? this.highWater : SWEEP_CHUNK;
    for (let i = 0; i < n; i++) {
      const slot = this.cursor;
      this.cursor = slot + 1 < this.highWater ? slot + 1 : 0;
      if (this.droppable(slot, now)) {
        this.drop(slot);
        this.evictedIdle++;
      }
    }
  }

  /**
   * @internal
   * Makes room for a key of `need` bytes: drops the idle keys among the next
   * {@link EVICT_SCAN} kept ones; while still full, drops the one of them idle soonest,
   * leaving its trace (`"evict"`), or gives up (`"refuse"`). False when no room was made.
   */
  private makeRoom(now: number, need: number): boolean {
    for (let round = 0; ; round++) {
      const victim = this.scan(now, -1);
      if (this.hasRoom(need)) return true;
      if (this.refuse || victim < 0) return false;
      this.evict(victim, now);
      if (this.hasRoom(need)) return true;
      if (round > this.maxKeys) return false;
    }
  }

  /**
   * @internal One scan at the bound: drops the idle keys among the next
   * {@link EVICT_SCAN} kept ones (not pinned, not `keep`) and returns the slot of the one
   * to push out (idle soonest, and of those the least used), or -1; sets `soonestIdleMs`.
   */
  private scan(now: number, keep: number): number {
    let victim = -1;
    let victimIdleAt = Number.POSITIVE_INFINITY;
    let victimUsage = Number.POSITIVE_INFINITY;
    let seen = 0;
    for (
      let visited = 0;
      visited < this.highWater && (visited < MAX_VISIT || seen === 0) && seen < EVICT_SCAN;
      visited++
    ) {
      const slot = this.cursor;
      this.cursor = slot + 1 < this.highWater ? slot + 1 : 0;
      if (slot === keep || this.keys[slot] === undefined || (this.flags[slot]! & PINNED) !== 0) {
        continue;
      }
      seen++;
      const s = slot * this.stride;
      if (this.layout.isIdle(this.state, s, slot, now)) {
        this.drop(slot);
        this.evictedIdle++;
        continue;
      }
      const idleAt = this.layout.idleAtMs(this.state, s, slot, now);
      if (victim >= 0 && idleAt > victimIdleAt) continue;
      const usage = this.layout.usage(this.state, s, slot, now);
      if (victim < 0 || idleAt < victimIdleAt || usage < victimUsage) {
        victim = slot;
        victimIdleAt = idleAt;
        victimUsage = usage;
      }
    }
    this.soonestIdleMs = victimIdleAt;
    return victim;
  }

  /** @internal True when a key of `need` bytes fits: under `maxKeys`, and its bytes (and a slot) under `maxBytes`. */
  private hasRoom(need: number): boolean {
    if (this.count >= this.maxKeys || this.committed() + need > this.maxBytes) return false;
    if (this.free >= 0 || this.highWater < this.slots) return true;
    return this.committed() + need + this.slotBytes() <= this.maxBytes;
  }

  /** @internal */
  private drop(slot: number): void {
    const key = this.keys[slot]!;
    this.index.delete(key);
    this.keys[slot] = undefined;
    this.keyBytesKept -= keyBytes(key) + this.layout.keyExtraBytes;
    this.layout.release(slot, this);
    this.flags[slot] = 0;
    this.state[slot * this.stride] = this.free;
    this.free = slot;
    this.count--;
    if (this.lastKey === key) this.lastKey = undefined;
  }

  /** @internal Bytes one allocated slot costs: its doubles, its flag and its key pointer. */
  private slotBytes(): number {
    return this.stride * 8 + 1 + 8;
  }

  /** @internal Grows the slab by doubling, within `maxKeys` and what `maxBytes` leaves after `need`. */
  private grow(need: number): void {
    const affordable = Math.floor((this.maxBytes - this.committed() - need) / this.slotBytes());
    const slots = Math.max(
      this.slots + 1,
      Math.min(this.slots * 2, this.maxKeys, this.slots + affordable),
    );
    const state = new Float64Array(slots * this.stride);
    state.set(this.state);
    this.state = state;
    const flags = new Uint8Array(slots);
    flags.set(this.flags);
    this.flags = flags;
    const keys = new Array<string | undefined>(slots).fill(undefined);
    for (let i = 0; i < this.highWater; i++) keys[i] = this.keys[i];
    this.keys = keys;
    this.slots = slots;
    this.layout.grow(slots);
  }

  /** @internal FNV-1a over the key's UTF-16 code units, seeded per registry. */
  private hash(key: string): number {
    let h = 0x811c9dc5 ^ this.traceSeed;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return (h ^ (h >>> 15)) >>> 0;
  }
}

/**
 * Entries of the trace table: the power of two at or above `2 * maxKeys` (fewer
 * collisions: a collision only makes a new key start conservatively), at least 4,096, at
 * most 2^21 (16 MiB, at the default `maxKeys`), and within a 16th of `maxBytes`.
 */
export function traceSlots(maxKeys: number, maxBytes: number): number {
  let n = MIN_TRACE_SLOTS;
  const cap = Math.min(MAX_TRACE_SLOTS, Math.max(MIN_TRACE_SLOTS, maxBytes / 16 / 8));
  while ((n < 2 * maxKeys || n < USUAL_MIN_TRACE_SLOTS) && n * 2 <= cap) n *= 2;
  return n;
}
/** Fewest trace entries (512 bytes), for the smallest `maxBytes`. */
const MIN_TRACE_SLOTS = 64;
/** Trace entries at least, where `maxBytes` allows (32 KiB). */
const USUAL_MIN_TRACE_SLOTS = 4096;
/** Most trace entries (16 MiB). */
const MAX_TRACE_SLOTS = 2 ** 21;
