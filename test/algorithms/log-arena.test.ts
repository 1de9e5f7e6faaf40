import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { LogArena } from "../../src/algorithms/log-arena.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { SlidingWindowLogKernel } from "../../src/algorithms/sliding-window-log-kernel.js";
import { windowClockBoundMs } from "../../src/algorithms/time.js";
import { SlabEngine } from "../../src/keyed/engine.js";
import { manualClock } from "../support/manual-clock.js";

// The entry arena of the sliding log: its blocks against a model (a JS array of entries per
// owner), its bound on slack, and, under a keyed registry, its bytes within maxBytes.

const OWNERS = 6;

/** An owner's ring (oldest at `head`, `size` entries) read out oldest first, as pairs. */
function readRing(a: LogArena, owner: number, head: number, size: number): number[] {
  const off = a.rows[2 * owner]!;
  const wrap = a.rows[2 * owner + 1]!;
  const out: number[] = [];
  for (let i = 0; i < size; i++) {
    const p = head + i < wrap ? head + i : head + i - wrap;
    out.push(a.data[off + 2 * p]!, a.data[off + 2 * p + 1]!);
  }
  return out;
}

type Cmd =
  | { kind: "move"; owner: number; entries: number }
  | { kind: "release"; owner: number }
  | { kind: "append"; owner: number; value: number; total: number };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({
    kind: fc.constant("move" as const),
    owner: fc.nat(OWNERS - 1),
    entries: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 1500 })),
  }),
  fc.record({ kind: fc.constant("release" as const), owner: fc.nat(OWNERS - 1) }),
  fc.record({
    kind: fc.constant("append" as const),
    owner: fc.nat(OWNERS - 1),
    value: fc.double({ noNaN: true }),
    total: fc.nat(1000),
  }),
);

/** Offsets and ends of every owner's block, sorted. */
function spans(a: LogArena, owners: number): (readonly [number, number])[] {
  const out: (readonly [number, number])[] = [];
  for (let o = 0; o < owners; o++) {
    const n = a.rows[2 * o + 1]!;
    if (n > 0) out.push([a.rows[2 * o]!, a.rows[2 * o]! + 2 * n]);
  }
  return out.sort((x, y) => x[0] - y[0]);
}

