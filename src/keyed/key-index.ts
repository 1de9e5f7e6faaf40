/**
 * Probes a lookup or an insertion makes from a key's home entry before it turns to the
 * overflow map. At the table's load (at most one half) an honest key needs more only about
 * once in 10^11 insertions; keys chosen to collide (by someone who knows the seed) find
 * the overflow map after this many, and start a reseed (see {@link KeyIndex}).
 */
export const MAX_PROBES = 128;
/** Fewest table entries. */
const MIN_TABLE = 32;
/** Bits of a table entry that hold its distance from its home entry (below {@link MAX_PROBES}). */
const DISTANCE_BITS = 7;
/** Most bits of a slot number for which an entry has room for its distance and a 2-bit tag. */
const MAX_SLOT_BITS_WITH_DISTANCE = 32 - DISTANCE_BITS - 2;

/**
 * HalfSipHash-1-3 (Aumasson and Bernstein's SipHash on 32-bit words, as Linux's `hsiphash`) of
 * `key`'s UTF-16 code units, two to a word, under the 64-bit key `k0, k1`: a keyed pseudo-random
 * function, so that without the key no one can choose strings that collide (unlike FNV or V8's own
 * hash of array-index strings, which is their value). The last word holds the length (mod 2^16) and
 * an odd last unit: the encoding is injective. Returns an int32.
 */
export function hashKey(key: string, k0: number, k1: number): number {
  let v0 = k0 | 0;
  let v1 = k1 | 0;
  let v2 = 0x6c796765 ^ v0;
  let v3 = 0x74656462 ^ v1;
  const n = key.length;
  const end = n & ~1;
  for (let i = 0; i < end; i += 2) {
    const m = key.charCodeAt(i) | (key.charCodeAt(i + 1) << 16);
    v3 ^= m;
    v0 = (v0 + v1) | 0;
    v1 = (v1 << 5) | (v1 >>> 27);
    v1 ^= v0;
    v0 = (v0 << 16) | (v0 >>> 16);
    v2 = (v2 + v3) | 0;
    v3 = (v3 << 8) | (v3 >>> 24);
    v3 ^= v2;
    v0 = (v0 + v3) | 0;
    v3 = (v3 << 7) | (v3 >>> 25);
    v3 ^= v0;
    v2 = (v2 + v1) | 0;
    v1 = (v1 << 13) | (v1 >>> 19);
    v1 ^= v2;
    v2 = (v2 << 16) | (v2 >>> 16);
    v0 ^= m;
  }
  // The last word, then three finalization rounds: one round absorbs it, as the loop's do.
  const m = (n << 16) | (end === n ? 0 : key.charCodeAt(end));
  v3 ^= m;
  for (let r = 0; r < 4; r++) {
    v0 = (v0 + v1) | 0;
    v1 = (v1 << 5) | (v1 >>> 27);
    v1 ^= v0;
    v0 = (v0 << 16) | (v0 >>> 16);
    v2 = (v2 + v3) | 0;
    v3 = (v3 << 8) | (v3 >>> 24);
    v3 ^= v2;
    v0 = (v0 + v3) | 0;
    v3 = (v3 << 7) | (v3 >>> 25);
    v3 ^= v0;
    v2 = (v2 + v1) | 0;
    v1 = (v1 << 13) | (v1 >>> 19);
    v1 ^= v2;
    v2 = (v2 << 16) | (v2 >>> 16);
    if (r === 0) {
      v0 ^= m;
      v2 ^= 0xff;
    }
  }
  return v1 ^ v3;
}

/** Table entries for `slots` slots: the power of two at or above twice as many (load ≤ 1/2). */
export function tableEntriesFor(slots: number): number {
  let n = MIN_TABLE;
  while (n < 2 * slots) n *= 2;
  return n;
}

/**
 * The slab engine's key-to-slot index: linear probing over one `Int32Array` at most half
 * full, beside each slot's key (kept once) and hash; no object per key. An entry is 0 for
 * empty, else `slot + 1`, its distance from home (below 2^23 slots), and a tag of the hash.
 * Deletion shifts the run back. Bytes: 12 per slot (pointer, hash), 4 per table entry.
 *
 * Flooding: the hash ({@link hashKey}) is keyed with 64 bits from `seeds` (random per
 * registry), so without them keys collide no more than random ones. Someone who knows them
 * can pile keys on one run: past {@link MAX_PROBES} entries a key goes to an overflow `Map`
 * and the index rebuilds under new bits (at most once per `size / 2` insertions: O(1)
 * amortized). A lookup costs at most {@link MAX_PROBES} table reads and one `Map.get`. @internal
 */
