import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { INITIAL_ENTRIES } from "../../../src/algorithms/log-ring.js";
import { SlidingWindowLog } from "../../../src/algorithms/sliding-window-log.js";
import {
  LOG_RING_BYTES,
  logEntryBytes,
  SlidingWindowLogKernel,
} from "../../../src/algorithms/sliding-window-log-kernel.js";
import { windowClockBoundMs } from "../../../src/algorithms/time.js";
import { SlabEngine, slabKeyBytes } from "../../../src/keyed/engine.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";

// The SlidingWindowLog slot layout driven directly on a SlabEngine: its decisions against
// a SlidingWindowLog per key, its restored states against the exact log they bound, and
// its byte accounting.

/** An engine of `SlidingWindowLog({ limit, windowMs })` keys on `clock`, its layout bound. */
function engineOf(limit: number, windowMs: number, clock: ManualClock, maxKeys = 1000) {
  const layout = new SlidingWindowLogKernel(limit, windowMs);
  const engine = new SlabEngine({
    layout,
    clock,
    maxKeys,
    maxBytes: 2 ** 28,
    maxKeyLength: 512,
    whenFull: "evict",
    clockBoundMs: windowClockBoundMs(windowMs),
    clockWhere: "SlidingWindowLog",
    windowMs,
  });
  layout.bind(engine);
  return { layout, engine };
}

type Engine = ReturnType<typeof engineOf>;

/** One key of an engine, with `allow`, `consume` and `peek` as a limiter of its own has them. */
function slotOf({ layout, engine }: Engine, key: string) {
  const slot = engine.insert(key, engine.now());
  expect(slot).toBeGreaterThanOrEqual(0);
  const s = slot * layout.doubles;
  return {
    slot,
    s,
    allow: (cost: number) => layout.allowAt(engine.state, s, slot, engine.now(), cost),
    fits: (cost: number) => layout.fitsAt(engine.state, s, slot, engine.now(), cost),
    take: (cost: number) => layout.takeAt(engine.state, s, slot, engine.now(), cost),
    decide: (cost: number, take: boolean) =>
      layout.decideAt(engine.state, s, slot, engine.now(), cost, take),
  };
}

/** `fitsTake`: allOf's two steps, `fitsAt` then (when it fits) `takeAt`. */
type Op = "allow" | "consume" | "peek" | "fitsTake";
const op = fc.constantFrom<Op>("allow", "consume", "peek", "fitsTake");

/** Small limits and windows (integer and fractional), and limits large enough for many entries. */
const params = fc.oneof(
  fc.record({
    limit: fc.constantFrom(1, 2.5, 3, 10),
    windowMs: fc.constantFrom(1, 7.2, 100, 1000),
  }),
  fc.record({ limit: fc.constantFrom(100, 1e6), windowMs: fc.constantFrom(50, 1000) }),
);

/** Costs: whole, fractional, small fractional (granule slicing), 0 and above the limit. */
function costOf(limit: number) {
  return fc.oneof(
    fc.integer({ min: 0, max: 4 }),
    fc.double({ min: 0, max: 0.2, noNaN: true }),
    fc.double({ min: 0, max: limit * 1.2, noNaN: true }),
    fc.constantFrom(limit, limit * 2),
  );
}

const stepMs = fc.oneof(
  fc.constantFrom(0, 0.5, 1),
  fc.integer({ min: 0, max: 30 }),
  fc.double({ min: 0, max: 400, noNaN: true }),
);

/** `limit`, `windowMs`, then a timeline of calls for `keys` keys. */
function timelineOf(keys: number, maxLength: number) {
  return params.chain(({ limit, windowMs }) =>
    fc.record({
      limit: fc.constant(limit),
      windowMs: fc.constant(windowMs),
      calls: fc.array(
        fc.record({
          dtMs: stepMs,
          key: fc.integer({ min: 0, max: keys - 1 }),
          cost: costOf(limit),
          op,
        }),
        { minLength: 1, maxLength, size: "max" },
      ),
    }),
  );
}

/** The sum of every slot's accounted entry bytes. */
function entryBytes(layout: SlidingWindowLogKernel, slots: readonly { slot: number }[]): number {
  let sum = 0;
  for (const { slot } of slots) sum += layout.entryBytesOf(slot);
  return sum;
}

