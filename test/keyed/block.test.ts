import { describe, expect, test } from "vitest";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  RateLimitError,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../../src/index.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";

const POLICIES: readonly {
  name: string;
  make: (clock: ManualClock) => Limiter & { clone(): Limiter };
}[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
  },
  {
    name: "LeakyBucket",
    make: (clock) => new LeakyBucket({ capacity: 5, leakPerSecond: 1, clock }),
  },
  { name: "FixedWindow", make: (clock) => new FixedWindow({ limit: 5, windowMs: 60_000, clock }) },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 5, windowMs: 60_000, clock }),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 5, windowMs: 60_000, clock }),
  },
  {
    name: "allOf",
    make: (clock) =>
      allOf(
        new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
        new FixedWindow({ limit: 50, windowMs: 60_000, clock }),
      ),
  },
];

describe("KeyedLimiter.block step table (manual clock)", () => {
  for (const { name, make } of POLICIES) {
    test(`${name}: denied with the time left until the block ends, then the state decides`, () => {
      const clock = manualClock(1000);
      const keyed = new KeyedLimiter(make(clock));
      keyed.block("k", 2000);
      // [atMs, allowed, retryAfterMs, resetAfterMs at least]
      const rows: readonly [number, boolean, number, number][] = [
        [1000, false, 2000, 2000],
        [1500, false, 1500, 1500],
        [2999, false, 1, 1],
        [3000, true, 0, 0],
      ];
      for (const [at, allowed, retryAfterMs, resetAtLeast] of rows) {
        clock.set(at);
        const where = `${name} at ${at} ms`;
        const peeked = keyed.peek("k");
        expect(peeked.allowed, where).toBe(allowed);
        expect(keyed.allow("k", 0), `${where}: a free probe`).toBe(allowed);
        const d = keyed.consume("k");
        expect(d.allowed, where).toBe(allowed);
        expect(d.retryAfterMs, where).toBe(retryAfterMs);
        expect(d.resetAfterMs, where).toBeGreaterThanOrEqual(resetAtLeast);
        if (!allowed) expect(d.remaining, where).toBe(0);
      }
    });
  }

  test("a denial during a block changes no state, and the usage decides after it", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 10_000, clock }));
    keyed.consume("k", 3);
    keyed.block("k", 1000);
    // Both the block (1 s) and the window (10 s) must be over: the later one counts.
    expect(keyed.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
    clock.set(1000);
    expect(keyed.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 9000 });
    clock.set(10_000);
    expect(keyed.consume("k", 3)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("a block never shortens a longer one; unblock lifts it and keeps the usage", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }));
    keyed.consume("k");
    keyed.block("k", 5000);
    keyed.block("k", 100);
    expect(keyed.blockedMs("k")).toBe(5000);
    keyed.block("k", 6000);
    expect(keyed.blockedMs("k")).toBe(6000);
    expect(keyed.unblock("k")).toBe(true);
    expect(keyed.unblock("k")).toBe(false);
    expect(keyed.consume("k")).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("reset lifts the block and forgets the usage", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }));
    keyed.consume("k", 2);
    keyed.block("k", 5000);
    keyed.reset("k");
    expect(keyed.blockedMs("k")).toBe(0);
    expect(keyed.consume("k", 2).allowed).toBe(true);
  });

  test("block validates the key and durationMs", () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1 }));
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => keyed.block("k", bad)).toThrow(
        /KeyedLimiter.block: durationMs must be a finite number > 0/,
      );
    }
    expect(() => keyed.block("k", "1" as unknown as number)).toThrow(TypeError);
    expect(() => keyed.block(2 as unknown as string, 1)).toThrow(TypeError);
    expect(keyed.size).toBe(0);
  });

  test("a wait of a blocked key rejects at once with the blocked decision", async () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
    keyed.block("k", 3000);
    const error = await keyed.wait("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).decision).toMatchObject({
      allowed: false,
      retryAfterMs: 3000,
    });
  });
});