export class KeyIndex {
  /** Slot to key; `undefined` marks a free slot. */
  keys: (string | undefined)[];
  /** Slot to its key's hash under the current seed. */
  hashes: Int32Array;
  /** The open-addressing table: `(tag & tagMask) | (slot + 1)`, 0 for empty. */
  private table: Int32Array;
  private mask: number;
  /** The bits of an entry that hold `slot + 1`. */
  private readonly slotMask: number;
  /** Bits below an entry's distance (the slot's); `distanceMask` 0 when entries keep none. */
  private readonly slotBits: number;
  private readonly distanceMask: number;
  private readonly tagMask: number;
  /** The current 64-bit seed. */
  k0: number;
  k1: number;
  /** Keys that found no free entry within {@link MAX_PROBES}; undefined while none did. */
  private overflow: Map<string, number> | undefined;
  /** Insertions since the last reseed. */
  private added = 0;
  /** Keys indexed. */
  size = 0;
  /** Rebuilds under a new seed so far. */
  reseeds = 0;
  /** The last key a lookup missed, and its hash: an insertion of it does not hash again. */
  private missKey: string | undefined;
  private missHash = 0;
  private readonly seeds: () => number;

  /** An index for up to `maxSlots` slots (fixes the tag's width), `slots` allocated now. */
  constructor(slots: number, maxSlots: number, seeds: () => number) {
    this.seeds = seeds;
    this.k0 = seeds() | 0;
    this.k1 = seeds() | 0;
    const slotBits = 32 - Math.clz32(maxSlots);
    this.slotBits = slotBits;
    this.slotMask = (1 << slotBits) - 1;
    const distances = slotBits <= MAX_SLOT_BITS_WITH_DISTANCE;
    this.distanceMask = distances ? ((1 << DISTANCE_BITS) - 1) << slotBits : 0;
    this.tagMask = distances ? ~((1 << (slotBits + DISTANCE_BITS)) - 1) : ~this.slotMask;
    this.keys = new Array<string | undefined>(slots).fill(undefined);
    this.hashes = new Int32Array(slots);
    const entries = tableEntriesFor(slots);
    this.table = new Int32Array(entries);
    this.mask = entries - 1;
  }

  /** Bytes of the table. */
  get tableBytes(): number {
    return this.table.length * 4;
  }

  /** The hash of `key` under the current seed. */
  hash(key: string): number {
    return key === this.missKey ? this.missHash : hashKey(key, this.k0, this.k1);
  }

  /** The slot of `key`, or -1. */
  find(key: string): number {
    const h = hashKey(key, this.k0, this.k1);
    const tag = Math.imul(h, 0x9e3779b1) & this.tagMask;

    const table = this.table;
    const mask = this.mask;
    const slotMask = this.slotMask;
    const tagMask = this.tagMask;
    let i = h & mask;
    for (let p = 0; p < MAX_PROBES; p++) {
      const e = table[i]!;
      if (e === 0) break;
      if ((e & tagMask) === tag) {
        const slot = (e & slotMask) - 1;
        if (this.keys[slot] === key) return slot;
      }
      i = (i + 1) & mask;
    }
    if (this.overflow !== undefined) {
      const slot = this.overflow.get(key);
      if (slot !== undefined) return slot;
    }
    this.missKey = key;
    this.missHash = h;
    return -1;
  }

  /** Indexes `key` (not indexed) at `slot` (free), `h` its {@link hash}. */
  add(key: string, slot: number, h: number): void {
    this.keys[slot] = key;
    this.hashes[slot] = h;
    this.size++;
    this.added++;
    if (this.missKey === key) this.missKey = undefined;
    if (this.place(slot, h)) return;
    (this.overflow ??= new Map()).set(key, slot);
    // Keys piled on one run: rebuild under a new seed, at most once per size / 2 insertions.
    if (this.added >= this.size >> 1) this.reseed();
  }

