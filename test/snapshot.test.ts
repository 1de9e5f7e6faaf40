import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../src/algorithms/sliding-window-log.js";
import type { LimiterSnapshot, RegistrySnapshot } from "../src/algorithms/snapshot.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { allOf } from "../src/composite/all-of.js";
import type { Clock, Decision, Limiter } from "../src/core/limiter.js";
import { type CloneableLimiter, KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import { manualClock } from "./support/manual-clock.js";

type Snapshotting = Limiter & {
  snapshot(): LimiterSnapshot;
  restore(snapshot: LimiterSnapshot): void;
};

/** Every algorithm and an allOf, each with options small enough to be crossed often. */
const LIMITERS: readonly { name: string; make: (clock: Clock) => Snapshotting }[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 3, clock }),
  },
  {
    name: "TokenBucket with initialTokens",
    make: (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 3, initialTokens: 0, clock }),
  },
  {
    name: "LeakyBucket",
    make: (clock) => new LeakyBucket({ capacity: 4, leakPerSecond: 2, clock }),
  },
  { name: "FixedWindow", make: (clock) => new FixedWindow({ limit: 5, windowMs: 100, clock }) },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 5, windowMs: 100, clock }),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 5, windowMs: 100, clock }),
  },
  {
    name: "allOf(TokenBucket, SlidingWindowLog, FixedWindow)",
    make: (clock) =>
      allOf(
        new TokenBucket({ capacity: 4, refillPerSecond: 5, clock }),
        new SlidingWindowLog({ limit: 6, windowMs: 150, clock }),
        new FixedWindow({ limit: 7, windowMs: 120, clock }),
      ),
  },
];

/** Calls on a timeline: move the clock forward by `dt`, then one call (a refund too). */
const calls = fc.array(
  fc.record({
    dt: fc.integer({ min: 0, max: 300 }),
    cost: fc.integer({ min: 0, max: 6 }),
    op: fc.constantFrom("allow", "consume", "peek", "refund"),
  }),
  { maxLength: 40 },
);
type Call = { dt: number; cost: number; op: string };

/** One call on `limiter`, its answer as a value to compare. */
function call(limiter: Limiter, { cost, op }: Call): boolean | number | string | Decision {
  if (op === "allow") return limiter.allow(cost);
  if (op === "consume") return limiter.consume(cost);
  if (op === "peek") return limiter.peek(cost);
  const refund = limiter.refund;
  if (refund === undefined) return 0;
  try {
    return refund.call(limiter, cost) as number;
  } catch (error) {
    return (error as Error).name; // a fixed window refunds only through a receipt
  }
}

describe.each(LIMITERS)("snapshot of $name", ({ make }) => {
  test("restore(snapshot) decides bit for bit as the limiter it was taken of, through JSON", () => {
    fc.assert(
      fc.property(calls, calls, (before, after) => {
        const clock = manualClock(1000);
        const limiter = make(clock);
        for (const c of before) {
          clock.advance(c.dt);
          call(limiter, c);
        }
        const snapshot = JSON.parse(JSON.stringify(limiter.snapshot())) as LimiterSnapshot;
        const other = manualClock(clock());
        const restored = make(other);
        restored.restore(snapshot);
        after.forEach((c, i) => {
          clock.advance(c.dt);
          other.advance(c.dt);
          expect(call(restored, c), `step ${i}: ${c.op} ${c.cost}`).toEqual(call(limiter, c));
        });
      }),
    );
  });

  test("a snapshot is plain JSON-safe data: numbers, and the strings Infinity and -Infinity", () => {
    const snapshot = make(manualClock(0)).snapshot();
    expect(JSON.parse(JSON.stringify(snapshot))).toEqual(snapshot);
    expect(snapshot.version).toBe(1);
  });
});

