import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { SlabEngine } from "../../src/keyed/engine.js";
import { hashKey, KeyIndex, MAX_PROBES } from "../../src/keyed/key-index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";

/** A seed sequence of its own (the index draws two numbers per seed). */
function seedsFrom(start: number): () => number {
  let state = start >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The index with a slot allocator and a `Map` beside it, checked against each other. */
class Model {
  readonly index: KeyIndex;
  readonly map = new Map<string, number>();
  private free: number[] = [];
  private slots: number;

  constructor(
    slots: number,
    readonly maxSlots: number,
    seeds: () => number,
  ) {
    this.slots = slots;
    this.index = new KeyIndex(slots, maxSlots, seeds);
    for (let s = slots - 1; s >= 0; s--) this.free.push(s);
  }

  insert(key: string): void {
    if (this.map.has(key)) return;
    expect(this.index.find(key), `find before insert of ${key}`).toBe(-1);
    if (this.free.length === 0) {
      if (this.slots >= this.maxSlots) return;
      const next = Math.min(this.maxSlots, 2 * this.slots);
      this.index.resize(next);
      for (let s = next - 1; s >= this.slots; s--) this.free.push(s);
      this.slots = next;
    }
    const slot = this.free.pop()!;
    this.index.add(key, slot, this.index.hash(key));
    this.map.set(key, slot);
  }

  remove(key: string): void {
    const slot = this.map.get(key);
    if (slot === undefined) return;
    this.index.remove(slot);
    this.map.delete(key);
    this.free.push(slot);
  }

  check(probe: readonly string[]): void {
    for (const [key, slot] of this.map) {
      expect(this.index.find(key), `find ${key}`).toBe(slot);
      expect(this.index.keys[slot]).toBe(key);
    }
    for (const key of probe) {
      if (!this.map.has(key)) expect(this.index.find(key), `find absent ${key}`).toBe(-1);
    }
    expect(this.index.size).toBe(this.map.size);
    expect(this.index.probeStats().longest).toBeLessThanOrEqual(MAX_PROBES);
  }
}

/** `n` keys whose home entry is `home` in a table of `entries`, under the seed `k0, k1`. */
function collidingKeys(n: number, entries: number, k0: number, k1: number, home = 0): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < n; i++) {
    const key = `flood-${i}`;
    if ((hashKey(key, k0, k1) & (entries - 1)) === home) keys.push(key);
  }
  return keys;
}

const keyArb = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer({ min: 0, max: 300 }).map((i) => `k${i}`),
  fc.integer({ min: 0, max: 99 }).map(String),
);
const opArb = fc.oneof(
  keyArb.map((key) => ({ op: "insert" as const, key })),
  keyArb.map((key) => ({ op: "remove" as const, key })),
);

