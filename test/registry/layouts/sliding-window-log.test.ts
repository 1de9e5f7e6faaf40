import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { SlidingWindowLog } from "../../../src/algorithms/sliding-window-log.js";
import { windowClockBoundMs } from "../../../src/algorithms/time.js";
import { logExactEntries, logLeaveAt } from "../../../src/algorithms/window-math.js";
import { keyBytes, SlabEngine } from "../../../src/registry/engine.js";
import {
  LOG_RING_BYTES,
  logEntryBytes,
  SlidingWindowLogLayout,
} from "../../../src/registry/layouts/sliding-window-log.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";

// The SlidingWindowLog slot layout driven directly on a SlabEngine: its decisions against
// a SlidingWindowLog per key, its conservative states (restore, chargeDenied) against the
// exact log they bound, and its byte accounting.

/** An engine of `SlidingWindowLog({ limit, windowMs })` keys on `clock`, its layout bound. */
function engineOf(limit: number, windowMs: number, clock: ManualClock) {
  const layout = new SlidingWindowLogLayout(limit, windowMs);
  const engine = new SlabEngine({
    layout,
    clock,
    maxKeys: 1000,
    maxBytes: 2 ** 28,
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
    decide: (cost: number, take: boolean) =>
      layout.decideAt(engine.state, s, slot, engine.now(), cost, take),
  };
}

type Op = "allow" | "consume" | "peek";
const op = fc.constantFrom<Op>("allow", "consume", "peek");

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
function entryBytes(layout: SlidingWindowLogLayout, slots: readonly { slot: number }[]): number {
  let sum = 0;
  for (const { slot } of slots) sum += layout.entryBytesOf(slot);
  return sum;
}

describe("SlidingWindowLogLayout decides as a SlidingWindowLog per key", () => {
  test("any timeline of allow, consume and peek, fractional and large costs included", () => {
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
          else expect(slot.decide(cost, op === "consume"), where).toEqual(log[op](cost));
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
    const ring = log as unknown as { size: number; slotCount: number };
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

/** Feeds `calls` to an exact slot and a bounding one, the way the engine drives a bound. */
function expectBounded(
  e: Engine,
  exact: ReturnType<typeof slotOf>,
  bound: ReturnType<typeof slotOf>,
  clock: ManualClock,
  calls: readonly { dtMs: number; cost: number; op: Op }[],
): void {
  const { layout, engine } = e;
  for (const [i, { dtMs, cost, op }] of calls.entries()) {
    clock.advance(dtMs);
    const now = engine.now();
    const where = `call ${i}: ${op}(${cost}) at ${now}`;
    const allowed =
      op === "allow" ? bound.allow(cost) : bound.decide(cost, op === "consume").allowed;
    if (op === "peek") {
      if (allowed) expect(exact.decide(cost, false).allowed, where).toBe(true);
      continue;
    }
    // The exact log takes the request iff it allows it; the bound never allows more.
    const exactAllowed = exact.allow(cost);
    if (allowed) expect(exactAllowed, where).toBe(true);
    else layout.chargeDenied(engine.state, bound.s, bound.slot, now, cost);
  }
}

describe("SlidingWindowLogLayout conservative states (docs/keyed.md#bounds)", () => {
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
        const busyUntilMs = layout.idleAtMs(engine.state, exact.s, exact.slot, now);
        expect(busyUntilMs).toBeGreaterThan(now);
        const bound = slotOf(e, "bound");
        layout.restore(engine.state, bound.s, bound.slot, busyUntilMs, now);
        expect(layout.idleAtMs(engine.state, bound.s, bound.slot, now)).toBeGreaterThanOrEqual(
          busyUntilMs,
        );
        expectBounded(e, exact, bound, clock, after);
      }),
      { numRuns: 200 },
    );
  });

  test("a key charged after a denial stays a bound of the log that allowed it", () => {
    // The bound starts as the exact log's twin (same history): an uncertain key that has
    // become exact again is charged on every denial, and must stay a bound from there.
    fc.assert(
      fc.property(history, ({ limit, windowMs, before, after }) => {
        const clock = manualClock(0);
        const e = engineOf(limit, windowMs, clock);
        const exact = slotOf(e, "exact");
        const bound = slotOf(e, "bound");
        for (const { dtMs, cost } of before) {
          clock.advance(dtMs);
          expect(bound.allow(cost)).toBe(exact.allow(cost));
        }
        expectBounded(e, exact, bound, clock, after);
      }),
      { numRuns: 200 },
    );
  });

  test("the granule stamp's leave time is at least any log's, so chargeDenied may use it", () => {
    fc.assert(
      fc.property(
        fc.double({ min: -1e13, max: 1e13, noNaN: true }),
        fc.double({ min: 1e-3, max: 1e9, noNaN: true }),
        fc.double({ min: 1e-3, max: 1e8, noNaN: true }),
        (nowMs, windowMs, limit) => {
          const n = logExactEntries(limit);
          expect(logLeaveAt(nowMs, n, windowMs, n)).toBeGreaterThanOrEqual(
            logLeaveAt(nowMs, 0, windowMs, n),
          );
        },
      ),
    );
  });

  test("restore: limit units until busyUntilMs, then empty", () => {
    const clock = manualClock(100);
    const e = engineOf(5, 1000, clock);
    const { layout, engine } = e;
    const key = slotOf(e, "k");
    layout.restore(engine.state, key.s, key.slot, 700, 100);
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

  test("chargeDenied: the entry leaves when a log's entry logged now would, or later", () => {
    const clock = manualClock(0);
    const limit = 10;
    const windowMs = 1000;
    const e = engineOf(limit, windowMs, clock);
    const { layout, engine } = e;
    const key = slotOf(e, "k");
    layout.restore(engine.state, key.s, key.slot, 500, 0);
    clock.set(100.3);
    layout.chargeDenied(engine.state, key.s, key.slot, 100.3, 1);
    const n = logExactEntries(limit);
    const granuleLeave = logLeaveAt(100.3, n, windowMs, n);
    expect(granuleLeave, "the granule end, after the exact stamp").toBeGreaterThan(1100.3);
    expect(key.decide(1, false).retryAfterMs).toBe(granuleLeave - 100.3);
    // A cost above the limit is denied to every log: nothing changes.
    layout.chargeDenied(engine.state, key.s, key.slot, 100.3, 11);
    expect(key.decide(1, false).retryAfterMs).toBe(granuleLeave - 100.3);
    // A later entry is kept: the charge never shortens the bound.
    layout.restore(engine.state, key.s, key.slot, 5000, 100.3);
    layout.chargeDenied(engine.state, key.s, key.slot, 100.3, 1);
    expect(key.decide(1, false).retryAfterMs).toBe(5000 - 100.3);
  });
});

describe("SlidingWindowLogLayout bytes", () => {
  test("a key costs its ring's fixed part, then its entries as the ring grows and shrinks", () => {
    const clock = manualClock(0);
    const e = engineOf(1000, 1000, clock);
    const { layout, engine } = e;
    const empty = engine.bytes;
    const key = slotOf(e, "k");
    expect(engine.bytes - empty).toBe(keyBytes("k") + LOG_RING_BYTES);
    const keyed = engine.bytes;
    key.allow(1);
    expect(engine.bytes - keyed).toBe(logEntryBytes(4));
    for (let i = 0; i < 99; i++) {
      clock.advance(1);
      key.allow(1);
    }
    expect(engine.bytes - keyed).toBe(logEntryBytes(128));
    clock.advance(999); // all but the newest two have left
    expect(layout.isIdle(engine.state, key.s, key.slot, engine.now())).toBe(false);
    expect(engine.bytes - keyed, "shrunk").toBe(logEntryBytes(4));
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

  test("restore and chargeDenied account a ring they make or shrink", () => {
    const clock = manualClock(0);
    const e = engineOf(1e6, 1000, clock);
    const { layout, engine } = e;
    const key = slotOf(e, "k");
    const keyed = engine.bytes;
    layout.restore(engine.state, key.s, key.slot, 10, 0);
    expect(engine.bytes - keyed).toBe(logEntryBytes(4));
    clock.set(10);
    for (let i = 0; i < 50; i++) {
      clock.advance(1);
      key.allow(1);
    }
    expect(engine.bytes - keyed).toBe(logEntryBytes(64));
    layout.chargeDenied(engine.state, key.s, key.slot, engine.now(), 1);
    expect(engine.bytes - keyed).toBe(logEntryBytes(4));
    engine.reset("k");
    expect(engine.bytes).toBe(keyed - keyBytes("k") - LOG_RING_BYTES);
  });

  test("an unbound layout says so at its first ring", () => {
    const layout = new SlidingWindowLogLayout(3, 1000);
    const st = new Float64Array(1);
    layout.init(st, 0, 0);
    expect(layout.allowAt(st, 0, 0, 0, 0)).toBe(true);
    expect(() => layout.allowAt(st, 0, 0, 0, 1)).toThrow(/bind\(engine\)/);
  });
});