describe("snapshot refusals", () => {
  const window = () => new FixedWindow({ limit: 5, windowMs: 100, clock: manualClock(0) });

  test.each([
    {
      name: "another option",
      snapshot: () => new FixedWindow({ limit: 6, windowMs: 100 }).snapshot(),
      message:
        "FixedWindow.restore: the snapshot is of another configuration: limit is 6 in the snapshot, 5 here",
    },
    {
      name: "another algorithm",
      snapshot: () => new SlidingWindowCounter({ limit: 5, windowMs: 100 }).snapshot(),
      message:
        'FixedWindow.restore: the snapshot is of algorithm "sliding-window-counter", this limiter is "fixed-window"',
    },
    {
      name: "another version",
      snapshot: () => ({ ...window().snapshot(), version: 3 }),
      message:
        "FixedWindow.restore: the snapshot is of format version 3, this library reads versions 1 and 2",
    },
    {
      name: "a state of another shape",
      snapshot: () => ({ ...window().snapshot(), state: [1, 2, 3] }),
      message: "FixedWindow.restore: snapshot.state has 3 numbers, this algorithm keeps 2",
    },
    {
      name: "a number that is not one",
      snapshot: () => ({ ...window().snapshot(), state: [1, "soon"] }),
      message:
        'FixedWindow.restore: a snapshot number must be a finite number, "Infinity" or "-Infinity", got "soon" (string)',
    },
    {
      name: "not an object",
      snapshot: () => "state",
      message:
        "snapshot must be the object snapshot() returned, got a string; if you stored it as JSON, pass JSON.parse(text)",
    },
  ])("$name is a TypeError naming it, and nothing changes", ({ snapshot, message }) => {
    const limiter = window();
    limiter.consume(2);
    const before = limiter.snapshot();
    expect(() => limiter.restore(snapshot() as LimiterSnapshot)).toThrow(TypeError);
    expect(() => limiter.restore(snapshot() as LimiterSnapshot)).toThrow(message);
    expect(limiter.snapshot()).toEqual(before);
  });

  test("an allOf refuses a snapshot of other parts, naming the part", () => {
    const make = (limit: number) =>
      allOf(
        new TokenBucket({ capacity: 3, refillPerSecond: 1 }),
        new FixedWindow({ limit, windowMs: 10 }),
      );
    expect(() => make(4).restore(make(5).snapshot())).toThrow(
      "allOf.restore: the snapshot is of another configuration: part 1 limit is 5 in the snapshot, 4 here",
    );
  });

  test("a bucket holding units for a reservation cannot leave the process", () => {
    const clock = manualClock(0);
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1, clock });
    bucket.reserve();
    const r = bucket.reserve(); // in debt: its units are held until it acts
    expect(() => bucket.snapshot()).toThrow(RangeError);
    expect(() => bucket.snapshot()).toThrow("units are held for waiters or reservations");
    r.cancel();
    clock.advance(1); // the first reservation's time to act has passed: it is spent
    expect(bucket.snapshot().algorithm).toBe("token-bucket");
  });
});

/** Keyed policies: one of each kind of slab. */
const POLICIES: readonly { name: string; make: (clock: Clock) => CloneableLimiter }[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 3, refillPerSecond: 4, clock }),
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 4, windowMs: 90, clock }),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 4, windowMs: 90, clock }),
  },
  {
    name: "allOf(LeakyBucket, FixedWindow)",
    make: (clock) =>
      allOf(
        new LeakyBucket({ capacity: 3, leakPerSecond: 5, clock }),
        new FixedWindow({ limit: 5, windowMs: 70, clock }),
      ),
  },
];

const keyedCalls = fc.array(
  fc.record({
    dt: fc.integer({ min: 0, max: 200 }),
    key: fc.constantFrom("a", "b", "c", "d"),
    cost: fc.integer({ min: 0, max: 4 }),
    op: fc.constantFrom("allow", "consume", "peek"),
  }),
  { maxLength: 40 },
);
type KeyedCall = { dt: number; key: string; cost: number; op: string };

function keyedCall(r: KeyedLimiter, { key, cost, op }: KeyedCall): boolean | Decision {
  if (op === "allow") return r.allow(key, cost);
  return op === "consume" ? r.consume(key, cost) : r.peek(key, cost);
}