describe("SlidingWindowLogKernel decides as a SlidingWindowLog per key", () => {
  test("any timeline of allow, consume, peek, fitsAt and takeAt, fractional and large costs", () => {
    fc.assert(
      fc.property(timelineOf(3, 400), ({ limit, windowMs, calls }) => {
        const clock = manualClock(1000);
        const e = engineOf(limit, windowMs, clock);
        const empty = e.engine.bytes;
        const keys = ["a", "b", "c"].map((key) => slotOf(e, key));
        const logs = keys.map(() => new SlidingWindowLog({ limit, windowMs, clock }));
        const baseline = e.engine.bytes;
        for (const [i, { dtMs, key, cost, op }] of calls.entries()) {
          clock.advance(dtMs);
          const slot = keys[key]!;
          const log = logs[key]!;
          const where = `call ${i}: ${op}(${cost}) of key ${key} at ${clock()}`;
          if (op === "allow") expect(slot.allow(cost), where).toBe(log.allow(cost));
          else if (op === "fitsTake") {
            const fits = slot.fits(cost);
            expect(fits, where).toBe(log.peek(cost).allowed);
            if (fits && cost > 0) {
              slot.take(cost);
              expect(log.allow(cost), where).toBe(true);
            }
          } else expect(slot.decide(cost, op === "consume"), where).toEqual(log[op](cost));
          expect(e.engine.bytes, "accounted bytes").toBe(baseline + entryBytes(e.layout, keys));
        }
        for (const key of ["a", "b", "c"]) e.engine.reset(key);
        expect(e.engine.bytes, "all released").toBe(empty);
      }),
      { numRuns: 150 },
    );
  });

  test("many small fractional costs: the granule rule, as the class slices it", () => {
    const clock = manualClock(0);
    const e = engineOf(10, 1000, clock);
    const key = slotOf(e, "k");
    const log = new SlidingWindowLog({ limit: 10, windowMs: 1000, clock });
    for (let i = 0; i < 400; i++) {
      clock.advance(3.7);
      expect(key.decide(0.02, true)).toEqual(log.consume(0.02));
    }
    const { kernel, state } = log as unknown as {
      kernel: SlidingWindowLogKernel;
      state: Float64Array;
    };
    const ring = kernel.ringAt(state, 0, 0);
    expect(ring.size, "beyond the 64 exact entries").toBeGreaterThan(64);
    expect(e.layout.entryBytesOf(key.slot)).toBe(logEntryBytes(ring.slotCount));
  });

  test("a slot without a ring decides as an empty log and keeps no ring", () => {
    const clock = manualClock(5);
    const e = engineOf(3, 1000, clock);
    const key = slotOf(e, "k");
    const log = new SlidingWindowLog({ limit: 3, windowMs: 1000, clock });
    expect(key.decide(4, true)).toEqual(log.consume(4));
    expect(key.decide(2, false)).toEqual(log.peek(2));
    expect(key.decide(0, true)).toEqual(log.consume(0));
    expect(key.allow(0)).toBe(true);
    expect(key.allow(3.5)).toBe(false);
    expect(e.layout.entryBytesOf(key.slot), "no ring made").toBe(0);
    expect(e.layout.isIdle(e.engine.state, key.s, key.slot, clock())).toBe(true);
    expect(e.layout.idleAtMs(e.engine.state, key.s, key.slot, clock())).toBe(5);
  });
});

/**
 * Feeds `calls` to a bounding slot, and what it admits to the exact slot it bounds (as
 * test/keyed/flood.test.ts feeds its reference): the bound never admits a request the
 * exact log would deny.
 */
function expectBounded(
  e: Engine,
  exact: ReturnType<typeof slotOf>,
  bound: ReturnType<typeof slotOf>,
  clock: ManualClock,
  calls: readonly { dtMs: number; cost: number; op: Op }[],
): void {
  for (const [i, { dtMs, cost, op }] of calls.entries()) {
    clock.advance(dtMs);
    const where = `call ${i}: ${op}(${cost}) at ${e.engine.now()}`;
    const exactAllows = exact.decide(cost, false).allowed;
    let allowed: boolean;
    if (op === "allow") allowed = bound.allow(cost);
    else if (op === "fitsTake") {
      allowed = bound.fits(cost);
      if (allowed && cost > 0) bound.take(cost);
    } else allowed = bound.decide(cost, op === "consume").allowed;
    if (!allowed) continue;
    expect(exactAllows, `${where}: admitted, but the exact log denies it`).toBe(true);
    if (op !== "peek") expect(exact.allow(cost), where).toBe(true);
  }
}