describe("LogArena", () => {
  test("moves, releases and appends keep every owner's entries, in order, blocks apart, slack bounded", () => {
    fc.assert(
      fc.property(fc.array(cmd, { maxLength: 250 }), (cmds) => {
        const a = new LogArena();
        a.setOwners(OWNERS);
        // The model: each owner's entries oldest first; its ring's head and size (a slot's).
        const model: number[][] = Array.from({ length: OWNERS }, () => []);
        const head = new Array<number>(OWNERS).fill(0);
        for (const c of cmds) {
          const m = model[c.owner]!;
          const size = m.length / 2;
          if (c.kind === "move") {
            if (c.entries < size) continue;
            head[c.owner] = a.move(c.owner, c.entries, head[c.owner]!, size);
            expect(a.rows[2 * c.owner + 1]).toBe(c.entries);
          } else if (c.kind === "release") {
            const had = a.rows[2 * c.owner + 1]!;
            expect(a.release(c.owner), "the entries it had").toBe(had);
            expect(a.rows[2 * c.owner + 1], "no block").toBe(0);
            model[c.owner] = [];
            head[c.owner] = 0;
          } else {
            const cap = a.rows[2 * c.owner + 1]!;
            if (cap === 0) continue;
            // The ring full: its oldest entry leaves first (the head moves on).
            if (size === cap) {
              head[c.owner] = head[c.owner]! + 1 === cap ? 0 : head[c.owner]! + 1;
              m.splice(0, 2);
            }
            const n = m.length / 2;
            const p = head[c.owner]! + n < cap ? head[c.owner]! + n : head[c.owner]! + n - cap;
            a.data[a.rows[2 * c.owner]! + 2 * p] = c.value;
            a.data[a.rows[2 * c.owner]! + 2 * p + 1] = c.total;
            m.push(c.value, c.total);
          }
          let live = 0;
          for (let o = 0; o < OWNERS; o++) {
            live += 2 * a.rows[2 * o + 1]!;
            expect(readRing(a, o, head[o]!, model[o]!.length / 2), `owner ${o}`).toEqual(model[o]);
          }
          expect(a.live, "live doubles").toBe(live);
          expect(a.data.length, "slack at most the live blocks").toBeLessThanOrEqual(2 * live);
          const s = spans(a, OWNERS);
          for (let i = 1; i < s.length; i++)
            expect(s[i]![0], "apart").toBeGreaterThanOrEqual(s[i - 1]![1]);
          if (s.length > 0) expect(s[s.length - 1]![1]).toBeLessThanOrEqual(a.top);
        }
      }),
      { numRuns: 300, seed: 20261202 },
    );
  });

  test("a wrapped ring at the end of the arena doubles where it is, its entries in order", () => {
    const a = new LogArena();
    a.setOwners(2);
    a.move(0, 2, 0, 0);
    a.move(1, 4, 0, 0); // owner 1 ends the used part
    const off = a.rows[2]!;
    // A full ring of 4 whose oldest is at 3: entries 3, 0, 1, 2 hold 10, 11, 12, 13.
    for (const [p, v] of [
      [3, 10],
      [0, 11],
      [1, 12],
      [2, 13],
    ] as const) {
      a.data[off + 2 * p] = v;
      a.data[off + 2 * p + 1] = v;
    }
    const at = a.move(1, 8, 3, 4);
    expect(a.rows[2], "the same block").toBe(off);
    expect(a.rows[3]).toBe(8);
    expect(at, "the oldest run moved to the block's end").toBe(7);
    expect(readRing(a, 1, at, 4)).toEqual([10, 10, 11, 11, 12, 12, 13, 13]);
    expect(a.data.length).toBeLessThanOrEqual(2 * a.live);
    // Not at the end: owner 0 moves to a new block, oldest first.
    expect(a.move(0, 4, 0, 0)).toBe(0);
  });

  test("a released block is the next block of its size; clear frees everything", () => {
    const a = new LogArena();
    a.setOwners(3);
    a.move(0, 4, 0, 0);
    a.move(1, 4, 0, 0);
    a.move(2, 2, 0, 0);
    const at = a.rows[0]!;
    const length = a.data.length;
    a.release(0);
    a.move(0, 4, 0, 0);
    expect(a.rows[0], "the freed block, reused").toBe(at);
    expect(a.data.length, "no rebuild").toBe(length);
    a.clear();
    expect([a.live, a.top, a.data.length]).toEqual([0, 0, 0]);
    expect([...a.rows]).toEqual([0, 0, 0, 0, 0, 0]);
  });
});