describe.each(POLICIES)("KeyedLimiter($name) snapshots", ({ make }) => {
  test("restore(key, snapshot(key)) and restoreAll(snapshotAll()) decide bit for bit as the keys", () => {
    fc.assert(
      fc.property(keyedCalls, keyedCalls, fc.boolean(), (before, after, whole) => {
        const clock = manualClock(5000);
        const registry = new KeyedLimiter(make(clock));
        for (const c of before) {
          clock.advance(c.dt);
          keyedCall(registry, c);
        }
        const other = manualClock(clock());
        const restored = new KeyedLimiter(make(other));
        if (whole) {
          const all = JSON.parse(JSON.stringify(registry.snapshotAll())) as RegistrySnapshot;
          restored.restoreAll(all);
        } else {
          for (const key of ["a", "b", "c", "d"]) {
            const one = JSON.parse(JSON.stringify(registry.snapshot(key))) as LimiterSnapshot;
            restored.restore(key, one);
          }
        }
        after.forEach((c, i) => {
          clock.advance(c.dt);
          other.advance(c.dt);
          expect(keyedCall(restored, c), `step ${i}: ${c.op} ${c.key} ${c.cost}`).toEqual(
            keyedCall(registry, c),
          );
        });
      }),
    );
  });
});

describe("KeyedLimiter snapshot edges", () => {
  test("a key's snapshot restores into a class of the same options, and back", () => {
    const clock = manualClock(0);
    const registry = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 100, clock }));
    registry.consume("k", 2);
    const own = new FixedWindow({ limit: 3, windowMs: 100, clock });
    own.restore(registry.snapshot("k"));
    expect(own.consume(1)).toEqual(registry.consume("k", 1));
    expect(own.consume(1)).toEqual(registry.consume("k", 1));
  });

  test("restoreAll refuses keys past maxKeys before changing anything", () => {
    const clock = manualClock(0);
    const big = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 100, clock }));
    for (const key of ["a", "b", "c"]) big.consume(key);
    const small = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 100, clock }), {
      maxKeys: 2,
    });
    expect(() => small.restoreAll(big.snapshotAll())).toThrow(
      "KeyedLimiter.restoreAll: 3 new keys do not fit: 0 of maxKeys (2) are kept",
    );
    expect(small.size).toBe(0);
  });

  test("a registry refuses the snapshot of another policy, naming the option", () => {
    const a = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1 }));
    const b = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 2 }));
    a.consume("k");
    expect(() => b.restore("k", a.snapshot("k"))).toThrow(
      "KeyedLimiter.restore: the snapshot is of another configuration: refillPerSecond is 1 in the snapshot, 2 here",
    );
    expect(() => b.restoreAll(a.snapshotAll())).toThrow("refillPerSecond is 1 in the snapshot");
    expect(b.size).toBe(0);
  });

  test("a key pushed out while limited stays limited across snapshotAll and restoreAll", () => {
    const clock = manualClock(0);
    const make = (maxKeys = 2) =>
      new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 2, clock }), { maxKeys });
    const registry = make();
    registry.consume("limited", 2); // empty until 1000 ms
    clock.set(500);
    registry.consume("x", 2);
    registry.consume("y", 2); // pushes out "limited", the one full again soonest: its trace stays
    const snapshot = JSON.parse(JSON.stringify(registry.snapshotAll())) as RegistrySnapshot;
    expect([...snapshot.keys].sort()).toEqual(["x", "y"]);
    const restored = make();
    restored.restoreAll(snapshot);
    clock.set(600); // 1.2 tokens by now: a cost of 2 does not fit, here as there
    expect(registry.peek("limited", 2).allowed).toBe(false);
    expect(restored.peek("limited", 2).allowed).toBe(false);
    expect(restored.peek("limited", 2)).toEqual(registry.peek("limited", 2));
    const other = make(1_000_000);
    expect(() => other.restoreAll(snapshot)).toThrow(
      "restore into a registry with the same maxKeys and maxBytes",
    );
    expect(other.size).toBe(0);
  });

  test("the generic path has no snapshots: a TypeError says what to do", () => {
    const registry = new KeyedLimiter(() => new FixedWindow({ limit: 3, windowMs: 100 }));
    expect(() => registry.snapshotAll()).toThrow("snapshot each key's own limiter");
  });
});