describe("SlidingWindowLogKernel restored states (docs/keyed.md#bounds)", () => {
  const history = params.chain(({ limit, windowMs }) =>
    fc.record({
      limit: fc.constant(limit),
      windowMs: fc.constant(windowMs),
      before: fc.array(fc.record({ dtMs: stepMs, cost: costOf(limit) }), {
        maxLength: 200,
        size: "max",
      }),
      after: fc.array(fc.record({ dtMs: stepMs, cost: costOf(limit), op }), {
        minLength: 1,
        maxLength: 300,
        size: "max",
      }),
    }),
  );

  test("a key restored from a log's idleAtMs never allows what that log denies", () => {
    fc.assert(
      fc.property(history, ({ limit, windowMs, before, after }) => {
        const clock = manualClock(0);
        const e = engineOf(limit, windowMs, clock);
        const exact = slotOf(e, "exact");
        for (const { dtMs, cost } of before) {
          clock.advance(dtMs);
          exact.allow(cost);
        }
        const now = e.engine.now();
        const { layout, engine } = e;
        if (layout.isIdle(engine.state, exact.s, exact.slot, now)) return; // nothing to bound
        const trace = new Float64Array(2);
        layout.traceValue(engine.state, exact.s, exact.slot, now, trace, 0);
        const busyUntilMs = trace[0]!;
        expect(busyUntilMs).toBeGreaterThan(now);
        const bound = slotOf(e, "bound");
        layout.restore(engine.state, bound.s, bound.slot, trace, 0, now);
        expect(layout.idleAtMs(engine.state, bound.s, bound.slot, now)).toBeGreaterThanOrEqual(
          busyUntilMs,
        );
        expectBounded(e, exact, bound, clock, after);
      }),
      { numRuns: 200 },
    );
  });

  test("restore: the entry's units (the limit here) until its time, then empty", () => {
    const clock = manualClock(100);
    const e = engineOf(5, 1000, clock);
    const { layout, engine } = e;
    const key = slotOf(e, "k");
    layout.restore(engine.state, key.s, key.slot, new Float64Array([700, 5]), 0, 100);
    expect(key.decide(1, true)).toEqual({
      allowed: false,
      limit: 5,
      remaining: 0,
      retryAfterMs: 600,
      resetAfterMs: 600,
    });
    expect(key.allow(1e-9), "not even the cost tolerance").toBe(false);
    expect(layout.isIdle(engine.state, key.s, key.slot, 699)).toBe(false);
    clock.set(700);
    expect(layout.isIdle(engine.state, key.s, key.slot, 700)).toBe(true);
    expect(key.decide(5, true)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("a key evicted in use comes back from its trace no fresher than it left", () => {
    const clock = manualClock(0);
    const e = engineOf(3, 1000, clock, 2);
    const { layout, engine } = e;
    const busy = slotOf(e, "busy");
    expect(busy.allow(3)).toBe(true); // full until 1000
    const idleAt = 1000 + 1000 * 2 ** -50;
    const entry = new Float64Array([Number.NEGATIVE_INFINITY]);
    const fresh = new Float64Array(1);
    layout.traceValue(engine.state, busy.s, busy.slot, 0, fresh, 0);
    expect(fresh[0]).toBe(idleAt);
    layout.traceCombine(entry, 0, fresh, 0, 0);
    expect(layout.traceExpiresMs(entry, 0)).toBe(idleAt);
    entry[0] = 2000;
    layout.traceCombine(entry, 0, fresh, 0, 0);
    expect(entry[0], "the later time bounds both").toBe(2000);
    clock.set(400);
    expect(slotOf(e, "other").allow(1)).toBe(true); // idle at 1400
    slotOf(e, "flood"); // at the bound: "busy", idle soonest, goes and leaves its trace
    expect(engine.lookup("busy")).toBe(-1);
    const back = slotOf(e, "busy"); // the idle "flood" makes room
    expect(engine.stats).toMatchObject({ evictedLossy: 1, restored: 1 });
    expect(back.decide(1e-6, false)).toMatchObject({ allowed: false, retryAfterMs: idleAt - 400 });
    clock.set(idleAt);
    expect(back.allow(3)).toBe(true);
  });
});

describe("SlidingWindowLogKernel bytes", () => {
  test("a key costs its ring's fixed part, then its entries as the ring grows and shrinks", () => {
    const clock = manualClock(0);
    const e = engineOf(1000, 1000, clock);
    const { layout, engine } = e;
    const empty = engine.bytes;
    const key = slotOf(e, "k");
    expect(engine.bytes - empty).toBe(slabKeyBytes("k") + LOG_RING_BYTES);
    const keyed = engine.bytes;
    key.allow(1);
    expect(engine.bytes - keyed).toBe(logEntryBytes(INITIAL_ENTRIES));
    for (let i = 0; i < 99; i++) {
      clock.advance(1);
      key.allow(1);
    }
    expect(engine.bytes - keyed).toBe(logEntryBytes(128));
    clock.advance(999); // all but the newest two have left
    expect(layout.isIdle(engine.state, key.s, key.slot, engine.now())).toBe(false);
    expect(engine.bytes - keyed, "shrunk to twice what is left").toBe(logEntryBytes(2));
    engine.reset("k");
    expect(engine.bytes).toBe(empty);
  });

  test("a pinned key reset in place gives its ring's bytes back", () => {
    const clock = manualClock(0);
    const e = engineOf(10, 1000, clock);
    const key = slotOf(e, "k");
    const keyed = e.engine.bytes;
    for (let i = 0; i < 10; i++) key.allow(1);
    clock.advance(1);
    key.allow(0.5);
    expect(e.engine.bytes).toBeGreaterThan(keyed);
    e.engine.pin(key.slot);
    e.engine.reset("k");
    expect(e.engine.bytes).toBe(keyed);
    expect(key.decide(10, true).allowed, "a fresh log").toBe(true);
  });

  test("restore accounts the ring it makes or shrinks", () => {
    const clock = manualClock(0);
    const e = engineOf(1e6, 1000, clock);
    const { layout, engine } = e;
    const key = slotOf(e, "k");
    const keyed = engine.bytes;
    layout.restore(engine.state, key.s, key.slot, new Float64Array([10, 5]), 0, 0);
    expect(engine.bytes - keyed).toBe(logEntryBytes(INITIAL_ENTRIES));
    clock.set(10);
    for (let i = 0; i < 50; i++) {
      clock.advance(1);
      key.allow(1);
    }
    expect(engine.bytes - keyed).toBe(logEntryBytes(64));
    layout.restore(
      engine.state,
      key.s,
      key.slot,
      new Float64Array([engine.now() + 5, 10]),
      0,
      engine.now(),
    );
    expect(engine.bytes - keyed).toBe(logEntryBytes(INITIAL_ENTRIES));
    engine.reset("k");
    expect(engine.bytes).toBe(keyed - slabKeyBytes("k") - LOG_RING_BYTES);
  });

  test("clear releases every ring and the slab shrinks back", () => {
    const clock = manualClock(0);
    const e = engineOf(10, 1000, clock);
    const empty = e.engine.bytes;
    for (let i = 0; i < 40; i++) slotOf(e, `k${i}`).allow(1);
    expect(e.engine.bytes).toBeGreaterThan(empty);
    e.engine.clear();
    expect(e.engine.bytes).toBe(empty);
    const key = slotOf(e, "k0");
    expect(key.decide(10, true).allowed, "a fresh log").toBe(true);
  });

  test("an unbound layout says so at its first ring", () => {
    const layout = new SlidingWindowLogKernel(3, 1000);
    layout.grow(1);
    const st = new Float64Array(layout.doubles);
    layout.init(st, 0, 0);
    expect(layout.allowAt(st, 0, 0, 0, 0)).toBe(true);
    expect(() => layout.allowAt(st, 0, 0, 0, 1)).toThrow(/bind\(engine\)/);
  });
});