describe("the keyed SlidingWindowLog's arena within maxBytes", () => {
  function engineOf(limit: number, maxBytes: number) {
    const clock = manualClock(0);
    const layout = new SlidingWindowLogKernel(limit, 60_000);
    const engine = new SlabEngine({
      layout,
      clock,
      maxKeys: 100_000,
      maxBytes,
      maxKeyLength: 64,
      whenFull: "evict",
      clockBoundMs: windowClockBoundMs(60_000),
      clockWhere: "SlidingWindowLog",
      windowMs: 60_000,
    });
    layout.bind(engine);
    const arena = (layout as unknown as { arena: LogArena }).arena;
    return { clock, layout, engine, arena };
  }

  test("a flood of keys, each with many entries, keeps the arena's whole length within maxBytes", () => {
    const maxBytes = 2 ** 20;
    const { clock, layout, engine, arena } = engineOf(1000, maxBytes);
    let peak = 0;
    for (let k = 0; k < 3000; k++) {
      const slot = engine.insert(`client-${k}`, engine.now());
      if (slot < 0) continue;
      const s = slot * layout.doubles;
      for (let i = 0; i < 40; i++) {
        clock.advance(1);
        layout.allowAt(engine.state, s, slot, engine.now(), 1);
      }
      expect(engine.bytes, "accounted").toBeLessThanOrEqual(maxBytes);
      expect(8 * (arena.data.length + arena.rows.length), "the arena's arrays").toBeLessThanOrEqual(
        maxBytes,
      );
      // The entries' accounted bytes cover the arena's whole array (slack included).
      expect(8 * arena.data.length).toBeLessThanOrEqual(32 * (arena.live / 2));
      if (arena.live > peak) peak = arena.live;
    }
    expect(engine.stats.evictedLossy, "keys in use were pushed out to stay within").toBeGreaterThan(
      0,
    );
    expect(peak, "entries kept").toBeGreaterThan(0);
  });

  test("a key reset or dropped returns its block", () => {
    const { clock, layout, engine, arena } = engineOf(100, 2 ** 26);
    const a = engine.insert("a", engine.now());
    const b = engine.insert("b", engine.now());
    for (let i = 0; i < 50; i++) {
      clock.advance(1);
      layout.allowAt(engine.state, a * layout.doubles, a, engine.now(), 1);
      layout.allowAt(engine.state, b * layout.doubles, b, engine.now(), 1);
    }
    const both = arena.live;
    expect(both, "two blocks of 64 entries").toBe(2 * 2 * 64);
    engine.reset("a");
    expect(arena.live, "reset").toBe(both / 2);
    engine.clear();
    expect(arena.live, "dropped").toBe(0);
    expect(arena.data.length, "and the array with them").toBe(0);
  });

  test("a denied call changes no entry", () => {
    const { clock, layout, engine, arena } = engineOf(3, 2 ** 26);
    const log = new SlidingWindowLog({ limit: 3, windowMs: 60_000, clock });
    const a = engine.insert("a", engine.now());
    const s = a * layout.doubles;
    for (let i = 0; i < 3; i++) {
      clock.advance(1);
      layout.allowAt(engine.state, s, a, engine.now(), 1);
      log.allow(1);
    }
    const before = [...arena.data];
    const row = [...engine.state.subarray(s, s + layout.doubles)];
    clock.advance(1);
    expect(layout.decideAt(engine.state, s, a, engine.now(), 1, true)).toEqual(log.consume(1));
    expect(layout.allowAt(engine.state, s, a, engine.now(), 1)).toBe(false);
    expect([...arena.data]).toEqual(before);
    expect([...engine.state.subarray(s, s + layout.doubles)]).toEqual(row);
  });
});

describe("a log that grows by pushing other keys out", () => {
  test("keeps its own entries: making room decides other keys through the same cursor", () => {
    const clock = manualClock(0);
    const layout = new SlidingWindowLogKernel(100, 60_000);
    const engine = new SlabEngine({
      layout,
      clock,
      maxKeys: 10_000,
      maxBytes: 2 ** 16,
      maxKeyLength: 64,
      whenFull: "evict",
      clockBoundMs: windowClockBoundMs(60_000),
      clockWhere: "SlidingWindowLog",
      windowMs: 60_000,
    });
    layout.bind(engine);
    // Keys in use up to the byte bound: each holds one entry for a minute.
    for (let k = 0; k < 2000; k++) {
      const slot = engine.insert(`other-${k}`, engine.now());
      if (slot >= 0) layout.allowAt(engine.state, slot * layout.doubles, slot, engine.now(), 1);
    }
    // A minute on, they are idle (and every trace has expired): making room drops them, each
    // checked for idleness through the kernel's cursor first.
    clock.advance(60_000);
    const keysBefore = engine.size;
    const log = new SlidingWindowLog({ limit: 100, windowMs: 60_000, clock });
    const a = engine.insert("a", engine.now());
    for (let i = 0; i < 90; i++) {
      clock.advance(1);
      const s = a * layout.doubles;
      expect(layout.decideAt(engine.state, s, a, engine.now(), 1, true), `call ${i}`).toEqual(
        log.consume(1),
      );
    }
    expect(engine.size, "others dropped for its growth").toBeLessThan(keysBefore);
    const ring = layout.ringAt(engine.state, a * layout.doubles, a);
    expect(ring.sum(), "every unit it took, in its own ring").toBe(90);
  });
});