describe("tampered snapshots are refused before anything changes", () => {
  test("a negative window count is refused, not a burst past the limit", () => {
    const clock = manualClock(1000);
    const fixed = new FixedWindow({ limit: 5, windowMs: 1000, clock });
    const counter = new SlidingWindowCounter({ limit: 5, windowMs: 1000, clock });
    const fixedSnap = fixed.snapshot();
    const counterSnap = counter.snapshot();
    expect(() => fixed.restore({ ...fixedSnap, state: [-1000, 5000] })).toThrow(RangeError);
    expect(() => counter.restore({ ...counterSnap, state: [0, -1000, 0] })).toThrow(RangeError);
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 1000, clock }));
    keyed.allow("a");
    const all = keyed.snapshotAll();
    expect(() => keyed.restoreAll({ ...all, keys: ["n"], state: [-1e6, 1e12] })).toThrow(
      RangeError,
    );
    // Nothing changed: each admits exactly its limit.
    for (const limiter of [fixed, counter]) {
      let admitted = 0;
      for (let i = 0; i < 100; i++) if (limiter.allow()) admitted++;
      expect(admitted).toBe(5);
    }
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (keyed.allow("n")) admitted++;
    expect(admitted).toBe(5);
  });

  test("a state array with a hole is refused, not a bucket that admits everything", () => {
    // A hole (a sparse array, as structuredClone or code may hand over) was skipped by the
    // decoding and became NaN tokens: every request admitted. Now it is a missing number.
    const clock = manualClock(1000);
    const bucket = new TokenBucket({ capacity: 5, refillPerSecond: 0.001, clock });
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 0.001, clock }));
    const snap = bucket.snapshot();
    const holes: (number | undefined)[] = new Array(snap.state.length);
    holes[1] = 1000; // state[0], the tokens, left out
    const state = holes as LimiterSnapshot["state"];
    const holed = { ...snap, state };
    expect(() => bucket.restore(holed)).toThrow(TypeError);
    expect(() => keyed.restore("k", holed)).toThrow(TypeError);
    const all = { ...keyed.snapshotAll(), keys: ["k"], state };
    expect(() => keyed.restoreAll(all)).toThrow(TypeError);
    // Nothing changed: each admits exactly its capacity.
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (bucket.allow()) admitted++;
    expect(admitted).toBe(5);
    admitted = 0;
    for (let i = 0; i < 100; i++) if (keyed.allow("k")) admitted++;
    expect(admitted).toBe(5);
  });

  test("a trace table with holes is refused, not read as NaN entries", () => {
    const clock = manualClock(1000);
    const keyed = new KeyedLimiter(
      new TokenBucket({ capacity: 2, refillPerSecond: 0.001, clock }),
      {
        maxKeys: 1,
      },
    );
    keyed.allow("a");
    keyed.allow("a");
    keyed.allow("b"); // "a" pushed out while limited: its trace is kept
    const all = keyed.snapshotAll();
    const trace = all.trace!;
    const entries = new Array(trace.entries.length) as typeof trace.entries;
    const fresh = new KeyedLimiter(
      new TokenBucket({ capacity: 2, refillPerSecond: 0.001, clock }),
      {
        maxKeys: 1,
      },
    );
    expect(() => fresh.restoreAll({ ...all, trace: { ...trace, entries } })).toThrow(TypeError);
    expect(fresh.size).toBe(0);
  });

  test("a window's latest time past its clock's resolution is refused, not kept to throw on every call", () => {
    const clock = manualClock(1000);
    for (const latestMs of ["Infinity", 1e300] as const) {
      const windows = [
        new FixedWindow({ limit: 2, windowMs: 1000, clock }),
        new SlidingWindowCounter({ limit: 2, windowMs: 1000, clock }),
        new SlidingWindowLog({ limit: 2, windowMs: 1000, clock }),
        allOf(
          new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
          new FixedWindow({ limit: 2, windowMs: 1000, clock }),
        ),
      ];
      for (const limiter of windows) {
        // Before: restored, then every allow threw this RangeError (KeyedLimiter refused it).
        expect(() => limiter.restore({ ...limiter.snapshot(), latestMs })).toThrow(
          /windowMs 1000 is below the clock's resolution/,
        );
        expect([limiter.allow(), limiter.allow(), limiter.allow()]).toEqual([true, true, false]);
      }
    }
  });

  test("a log whose running total falls is refused, not a burst past the limit", () => {
    const clock = manualClock(1000);
    const log = new SlidingWindowLog({ limit: 5, windowMs: 1000, clock });
    log.allow();
    const snap = log.snapshot();
    expect(() => log.restore({ ...snap, state: [100, 1e12, 0] })).toThrow(RangeError);
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (log.allow()) admitted++;
    expect(admitted).toBe(4);
  });

  test("a log longer than the limit's ring bound is merged into the bound, never a burst", () => {
    const clock = manualClock(1000);
    const log = new SlidingWindowLog({ limit: 5, windowMs: 1000, clock });
    const snap = log.snapshot();
    const state: number[] = [0];
    for (let i = 0; i < 10_000; i++) state.push(1001 + i / 100, i < 9_999 ? 0 : 5);
    log.restore({ ...snap, state });
    expect((log.snapshot().state.length - 1) / 2).toBeLessThanOrEqual(129);
    expect(log.allow()).toBe(false); // the 5 units of the last entry still count
    clock.set(1001 + 9_999 / 100);
    expect(log.allow()).toBe(true);
  });
});

