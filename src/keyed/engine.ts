import type { Kernel } from "../algorithms/kernel.js";
import {
  decodeNumber,
  encodeNumber,
  encodeState,
  type RegistrySnapshot,
} from "../algorithms/snapshot.js";
import { checkWindowClock } from "../algorithms/time.js";
import { badClock, describe } from "../core/errors.js";
import type { Clock } from "../core/limiter.js";
import { hashKey, KeyIndex, tableEntriesFor } from "./key-index.js";
import type { Slab } from "./layouts/index.js";
import {
  EVICT_SCAN,
  KeyCounters,
  type KeyedLimiterStats,
  SWEEP_CHUNK,
  SWEEP_EVERY,
} from "./stats.js";

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
/** Flag of a blocked slot (see {@link SlabEngine.block}): denied until its time, never swept. */
export const BLOCKED = 2;
/** Accounted bytes of one block beyond its key: its `Map` entry (slot and time). */
export const BLOCK_BYTES = 64;
/** Doubles per entry of the block trace: `[untilMs, fingerprint]`. */
const BLOCK_TRACE_WIDTH = 2;
/** The fingerprint of a block trace entry two blocked keys wrote: it applies to every key. */
const ANY_KEY = -1;
/** Most block trace entries (1 MiB). */
const MAX_BLOCK_TRACE_SLOTS = 2 ** 16;

/**
 * Bytes a key costs in the slab engine beyond its slot, as accounted: the key string alone (2 bytes
 * per UTF-16 code unit, an upper bound of both V8 string kinds, and a 24-byte header). Its pointer,
 * its hash and its share of the index's table are the slot's (see `slotBytes`, {@link KeyIndex}).
 */
export function slabKeyBytes(key: string): number {
  return 2 * key.length + STRING_HEADER_BYTES;
}
/** See {@link slabKeyBytes}. */
export const STRING_HEADER_BYTES = 24;

/**
 * Bytes a key costs in a `Map`-indexed registry (the generic path), as accounted: its string
 * ({@link slabKeyBytes}), its `Map` entry with its share of the hash buckets (32) and a pointer (8).
 */
export function keyBytes(key: string): number {
  return slabKeyBytes(key) + 32 + 8;
}

/**
 * Where each engine's hash keys come from, 32 random bits a call (two per key of its index,
 * which its trace tables share): from `crypto.getRandomValues` where the runtime has it (Node,
 * Bun, Deno, workerd), else `Math.random`, so that no client can choose keys that collide in
 * its index or trace tables. The tests fix it (through test/support/seeds.ts), so that which
 * keys share a trace entry is the same in every run. @internal
 */
export const hashSeeds: { next: () => number; fallbacks: number } = {
  next: () => drawHashSeed(),
  /** Draws that could not use `crypto.getRandomValues`. */
  fallbacks: 0,
};

/** 32 random bits for {@link hashSeeds}: from crypto, else `Math.random` (counted). @internal */
export function drawHashSeed(): number {
  const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint32Array) => unknown } }).crypto;
  if (c?.getRandomValues !== undefined) {
    try {
      const word = new Uint32Array(1);
      c.getRandomValues(word);
      return word[0]!;
    } catch {
      // workerd refuses random values in a module's global scope, where a Worker builds
      // its registry: Math.random for now, and the engine draws again at its first key.
    }
  }
  hashSeeds.fallbacks++;
  return (Math.random() * 2 ** 32) >>> 0;
}

/** A trace table as {@link SlabEngine.checkTrace} decodes it from a snapshot. */
type Trace = { seed: readonly [number, number]; untilMs: number; entries: readonly number[] };

/** What an engine is built with: the policy's slab (its layout, clock and bounds), and the registry's. */
export interface EngineOptions extends Omit<Slab, "bucket"> {
  readonly maxKeys: number;
  readonly maxBytes: number;
  /** Longest key, in UTF-16 code units (for the smallest `maxBytes` that holds a few). */
  readonly maxKeyLength: number;
  /** At the bound: drop a key in use (leaving a trace) or refuse new keys. */
  readonly whenFull: "evict" | "refuse";
}