  /** Forgets the key of `slot` (indexed). */
  remove(slot: number): void {
    const key = this.keys[slot]!;
    this.keys[slot] = undefined;
    this.size--;
    if (this.missKey === key) this.missKey = undefined;
    if (this.overflow !== undefined && this.overflow.get(key) === slot) {
      this.overflow.delete(key);
      if (this.overflow.size === 0) this.overflow = undefined;
      return;
    }
    const table = this.table;
    const mask = this.mask;
    const slotMask = this.slotMask;
    const hashes = this.hashes;
    const distanceMask = this.distanceMask;
    const slotBits = this.slotBits;
    let i = hashes[slot]! & mask;
    while ((table[i]! & slotMask) !== slot + 1) i = (i + 1) & mask;
    // Backward shift: each later entry of the run moves into the hole unless its home lies
    // after the hole (cyclically), where a lookup for it would not pass the hole.
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const e = table[j]!;
      if (e === 0) break;
      const home =
        distanceMask === 0
          ? hashes[(e & slotMask) - 1]! & mask
          : (j - ((e & distanceMask) >>> slotBits)) & mask;
      if (j > i ? home <= i || home > j : home <= i && home > j) {
        table[i] = (e & ~distanceMask) | ((((i - home) & mask) << slotBits) & distanceMask);
        i = j;
      }
    }
    table[i] = 0;
  }

  /** The engine has `slots` slots now (more, or fewer after a `clear` with every key gone). */
  resize(slots: number): void {
    const keys = new Array<string | undefined>(slots).fill(undefined);
    const hashes = new Int32Array(slots);
    const kept = Math.min(slots, this.keys.length);
    for (let i = 0; i < kept; i++) keys[i] = this.keys[i];
    hashes.set(this.hashes.subarray(0, kept));
    this.keys = keys;
    this.hashes = hashes;
    this.rebuild(tableEntriesFor(slots), false);
  }

  /** Forgets every key, with `slots` slots. */
  clear(slots: number): void {
    this.keys = [];
    this.size = 0;
    this.resize(slots);
  }

  /** Rebuilds under a new seed (every key hashed again). */
  reseed(): void {
    this.k0 = this.seeds() | 0;
    this.k1 = this.seeds() | 0;
    this.reseeds++;
    this.rebuild(this.table.length, true);
  }

  /** The longest probe sequence of any indexed key, and the keys in the overflow map (tests, benches). */
  probeStats(): { longest: number; overflow: number } {
    let longest = 0;
    const table = this.table;
    for (let i = 0; i < table.length; i++) {
      const e = table[i]!;
      if (e === 0) continue;
      const home = this.hashes[(e & this.slotMask) - 1]! & this.mask;
      const d = ((i - home) & this.mask) + 1;
      if (d > longest) longest = d;
    }
    return { longest, overflow: this.overflow?.size ?? 0 };
  }

  /** @internal Puts `slot` in the table; false when no free entry is within {@link MAX_PROBES}. */
  private place(slot: number, h: number): boolean {
    const table = this.table;
    const mask = this.mask;
    let i = h & mask;
    for (let p = 0; p < MAX_PROBES; p++) {
      if (table[i] === 0) {
        table[i] =
          (Math.imul(h, 0x9e3779b1) & this.tagMask) |
          ((p << this.slotBits) & this.distanceMask) |
          (slot + 1);
        return true;
      }
      i = (i + 1) & mask;
    }
    return false;
  }

  /** @internal A table of `entries` with every key placed again (hashed again on `rehash`). */
  private rebuild(entries: number, rehash: boolean): void {
    this.table = new Int32Array(entries);
    this.mask = entries - 1;
    this.overflow = undefined;
    this.added = 0;
    this.missKey = undefined;
    const keys = this.keys;
    for (let slot = 0; slot < keys.length; slot++) {
      const key = keys[slot];
      if (key === undefined) continue;
      const h = rehash ? hashKey(key, this.k0, this.k1) : this.hashes[slot]!;
      this.hashes[slot] = h;
      if (!this.place(slot, h)) (this.overflow ??= new Map()).set(key, slot);
    }
  }
}