describe("a refused restore names the class and method, the field, the range and the value", () => {
  test("a negative count in FixedWindow.restore names FixedWindow.restore", () => {
    const fixed = new FixedWindow({ limit: 5, windowMs: 1000, clock: manualClock(1000) });
    expect(() => fixed.restore({ ...fixed.snapshot(), state: [-100, 1000] })).toThrow(
      new RangeError(
        "FixedWindow.restore: snapshot.state[0] is a count, which must be a finite number at least 0, got -100",
      ),
    );
  });

  test("a negative count in KeyedLimiter.restore names KeyedLimiter.restore", () => {
    const keyed = new KeyedLimiter(
      new FixedWindow({ limit: 5, windowMs: 1000, clock: manualClock(1000) }),
    );
    keyed.allow("a");
    const snap = keyed.snapshot("a")!;
    expect(() => keyed.restore("a", { ...snap, state: [-100, 1000] })).toThrow(
      new RangeError(
        "KeyedLimiter.restore: snapshot.state[0] is a count, which must be a finite number at least 0, got -100",
      ),
    );
  });

  test("a negative count in KeyedLimiter.restoreAll names KeyedLimiter.restoreAll", () => {
    const keyed = new KeyedLimiter(
      new FixedWindow({ limit: 5, windowMs: 1000, clock: manualClock(1000) }),
    );
    keyed.allow("a");
    const all = keyed.snapshotAll();
    expect(() => keyed.restoreAll({ ...all, keys: ["n"], state: [-100, 1000] })).toThrow(
      /^KeyedLimiter\.restoreAll: snapshot\.state\[0\] is a count, which must be a finite number at least 0, got -100$/,
    );
  });

  test("a snapshot of another algorithm quotes its name once, without a stray type", () => {
    const fixed = new FixedWindow({ limit: 5, windowMs: 1000 });
    const bucket = new TokenBucket({ capacity: 5, refillPerSecond: 1 });
    expect(() => fixed.restore(bucket.snapshot())).toThrow(
      new TypeError(
        'FixedWindow.restore: the snapshot is of algorithm "token-bucket", this limiter is "fixed-window"',
      ),
    );
  });

  test("a log whose totals fall names SlidingWindowLog.restore", () => {
    const log = new SlidingWindowLog({ limit: 5, windowMs: 1000, clock: manualClock(1000) });
    log.allow();
    expect(() => log.restore({ ...log.snapshot(), state: [100, 1e12, 0] })).toThrow(
      /^SlidingWindowLog\.restore: snapshot\.state holds a log, whose entries must have finite leave times in order/,
    );
  });
});