/**
 * The one slab engine of {@link KeyedLimiter}'s fast path, for every built-in policy: the
 * key-to-slot index, the slab of state doubles (it grows by doubling, never shrinks but on
 * `clear`), the free list threaded through it, the last-key cache, the incremental idle sweep
 * ({@link SWEEP_CHUNK} slots every {@link SWEEP_EVERY} calls), the bound (`maxKeys`, `maxBytes`)
 * and the trace table. A slot's content and decisions are its {@link Kernel}'s. One clock reading
 * per call, one high-water mark for the registry.
 *
 * At the bound idle keys go first; then (`whenFull: "evict"`) the key of {@link EVICT_SCAN} looked
 * at that is idle soonest goes, its trace kept under a seeded hash of its key, and a new key whose
 * entry still applies starts from the state it bounds (`restore`), never fresher; with `"refuse"`
 * the new key is refused. Pinned keys (waiters) never go. See docs/keyed.md#bounds. @internal
 */
export class SlabEngine extends KeyCounters {
  readonly layout: Kernel;
  readonly stride: number;
  /** The key-to-slot index (its own, seeded: see {@link KeyIndex}); it holds each slot's key. */
  readonly index: KeyIndex;
  /** The slot doubles (see {@link Kernel}). */
  state: Float64Array;
  /** Per slot: {@link PINNED}, {@link BLOCKED}. */
  flags: Uint8Array;
  /**
   * @internal Per slot: its key's length (at most `MAX_KEY_LENGTH_LIMIT`), so that dropping
   * a key gives its bytes back without reading its string (a cache miss at the bound).
   */
  private keyLengths: Uint16Array;
  /** `[seenMs]`: the latest clock reading seen, kept as a raw double (never boxed). */
  readonly seen = new Float64Array([Number.NEGATIVE_INFINITY]);
  /** The last key found and its slot: a hot key's repeated calls skip the Map. */
  lastKey: string | undefined;
  lastSlot = 0;
  private readonly clock: Clock;
  private readonly maxKeys: number;
  private readonly maxBytes: number;
  private readonly refuse: boolean;
  private clockBoundMs: number;
  private clockWhere: string;
  private windowMs: number;
  private slots: number;
  /** @internal Slots ever handed out: slots at or above it were never used. */
  private highWater = 0;
  private free = -1;
  private count = 0;
  /**
   * Slots with a flag (waiters, {@link PINNED}, or a block, {@link BLOCKED}): while 0, no
   * slot's flag needs reading (the fast paths test it first).
   */
  pinned = 0;
  /** Slots with pending waiters ({@link PINNED}): never swept nor evicted. */
  waitingSlots = 0;
  /** The time (clock ms) each blocked slot is blocked until. */
  private readonly blockedUntil = new Map<number, number>();
  /**
   * The block trace: what keeps an evicted blocked key blocked, `[untilMs, fingerprint]`
   * entries by seeded hash of the key (a second seeded hash is the fingerprint; two keys
   * blocked in one entry make it apply to any key there: conservative). Made at the first
   * blocked key pushed out; its bytes count from the first `block` on.
   */
  private blockTrace: Float64Array = EMPTY_TRACE;
  /** @internal Bytes of the block trace, counted from the first block on (0 before). */
  private blockTraceBytes = 0;
  /** @internal Entries of the block trace, a power of two. */
  private readonly blockTraceSlots: number;
  /** @internal The latest time in the block trace: at or after it, no entry applies. */
  private blockTraceUntil = Number.NEGATIVE_INFINITY;
  private cursor = 0;
  private countdown = SWEEP_EVERY;
  /** @internal Accounted bytes of the keys kept and of their logs (slots and table apart). */
  private keyBytesKept = 0;
  /**
   * The trace table: `traceWidth` numbers per entry (see {@link Kernel.traceValue}),
   * entries by seeded hash of a key.
   */
  trace: Float64Array = EMPTY_TRACE;
  private readonly traceWidth: number;
  /** @internal The table's bytes, accounted before it is made. */
  private readonly traceBytes: number;
  /** @internal One entry's worth, for the trace of a key being dropped. */
  private readonly traceScratch: Float64Array;
  private readonly traceMask: number;
  /**
   * @internal The 64-bit seed of the trace tables' hash: the index's first seed, kept when
   * the index reseeds (the traces' entries stay where their keys' hashes put them).
   */
  private traceK0: number;
  private traceK1: number;
  /**
   * @internal The hash keys were drawn from `Math.random` (crypto refused, as in workerd's
   * global scope): drawn again at the first key, from crypto if it then answers.
   */
  private weakSeeds: boolean;
  /** @internal The latest "busy until" in the table: at or after it, no entry applies. */
  private traceUntil = Number.NEGATIVE_INFINITY;
  /**
   * The soonest "idle at" among the keys the last full scan looked at (`Infinity` when all
   * were pinned): when a refused new key may try again.
   */
  soonestIdleMs = Number.POSITIVE_INFINITY;