describe("KeyIndex", () => {
  test.each([
    { name: "distances in the entries", maxSlots: 512 },
    { name: "no room for distances (maxSlots 2^28)", maxSlots: 2 ** 28 },
  ])("insert, remove, lookup and grow agree with a Map ($name)", ({ maxSlots }) => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 400 }), fc.nat(), (ops, seed) => {
        const model = new Model(4, maxSlots, seedsFrom(seed));
        for (const { op, key } of ops) {
          if (op === "insert") model.insert(key);
          else model.remove(key);
        }
        model.check(ops.map((o) => o.key));
      }),
      { numRuns: 150 },
    );
  });

  test("keys of one home under a known seed go to the overflow map, and the index reseeds", () => {
    const seeds = seedsFrom(7);
    const model = new Model(1024, 1024, seeds);
    const { k0, k1 } = model.index;
    // 2048 table entries; 300 keys with one home entry: more than MAX_PROBES in one run.
    const flood = collidingKeys(300, 2048, k0, k1);
    for (const key of flood) model.insert(key);
    model.check(flood);
    expect(model.index.reseeds).toBeGreaterThanOrEqual(1);
    // Under the new seed the same keys spread like any others.
    expect(model.index.probeStats()).toMatchObject({ overflow: 0 });
    expect(model.index.probeStats().longest).toBeLessThan(32);
    for (const key of flood.slice(0, 150)) model.remove(key);
    model.check(flood);
  });

  test("without a reseed allowed yet, a flooded run costs at most MAX_PROBES reads and a Map.get", () => {
    const model = new Model(1024, 1024, seedsFrom(11));
    for (let i = 0; i < 700; i++) model.insert(`honest-${i}`);
    const reseedsBefore = model.index.reseeds;
    const { k0, k1 } = model.index;
    // 700 keys inserted since the last reseed, more than size / 2: a reseed is allowed once;
    // keys chosen against the new seed then pile up until size / 2 more arrive.
    const first = collidingKeys(150, 2048, k0, k1, 5);
    for (const key of first) model.insert(key);
    expect(model.index.reseeds).toBe(reseedsBefore + 1);
    const again = collidingKeys(150, 2048, model.index.k0, model.index.k1, 9);
    for (const key of again) model.insert(key);
    expect(model.index.reseeds).toBe(reseedsBefore + 1);
    const stats = model.index.probeStats();
    expect(stats.longest).toBeLessThanOrEqual(MAX_PROBES);
    expect(stats.overflow).toBeGreaterThan(0);
    model.check([...first, ...again, "absent"]);
  });

  test("hashKey tells apart strings that differ only in length or in an odd last unit", () => {
    const seen = new Set<number>();
    for (const key of ["", "\0", "\0\0", "a", "a\0", "ab", "ab\0", "\0a"]) {
      seen.add(hashKey(key, 1, 2));
    }
    expect(seen.size).toBe(8);
  });

  test("decimal strings a power of two apart spread like others", () => {
    // Strings "0", "8192", "16384", ...: a hash that read them as numbers would put them all
    // on one home entry.
    const model = new Model(1 << 12, 1 << 12, seedsFrom(3));
    const keys: string[] = [];
    for (let i = 0; i < 2000; i++) keys.push(String(i * 8192));
    for (const key of keys) model.insert(key);
    expect(model.index.probeStats().longest).toBeLessThan(32);
    expect(model.index.reseeds).toBe(0);
    model.check(keys);
  });
});

describe("the slab engine on its index", () => {
  test("a key pushed out after the index reseeds still finds its trace: never fresher", () => {
    let t = 0;
    const clock = () => t;
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }), {
      maxKeys: 512,
      sweepIntervalMs: Number.POSITIVE_INFINITY,
    });
    const engine = (keyed as unknown as { engine: SlabEngine }).engine;
    for (let i = 0; i < 5; i++) keyed.allow("victim");
    expect(keyed.allow("victim")).toBe(false);
    // The registry full of keys in use (each spends its whole bucket later than the victim),
    // then keys piled on one home entry of the index under its seed (1024 entries at 512
    // slots): the first pushes the victim out (idle soonest), the 129th forces a reseed.
    for (let i = 0; i < 511; i++) {
      t += 1;
      keyed.allow(`filler-${i}`, 5);
    }
    const index = engine.index;
    const flood = collidingKeys(200, 1024, index.k0, index.k1, 3);
    const before = index.reseeds;
    for (const key of flood) {
      t += 1;
      keyed.allow(key, 5);
    }
    expect(index.reseeds).toBeGreaterThan(before);
    expect(keyed.stats.evictedLossy).toBeGreaterThan(0);
    expect(engine.lookup("victim")).toBe(-1);
    // 712 ms later the victim has refilled 0.7 units: still denied, as had it been kept.
    expect(keyed.allow("victim")).toBe(false);
    expect(keyed.stats.restored).toBeGreaterThan(0);
  });

  test("a flood of keys chosen against a known seed never breaks a lookup", () => {
    const clock = () => 0;
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }), {
      maxKeys: 512,
      sweepIntervalMs: Number.POSITIVE_INFINITY,
    });
    const engine = (keyed as unknown as { engine: SlabEngine }).engine;
    keyed.allow("first");
    const { k0, k1 } = engine.index;
    const flood = collidingKeys(400, 1024, k0, k1, 0);
    for (const key of flood) keyed.allow(key);
    expect(keyed.size).toBe(401);
    expect(engine.index.reseeds).toBeGreaterThanOrEqual(1);
    for (const key of flood) expect(engine.lookup(key), key).toBeGreaterThanOrEqual(0);
    expect(engine.index.probeStats().longest).toBeLessThanOrEqual(MAX_PROBES);
  });
});