describe("a tampered trace table in restoreAll", () => {
  test("a log trace entry with a negative sum gives a new key no units past the limit", () => {
    const clock = manualClock(1000);
    const make = () => new SlidingWindowLog({ limit: 5, windowMs: 10_000, clock });
    const source = new KeyedLimiter(make(), { maxKeys: 2 });
    for (let i = 0; i < 50; i++) {
      source.allow(`k${i}`);
      source.allow(`k${i}`);
    }
    const all = source.snapshotAll();
    const trace = all.trace!;
    // Every entry [untilMs, sum] made to apply for long with a negative sum.
    const entries = trace.entries.map((_, i) => (i % 2 === 0 ? 1e12 : -1e6));
    const target = new KeyedLimiter(make(), { maxKeys: 2 });
    target.restoreAll({ ...all, keys: [], state: [], trace: { ...trace, entries, untilMs: 1e12 } });
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (target.allow("fresh")) admitted++;
    expect(admitted).toBeLessThanOrEqual(5);
  });
});

describe("restoreAll of a snapshot that names a key twice", () => {
  test("is refused before anything changes, not decided by its last state", () => {
    const clock = manualClock(1000);
    const registry = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 1000, clock }));
    const all = registry.snapshotAll();
    expect(() =>
      registry.restoreAll({ ...all, keys: ["d", "d"], state: [2, 2000, 0, 2000] }),
    ).toThrow(/holds "d" twice/);
    // Nothing changed: "d" is a fresh key, with its limit of 2.
    expect([registry.allow("d"), registry.allow("d"), registry.allow("d")]).toEqual([
      true,
      true,
      false,
    ]);
  });
});

describe("a snapshot given to the wrong restore says which to call", () => {
  const keyed = () => {
    const clock = manualClock(0);
    const k = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1, clock }));
    k.allow("a");
    k.allow("b");
    return k;
  };

  test("a per-key snapshot given to restoreAll names restore(key, snapshot), not snapshot.keys", () => {
    const k = keyed();
    const before = k.snapshotAll();
    const one = k.snapshot("a");
    expect(() => k.restoreAll(one as RegistrySnapshot)).toThrow(
      "KeyedLimiter.restoreAll: this is a snapshot of one limiter or one key (snapshot() or snapshot(key), it has no keys); restore it with restore(key, snapshot), or pass what snapshotAll() returned here",
    );
    expect(k.snapshotAll()).toEqual(before);
  });

  test("a registry snapshot given to restore names restoreAll, not a count of state numbers", () => {
    const k = keyed();
    const all = k.snapshotAll();
    expect(() => k.restore("a", all)).toThrow(
      "KeyedLimiter.restore: this is a snapshot of a whole KeyedLimiter (snapshotAll(), 2 keys); restore it with restoreAll(snapshot), or pass one key's snapshot(key) here",
    );
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1 });
    expect(() => bucket.restore(all)).toThrow(
      "TokenBucket.restore: this is a snapshot of a whole KeyedLimiter (snapshotAll(), 2 keys); restore it with keyedLimiter.restoreAll(snapshot)",
    );
    expect(() => (k.restore as (s: unknown) => void)(all)).toThrow(
      "KeyedLimiter.restore: takes the key first, restore(key, snapshot), got one argument, an object; a snapshotAll() is restored with restoreAll(snapshot)",
    );
  });

  test("restore({}) shows what a snapshot looks like, with this limiter's algorithm and options", () => {
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1 });
    expect(() => bucket.restore({} as LimiterSnapshot)).toThrow(
      'TokenBucket.restore: snapshot must be the object snapshot() returned, { version: 1, algorithm: "token-bucket", options: {"capacity":3,"refillPerSecond":1,"initialTokens":3}, latestMs: <ms>, state: [<numbers>] }; got an object, which has no version, algorithm, options, latestMs, state',
    );
    expect(() => keyed().restoreAll({} as RegistrySnapshot)).toThrow(
      "which has no version, algorithm, options, latestMs, state, keys",
    );
    expect(() => keyed().restoreAll({} as RegistrySnapshot)).toThrow(
      "keys: [<key>, ...], width: <numbers per key>, state: [<numbers>] }",
    );
  });

  test("a snapshot stored as JSON text says to JSON.parse it", () => {
    const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1 });
    const text = JSON.stringify(bucket.snapshot());
    expect(() => bucket.restore(text as unknown as LimiterSnapshot)).toThrow(
      "TokenBucket.restore: snapshot must be the object snapshot() returned, got a string; if you stored it as JSON, pass JSON.parse(text)",
    );
    bucket.restore(JSON.parse(text));
  });
});