  constructor(o: EngineOptions) {
    super();
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
    this.blockTraceSlots = Math.min(entries, MAX_BLOCK_TRACE_SLOTS);
    this.slots = Math.min(FIRST_SLOTS, o.maxKeys);
    const fallbacks = hashSeeds.fallbacks;
    this.index = new KeyIndex(this.slots, o.maxKeys, () => hashSeeds.next());
    this.traceK0 = this.index.k0;
    this.traceK1 = this.index.k1;
    this.weakSeeds = hashSeeds.fallbacks !== fallbacks;
    this.state = new Float64Array(this.slots * this.stride);
    this.flags = new Uint8Array(this.slots);
    this.keyLengths = new Uint16Array(this.slots);
    this.layout.grow(this.slots);
    this.layout.bind(this);
    // Room for a few keys: beyond what is left, a log merges its entries rather than grow.
    const floor =
      this.committed() +
      4 * (o.layout.keyExtraBytes + 2 * o.maxKeyLength + STRING_HEADER_BYTES + this.slotBytes()) +
      4 * 4 * 4; // and the index's table for them (4 bytes, up to 4 entries per slot)
    if (o.maxBytes < floor) {
      throw new RangeError(
        `KeyedLimiter: maxBytes must be at least ${floor} for this policy (room for four keys), got ${o.maxBytes}`,
      );
    }
  }

  /** Slot to key; `undefined` marks a free slot (the index's array). */
  get keys(): (string | undefined)[] {
    return this.index.keys;
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
    return (
      this.keyBytesKept +
      this.slots * this.slotBytes() +
      this.index.tableBytes +
      this.traceBytes +
      this.blockTraceBytes
    );
  }

  /** Accounted bytes now: keys, allocated slots, waits, logs and the trace tables once made. */
  get bytes(): number {
    const made = 8 * (this.trace.length + this.blockTrace.length);
    return this.committed() - this.traceBytes - this.blockTraceBytes + made;
  }

  get stats(): KeyedLimiterStats {
    return this.statsWith(this.slots, this.bytes);
  }