describe("KeyedLimiter.block bounds", () => {
  test("a blocked key counts toward maxKeys and its bytes toward stats.bytes", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
    const before = keyed.stats.bytes;
    keyed.block("k", 1000);
    expect(keyed.size).toBe(1);
    expect(keyed.stats.bytes).toBeGreaterThan(before);
  });

  test("the sweep keeps a blocked key until its block ends", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
    keyed.block("k", 1000);
    expect(keyed.sweep()).toBe(0);
    expect(keyed.size).toBe(1);
    clock.set(1000);
    expect(keyed.sweep()).toBe(1);
    expect(keyed.size).toBe(0);
  });

  for (const { name, make } of POLICIES) {
    test(`${name}: a flood of new keys pushes the blocked key out, but never lifts its block`, () => {
      const clock = manualClock();
      const keyed = new KeyedLimiter(make(clock), { maxKeys: 8 });
      const engine = (keyed as unknown as { engine: { lookup(key: string): number } }).engine;
      keyed.block("victim", 3000);
      let pushedOut = false;
      for (let i = 0; i < 2900; i++) {
        clock.set(i); // one new key per ms, each using up its limit (busy longer than the block)
        keyed.consume(`flood-${i}`, 5);
        if (engine.lookup("victim") < 0) pushedOut = true;
        if (i % 100 === 0) expect(keyed.consume("victim").allowed, `at ${i} ms`).toBe(false);
      }
      expect(pushedOut).toBe(true);
      expect(keyed.size).toBeLessThanOrEqual(8);
      expect(keyed.blockedMs("victim")).toBe(3000 - 2899);
      // At least the block's time left (a usage trace it shares with flood keys may add more).
      const d = keyed.consume("victim");
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBeGreaterThanOrEqual(101);
      clock.set(3000);
      expect(keyed.blockedMs("victim")).toBe(0);
    });
  }

  test("a full registry that refuses new keys still keeps a block of a new key", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }), {
      maxKeys: 2,
      whenFull: "refuse",
    });
    keyed.consume("a");
    keyed.consume("b");
    keyed.block("c", 1000);
    expect(keyed.size).toBe(2);
    expect(keyed.blockedMs("c")).toBe(1000);
    expect(keyed.consume("c")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    expect(keyed.unblock("c")).toBe(true);
    expect(keyed.blockedMs("c")).toBe(0);
  });

  test("an evicted blocked key that is unblocked starts from its usage trace, unblocked", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 100_000, clock }), {
      maxKeys: 4,
    });
    keyed.consume("victim", 3);
    keyed.block("victim", 50_000);
    for (let i = 0; i < 100; i++) keyed.consume(`flood-${i}`);
    expect(keyed.unblock("victim")).toBe(true);
    // Unblocked, but never fresher than it left: its window is still used up.
    expect(keyed.consume("victim")).toMatchObject({ allowed: false, retryAfterMs: 100_000 });
  });

  test("clear forgets every block", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }), {
      maxKeys: 2,
    });
    keyed.block("a", 1000);
    keyed.block("b", 1000);
    keyed.block("c", 1000);
    keyed.clear();
    for (const key of ["a", "b", "c"]) expect(keyed.blockedMs(key), key).toBe(0);
  });
});

describe("KeyedLimiter.block on the generic path", () => {
  test("blocks with the limiter's clock, counts the key, and unblock lifts it", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      () => new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
    );
    keyed.block("k", 1000);
    expect(keyed.size).toBe(1);
    expect(keyed.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 1000, remaining: 0 });
    expect(keyed.allow("k")).toBe(false);
    expect(keyed.sweep()).toBe(0);
    clock.set(400);
    expect(keyed.peek("k")).toMatchObject({ allowed: false, retryAfterMs: 600 });
    expect(keyed.unblock("k")).toBe(true);
    expect(keyed.consume("k").allowed).toBe(true);
    keyed.block("k", 100);
    clock.set(500);
    expect(keyed.blockedMs("k")).toBe(0);
    expect(keyed.consume("k").allowed).toBe(true);
  });

  test("a registry full of keys in use cannot keep a new blocked key: a RangeError", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      () => new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }),
      {
        maxKeys: 1,
      },
    );
    keyed.consume("a");
    expect(() => keyed.block("b", 1000)).toThrow(/KeyedLimiter.block: the registry is full/);
    keyed.block("a", 1000);
    expect(keyed.blockedMs("a")).toBe(1000);
  });
});