describe("blocks in snapshots", () => {
  const HOUR = 3_600_000;
  const make = (clock: Clock) =>
    new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }));
  const viaJson = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

  test("a graceful restart keeps a blocked client blocked", () => {
    const clock = manualClock(1_764_633_600_000);
    const before = make(clock);
    before.block("abuser", HOUR);
    before.consume("user", 2);
    clock.advance(1000);
    const after = make(clock); // the new process
    after.restoreAll(viaJson(before.snapshotAll()));
    expect(after.allow("abuser")).toBe(false);
    expect(after.blockedMs("abuser")).toBe(HOUR - 1000);
    expect(after.consume("user")).toEqual(before.consume("user"));
    clock.advance(HOUR - 1000); // the block ends when it would have ended without the restart
    expect(after.blockedMs("abuser")).toBe(0);
    expect(after.allow("abuser")).toBe(true);
  });

  test("a key's snapshot carries its block, and restore(key) keeps it", () => {
    const clock = manualClock(0);
    const before = make(clock);
    before.block("abuser", 500);
    const snapshot = viaJson(before.snapshot("abuser"));
    expect(snapshot).toMatchObject({ version: 2, blockedUntilMs: 500 });
    const after = make(clock);
    after.restore("abuser", snapshot);
    expect(after.blockedMs("abuser")).toBe(500);
    expect(after.snapshot("abuser")).toEqual(before.snapshot("abuser"));
  });

  test("a key pushed out while blocked carries its block in its own snapshot", () => {
    const clock = manualClock(0);
    const before = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }), {
      maxKeys: 2,
    });
    before.block("abuser", 5000);
    for (let i = 0; i < 50; i++) before.consume(`flood-${i}`, 5);
    expect(before.snapshotAll().keys).not.toContain("abuser"); // its block is in the block trace
    const blockedMs = before.blockedMs("abuser");
    expect(blockedMs).toBe(5000);
    const after = make(clock);
    after.restore("abuser", viaJson(before.snapshot("abuser")));
    expect(after.blockedMs("abuser")).toBe(blockedMs);
  });

  test("a snapshot without blocks stays of version 1; a restore never shortens a block in place", () => {
    const clock = manualClock(0);
    const registry = make(clock);
    registry.consume("k");
    expect(registry.snapshotAll().version).toBe(1);
    expect(registry.snapshot("k").version).toBe(1);
    const other = make(clock);
    other.block("k", 200);
    registry.block("k", 100);
    other.restore("k", registry.snapshot("k"));
    other.restoreAll(registry.snapshotAll());
    expect(other.blockedMs("k")).toBe(200);
  });

  test("a class refuses a key's snapshot that carries a block, rather than lift it", () => {
    const clock = manualClock(0);
    const registry = make(clock);
    registry.block("k", 100);
    const own = new TokenBucket({ capacity: 5, refillPerSecond: 1, clock });
    expect(() => own.restore(registry.snapshot("k"))).toThrow(
      "TokenBucket.restore: the snapshot carries blocks (format version 2), which only a KeyedLimiter keeps: restore it into one",
    );
  });

  const blocked = () => {
    const clock = manualClock(1000);
    const registry = make(clock);
    registry.block("abuser", 100);
    return { clock, all: registry.snapshotAll(), one: registry.snapshot("abuser") };
  };

  test.each([
    { name: "a negative end", untilMs: -5, error: RangeError, got: "got -5" },
    { name: "an end before latestMs", untilMs: 999, error: RangeError, got: "got 999" },
    { name: "an end at latestMs", untilMs: 1000, error: RangeError, got: "got 1000" },
    { name: "an infinite end", untilMs: "Infinity", error: RangeError, got: "got Infinity" },
    { name: "NaN", untilMs: Number.NaN, error: TypeError, got: "got NaN" },
    { name: "a string", untilMs: "soon", error: TypeError, got: 'got "soon"' },
  ])(
    "a tampered block end ($name) is refused before anything changes",
    ({ untilMs, error, got }) => {
      const { clock, all, one } = blocked();
      const target = make(clock);
      const tamperedAll = { ...all, blocks: { keys: ["abuser"], untilMs: [untilMs] } };
      expect(() => target.restoreAll(tamperedAll as RegistrySnapshot)).toThrow(error);
      expect(() => target.restoreAll(tamperedAll as RegistrySnapshot)).toThrow(got);
      const tamperedOne = { ...one, blockedUntilMs: untilMs };
      expect(() => target.restore("abuser", tamperedOne as LimiterSnapshot)).toThrow(got);
      expect(target.size).toBe(0);
      expect(target.blockedMs("abuser")).toBe(0);
    },
  );

  test("a block end that is not a number names the block it ends", () => {
    const { clock, all, one } = blocked();
    expect(() =>
      make(clock).restoreAll({ ...all, blocks: { keys: ["abuser"], untilMs: ["soon"] } } as never),
    ).toThrow(
      'KeyedLimiter.restoreAll: snapshot.blocks.untilMs[0] is when a block ends, which must be a time in ms (a number), got "soon" (string)',
    );
    expect(() =>
      make(clock).restore("abuser", { ...one, blockedUntilMs: "soon" } as never),
    ).toThrow(
      'KeyedLimiter.restore: snapshot.blockedUntilMs is when a block ends, which must be a time in ms (a number), got "soon" (string)',
    );
  });

  test("a range error names the block and the snapshot's latest time", () => {
    const { clock, all } = blocked();
    expect(() =>
      make(clock).restoreAll({ ...all, blocks: { keys: ["abuser"], untilMs: [-5] } }),
    ).toThrow(
      "KeyedLimiter.restoreAll: snapshot.blocks.untilMs[0] is when a block ends, which must be a finite time after latestMs (1000), got -5",
    );
  });

  test.each([
    {
      name: "blocks in a version 1 snapshot",
      tamper: (s: RegistrySnapshot) => ({ ...s, version: 1 }),
      message:
        "KeyedLimiter.restoreAll: the snapshot is of format version 1, which carries no blocks, yet holds some",
    },
    {
      name: "blocks that are not two arrays of one length",
      tamper: (s: RegistrySnapshot) => ({ ...s, blocks: { keys: ["a", "b"], untilMs: [2000] } }),
      message:
        "KeyedLimiter.restoreAll: snapshot.blocks must be { keys, untilMs }, two arrays of one length, got 2 keys and 1 untilMs",
    },
    {
      name: "blocks without untilMs",
      tamper: (s: RegistrySnapshot) => ({ ...s, blocks: { keys: ["a"] } }),
      message:
        "KeyedLimiter.restoreAll: snapshot.blocks must be { keys, untilMs }, two arrays of one length, got untilMs undefined",
    },
    {
      name: "a key blocked twice",
      tamper: (s: RegistrySnapshot) => ({
        ...s,
        blocks: { keys: ["a", "a"], untilMs: [2000, 3000] },
      }),
      message: 'KeyedLimiter.restoreAll: snapshot.blocks.keys holds "a" twice',
    },
    {
      name: "an unknown version",
      tamper: (s: RegistrySnapshot) => ({ ...s, version: 3 }),
      message:
        "KeyedLimiter.restoreAll: the snapshot is of format version 3, this library reads versions 1 and 2",
    },
  ])("$name is refused", ({ tamper, message }) => {
    const { clock, all } = blocked();
    const target = make(clock);
    expect(() => target.restoreAll(tamper(all) as RegistrySnapshot)).toThrow(message);
    expect(target.size).toBe(0);
  });
});