  /** Reads the clock once; a reading behind the latest one counts as the latest. */
  now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock("KeyedLimiter", t);
    return this.nowAt(t);
  }

  /**
   * An explicit time (`allowAt` and the other `…At` forms; a finite number, checked by the
   * caller): kept as the latest when later, as a clock reading is (see {@link now}).
   */
  nowAt(t: number): number {
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
    const slot = this.index.find(key);
    if (slot < 0) return -1;
    this.lastKey = key;
    this.lastSlot = slot;
    return slot;
  }

  /** The slot of `key` without sweeping or caching, or -1. */
  lookup(key: string): number {
    if (key === this.lastKey) return this.lastSlot;
    return this.index.find(key);
  }

  /**
   * Where a key without a slot stands: -1 when it starts fresh, else the offset in
   * {@link trace} of the entry it starts from ({@link Kernel.restore}).
   */
  traceOf(key: string, now: number): number {
    if (this.traceUntil <= now) return -1;
    return this.traceAt(this.traceHash(key, this.index.hash(key)), now);
  }

  /** @internal {@link traceOf} for a key whose trace hash is `th`. */
  private traceAt(th: number, now: number): number {
    if (this.traceUntil <= now) return -1;
    const o = (th & this.traceMask) * this.traceWidth;
    return this.layout.traceApplies(this.trace, o, now) ? o : -1;
  }

  /**
   * @internal The trace tables' hash of `key`, `h` its hash under the index's seed now: the
   * same number until the index reseeds (then hashed again under the traces' seed).
   */
  private traceHash(key: string, h: number): number {
    const index = this.index;
    return index.k0 === this.traceK0 && index.k1 === this.traceK1
      ? h
      : hashKey(key, this.traceK0, this.traceK1);
  }

  /**
   * A slot for a new key, its state written (fresh, or restored from its trace entry);
   * makes room first at the bound. Returns -1 when no room can
   * be made (`whenFull: "refuse"`, or every key pinned): nothing is kept.
   */
  insert(key: string, now: number, blockUntilMs = Number.NEGATIVE_INFINITY): number {
    if (this.weakSeeds) this.seedAgain();
    // A key the block trace keeps blocked (or `block` is blocking) gets its block with its
    // slot: its bytes count from the start.
    const h = this.index.hash(key);
    const th = this.traceHash(key, h);
    const traced = this.blockTraceOf(key, now, th);
    const blockedUntil = traced > blockUntilMs ? traced : blockUntilMs;
    const need =
      slabKeyBytes(key) + this.layout.keyExtraBytes + (blockedUntil > now ? BLOCK_BYTES : 0);
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
    this.index.add(key, slot, h);
    this.keyLengths[slot] = key.length;
    this.count++;
    this.created++;
    this.keyBytesKept += need;
    const o = this.traceAt(th, now);
    const s = slot * this.stride;
    this.flags[slot] = 0;
    if (o < 0) this.layout.init(this.state, s, slot, now);
    else {
      this.restored++;
      this.layout.restore(this.state, s, slot, this.trace, o, now);
    }
    if (blockedUntil > now) this.setBlock(slot, blockedUntil, true);
    return slot;
  }

  /**
   * True when {@link insert} of a new `key` would be refused now (for `peek`, which keeps
   * nothing): the registry is full and, with `"refuse"`, none of the keys a scan would look
   * at is idle (or, with `"evict"`, every key waits). Changes nothing.
   */
  wouldRefuse(key: string, now: number): boolean {
    if (this.hasRoom(slabKeyBytes(key) + this.layout.keyExtraBytes)) return false;
    if (!this.refuse) return this.waitingSlots >= this.count;
    let slot = this.cursor;
    let seen = 0;
    for (let visited = 0; visited < this.highWater && seen < EVICT_SCAN; visited++) {
      if (this.keys[slot] !== undefined && (this.flags[slot]! & PINNED) === 0) {
        seen++;
        if (this.slotIdle(slot, now)) return false;
        const idleAt = this.slotIdleAtMs(slot, now);
        if (seen === 1 || idleAt < this.soonestIdleMs) this.soonestIdleMs = idleAt;
      }
      slot = slot + 1 < this.highWater ? slot + 1 : 0;
    }
    return true;
  }

  /** Pins a slot while it has waiters: never swept nor evicted. */
  pin(slot: number): void {
    if ((this.flags[slot]! & PINNED) !== 0) return;
    if (this.flags[slot] === 0) this.pinned++;
    this.flags[slot]! |= PINNED;
    this.waitingSlots++;
  }

  /** Unpins a slot; drops it when idle. */
  unpin(slot: number): void {
    if ((this.flags[slot]! & PINNED) === 0) return;
    this.flags[slot]! &= ~PINNED;
    this.waitingSlots--;
    if (this.flags[slot] === 0) this.pinned--;
    if (this.slotIdle(slot, this.seen[0]!)) {
      this.drop(slot);
      this.evictedIdle++;
    }
  }

  /**
   * Blocks `key` until `untilMs` (clock ms; a later block extends, an earlier one never
   * shortens): its slot (made first, restored from its trace, if it has none) is flagged
   * {@link BLOCKED} and counts toward the bounds like any key, plus {@link BLOCK_BYTES}.
   * When no slot can be made (the registry refuses, or every key waits) the block goes to
   * the block trace, as if the key had been pushed out blocked: it is kept all the same.
   */
  block(key: string, untilMs: number, now: number): void {
    if (this.blockTraceBytes === 0) {
      // The block trace's bytes count from the first block on: room is made for it now.
      this.blockTraceBytes = this.blockTraceSlots * BLOCK_TRACE_WIDTH * 8;
      if (this.committed() > this.maxBytes) this.shed(-1, 0);
    }
    const slot = this.lookup(key);
    if (slot < 0) {
      // A slot made with its block (its bytes made room for with the key's), or, when none
      // can be made, the block trace.
      if (this.insert(key, now, untilMs) < 0) this.traceBlock(key, untilMs, now);
      return;
    }
    const flags = this.flags[slot]!; // `reserve` never drops this slot
    // A key with waiters cannot go: it is then over by one block.
    if ((flags & BLOCKED) !== 0 || this.reserve(BLOCK_BYTES, slot) || (flags & PINNED) !== 0) {
      this.setBlock(slot, untilMs, false);
      return;
    }
    // No room for the block beside the key: the key goes, its state and block in the traces.
    this.traceBlock(key, untilMs, now);
    this.evict(slot, now);
  }

  /** Lifts the block of `key`, in its slot and in the block trace; false when it had none. */
  unblock(key: string): boolean {
    let had = this.clearBlockTrace(key);
    const slot = this.lookup(key);
    if (slot >= 0 && (this.flags[slot]! & BLOCKED) !== 0) {
      this.clearBlock(slot);
      had = true;
    }
    return had;
  }

  /**
   * Milliseconds from `now` until the block of `slot` ends, 0 when it is not blocked (a
   * block whose time has come is lifted here).
   */
  blockedMs(slot: number, now: number): number {
    if ((this.flags[slot]! & BLOCKED) === 0) return 0;
    const until = this.blockedUntil.get(slot)!;
    if (until > now) return until - now;
    this.clearBlock(slot);
    return 0;
  }

  /** Milliseconds from `now` until the block the trace keeps for `key` (without a slot) ends; 0 if none. */
  tracedBlockMs(key: string, now: number): number {
    const until = this.blockTraceOf(key, now);
    return until > now ? until - now : 0;
  }

  /**
   * @internal Sets the block of `slot` to at least `untilMs`; `accounted` when its
   * {@link BLOCK_BYTES} are counted already (a slot made with its block).
   */
  private setBlock(slot: number, untilMs: number, accounted: boolean): void {
    if ((this.flags[slot]! & BLOCKED) !== 0) {
      if (untilMs > this.blockedUntil.get(slot)!) this.blockedUntil.set(slot, untilMs);
      return;
    }
    if (this.flags[slot] === 0) this.pinned++;
    this.flags[slot]! |= BLOCKED;
    this.blockedUntil.set(slot, untilMs);
    if (!accounted) this.keyBytesKept += BLOCK_BYTES;
  }

  /** @internal Lifts the block of a blocked slot. */
  private clearBlock(slot: number): void {
    this.blockedUntil.delete(slot);
    this.keyBytesKept -= BLOCK_BYTES;
    this.flags[slot]! &= ~BLOCKED;
    if (this.flags[slot] === 0) this.pinned--;
  }

  /** @internal True when the slot is idle (fresh) and not blocked. */
  private slotIdle(slot: number, now: number): boolean {
    return (
      this.layout.isIdle(this.state, slot * this.stride, slot, now) &&
      this.blockedMs(slot, now) === 0
    );
  }

  /** @internal When the slot is idle and unblocked with no further traffic. */
  private slotIdleAtMs(slot: number, now: number): number {
    const at = this.layout.idleAtMs(this.state, slot * this.stride, slot, now);
    if ((this.flags[slot]! & BLOCKED) === 0) return at;
    const until = this.blockedUntil.get(slot)!;
    return until > at ? until : at;
  }

  /** @internal The block trace's time for `key`: when its block ends, `-Infinity` for none. */
  private blockTraceOf(key: string, now: number, th?: number): number {
    if (this.blockTraceUntil <= now) return Number.NEGATIVE_INFINITY;
    const o = this.blockTraceAt(key, th);
    const t = this.blockTrace;
    if (!(t[o]! > now)) return Number.NEGATIVE_INFINITY;
    const fp = t[o + 1]!;
    return fp === ANY_KEY || fp === this.fingerprint(key) ? t[o]! : Number.NEGATIVE_INFINITY;
  }

  /** @internal Keeps the block of a key pushed out (or never given a slot) in the block trace. */
  private traceBlock(key: string, untilMs: number, now: number): void {
    if (this.blockTrace.length === 0) {
      this.blockTraceBytes = this.blockTraceSlots * BLOCK_TRACE_WIDTH * 8;
      this.blockTrace = new Float64Array(this.blockTraceSlots * BLOCK_TRACE_WIDTH).fill(
        Number.NEGATIVE_INFINITY,
      );
    }
    const t = this.blockTrace;
    const o = this.blockTraceAt(key);
    const fp = this.fingerprint(key);
    if (!(t[o]! > now)) {
      t[o] = untilMs;
      t[o + 1] = fp;
    } else {
      // Two keys in one entry: it keeps the later time and applies to both (to any key).
      if (t[o + 1] !== fp) t[o + 1] = ANY_KEY;
      if (untilMs > t[o]!) t[o] = untilMs;
    }
    if (t[o]! > this.blockTraceUntil) this.blockTraceUntil = t[o]!;
  }

  /**
   * @internal Clears the block trace's entry of `key`: its own, or one it shares with
   * another key (lifting that key's block too: an unblock is the application's word, and
   * keeping the entry would keep this key blocked). True when there was one.
   */
  private clearBlockTrace(key: string): boolean {
    if (this.blockTrace.length === 0) return false;
    const now = this.seen[0]!;
    if (!(this.blockTraceOf(key, now) > now)) return false;
    const o = this.blockTraceAt(key);
    this.blockTrace[o] = Number.NEGATIVE_INFINITY;
    this.blockTrace[o + 1] = Number.NEGATIVE_INFINITY;
    return true;
  }

  /** @internal Offset of `key`'s entry in the block trace. */
  private blockTraceAt(key: string, th = hashKey(key, this.traceK0, this.traceK1)): number {
    return (th & (this.blockTraceSlots - 1)) * BLOCK_TRACE_WIDTH;
  }

  /** @internal A second seeded hash of `key`, told apart from the entry's own: a uint32. */
  private fingerprint(key: string): number {
    let h = 0x9e3779b9 ^ this.traceK1;
    for (let i = key.length - 1; i >= 0; i--) {
      h = Math.imul(h ^ key.charCodeAt(i), 0x85ebca6b);
      h ^= h >>> 13;
    }
    return h >>> 0;
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
    const th = this.traceHash(key, this.index.hashes[victim]!);
    const o = (th & this.traceMask) * this.traceWidth;
    this.layout.traceValue(this.state, victim * this.stride, victim, now, this.traceScratch, 0);
    this.layout.traceCombine(this.trace, o, this.traceScratch, 0, now);
    const expires = this.layout.traceExpiresMs(this.trace, o);
    if (expires > this.traceUntil) this.traceUntil = expires;
    const blockedMs = this.blockedMs(victim, now);
    if (blockedMs > 0) this.traceBlock(key, this.blockedUntil.get(victim)!, now);
    this.drop(victim);
    this.evictedLossy++;
  }

  /**
   * `reconfigure`: carries every kept key's state over to the numbers of `next` (the slab of the
   * reconfigured policy, of the same kind) at `now`, the trace table's entries too (so a key pushed
   * out comes back as it would be had it been kept, never fresher), then takes its numbers and
   * window bound; keys created later start from them. `skip(slot)` is true for a slot whose state
   * another owner carries over (a bucket key with waiters). O(slots + trace entries).
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
    this.unblock(key);
    const slot = this.index.find(key);
    if (slot < 0) return;
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
    if (this.blockTrace.length > 0) this.blockTrace.fill(Number.NEGATIVE_INFINITY);
    this.blockTraceUntil = Number.NEGATIVE_INFINITY;
    for (const slot of [...this.blockedUntil.keys()]) this.clearBlock(slot);
    if (this.waitingSlots === 0) {
      for (let slot = 0; slot < this.highWater; slot++) {
        if (this.keys[slot] !== undefined) this.layout.release(slot, this);
      }
      this.slots = Math.min(FIRST_SLOTS, this.maxKeys);
      this.index.clear(this.slots);
      // The traces are empty: they follow the index's seed again.
      this.traceK0 = this.index.k0;
      this.traceK1 = this.index.k1;
      this.state = new Float64Array(this.slots * this.stride);
      this.flags = new Uint8Array(this.slots);
      this.keyLengths = new Uint16Array(this.slots);
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

  /**
   * @internal Draws the hash keys again while nothing hashed by them is kept (no key, no
   * trace): the first key of a registry built where crypto refused random values.
   */
  private seedAgain(): void {
    if (this.index.size !== 0 || this.trace.length !== 0 || this.blockTrace.length !== 0) {
      this.weakSeeds = false; // keys hashed by them are kept: they stay
      return;
    }
    const fallbacks = hashSeeds.fallbacks;
    this.index.reseed();
    this.traceK0 = this.index.k0;
    this.traceK1 = this.index.k1;
    this.weakSeeds = hashSeeds.fallbacks !== fallbacks;
  }

  /**
   * The trace table for a snapshot (`KeyedLimiter.snapshotAll`): its hash seed (entries are
   * placed by it), when its last entry stops applying, and its numbers; `undefined` when no
   * entry applies at `now`.
   */
  saveTrace(now: number): RegistrySnapshot["trace"] {
    if (this.traceUntil <= now || this.trace.length === 0) return undefined;
    const seed: [number, number] = [this.traceK0, this.traceK1];
    return {
      seed,
      untilMs: encodeNumber(this.traceUntil),
      entries: encodeState(Array.from(this.trace)),
    };
  }

  /**
   * A snapshot's trace table, decoded and checked against this registry's: one of as many entries,
   * into a registry that has kept no trace of its own (its seed then becomes the saved one).
   * @throws {TypeError} For one of another size or shape. {RangeError} When this registry has
   *   traces of its own.
   */
  checkTrace(where: string, t: NonNullable<RegistrySnapshot["trace"]>): Trace {
    const untilMs = decodeNumber(where, t.untilMs);
    const entries = Array.isArray(t.entries)
      ? Array.from(t.entries as unknown[], (v) => decodeNumber(where, v))
      : [];
    const n = this.traceBytes / 8;
    const seed = t.seed;
    const word = (x: unknown) => typeof x === "number" && Number.isInteger(x);
    if (!Array.isArray(seed) || seed.length !== 2 || !word(seed[0]) || !word(seed[1])) {
      throw new TypeError(
        `${where}: the snapshot's trace table seed must be two integers, got ${describe(seed)}`,
      );
    }
    if (entries.length !== n) {
      throw new TypeError(
        `${where}: the snapshot's trace table has ${entries.length} numbers, this registry's ${n}: restore into a registry with the same maxKeys and maxBytes`,
      );
    }
    if (this.trace.length !== 0 || this.blockTrace.length !== 0) {
      throw new RangeError(
        `${where}: this registry has pushed out or blocked keys already, so it cannot take the snapshot's trace table: restore into a new registry`,
      );
    }
    return { seed, untilMs, entries };
  }

  /** Takes a trace table {@link checkTrace} accepted. */
  loadTrace(t: Trace): void {
    this.trace = Float64Array.from(t.entries);
    this.traceK0 = t.seed[0] >>> 0;
    this.traceK1 = t.seed[1] >>> 0;
    this.traceUntil = t.untilMs;
  }

  /** Calls `visit` with every kept key and its slot, in slot order. */
  forEachKey(visit: (key: string, slot: number) => void): void {
    for (let slot = 0; slot < this.highWater; slot++) {
      const key = this.keys[slot];
      if (key !== undefined) visit(key, slot);
    }
  }

  /** Drops every idle key now (or at `now`, a time from {@link nowAt}); returns how many. */
  sweep(now = this.now()): number {
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
      this.slotIdle(slot, now)
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
   * @internal Makes room for a key of `need` bytes by {@link scan}s; while still full, pushes out
   * the key a scan picks (`"evict"`, its trace kept) or gives up (`"refuse"`); false without room.
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
      if (this.slotIdle(slot, now)) {
        this.drop(slot);
        this.evictedIdle++;
        continue;
      }
      const idleAt = this.slotIdleAtMs(slot, now);
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
    return this.committed() + need + this.growthBytes(this.slots + 1) <= this.maxBytes;
  }

  /** @internal Bytes that growing to `slots` slots adds: theirs and the index table's growth. */
  private growthBytes(slots: number): number {
    return (
      (slots - this.slots) * this.slotBytes() + 4 * tableEntriesFor(slots) - this.index.tableBytes
    );
  }

  private drop(slot: number): void {
    const key = this.keys[slot];
    this.index.remove(slot);
    this.keyBytesKept -=
      2 * this.keyLengths[slot]! + STRING_HEADER_BYTES + this.layout.keyExtraBytes;
    this.layout.release(slot, this);
    if ((this.flags[slot]! & BLOCKED) !== 0) this.clearBlock(slot);
    this.flags[slot] = 0;
    this.state[slot * this.stride] = this.free;
    this.free = slot;
    this.count--;
    if (this.lastKey === key) this.lastKey = undefined;
  }

  /**
   * @internal Bytes one allocated slot costs: its doubles, its flag, its key's length, its
   * key pointer and its key's hash (the index's table is counted apart: `tableBytes`).
   */
  private slotBytes(): number {
    return this.stride * 8 + 1 + 2 + 8 + 4;
  }

  /** @internal Grows the slab by doubling, within `maxKeys` and what `maxBytes` leaves after `need`. */
  private grow(need: number): void {
    const budget = this.maxBytes - this.committed() - need;
    const affordable = Math.floor(budget / this.slotBytes());
    let slots = Math.max(
      this.slots + 1,
      Math.min(this.slots * 2, this.maxKeys, this.slots + affordable),
    );
    // The index's table doubles with the slots: fewer of them where it would not fit.
    while (slots > this.slots + 1 && this.growthBytes(slots) > budget) {
      slots = this.slots + Math.floor((slots - this.slots) / 2);
    }
    const state = new Float64Array(slots * this.stride);
    state.set(this.state);
    this.state = state;
    const flags = new Uint8Array(slots);
    flags.set(this.flags);
    this.flags = flags;
    const keyLengths = new Uint16Array(slots);
    keyLengths.set(this.keyLengths);
    this.keyLengths = keyLengths;
    this.index.resize(slots);
    this.slots = slots;
    this.layout.grow(slots);
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
