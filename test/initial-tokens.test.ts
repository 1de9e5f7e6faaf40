// A bucket that starts empty or partly full: TokenBucket's initialTokens, LeakyBucket's
// initialLevel (docs/semantics.md#initial-tokens), in the class, a KeyedLimiter's slab and
// generic path, allOf, and the replay CLI. The Redis twins: test/redis/initial-tokens.test.ts.
import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { parseCommand, type ReplayCommand } from "../src/cli/args.js";
import { UsageError } from "../src/cli/policy.js";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  TokenBucket,
} from "../src/index.js";
import { RedisLeakyBucket, type RedisLike, RedisTokenBucket } from "../src/redis/index.js";
import { manualClock } from "./support/manual-clock.js";
import { timerClock } from "./support/timer-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("validation", () => {
  // Construction never calls the client.
  const client: RedisLike = {
    evalSha: () => Promise.reject(new Error("not called")),
    evalScript: () => Promise.reject(new Error("not called")),
  };
  test.each([
    {
      name: "initialTokens above capacity",
      make: () => new TokenBucket({ capacity: 10, refillPerSecond: 1, initialTokens: 11 }),
      error: RangeError,
      message: "TokenBucket: initialTokens must be a finite number from 0 to capacity (10), got 11",
    },
    {
      name: "initialTokens negative",
      make: () => new TokenBucket({ capacity: 10, refillPerSecond: 1, initialTokens: -1 }),
      error: RangeError,
      message: "TokenBucket: initialTokens must be a finite number from 0 to capacity (10), got -1",
    },
    {
      name: "initialTokens NaN",
      make: () => new TokenBucket({ capacity: 10, refillPerSecond: 1, initialTokens: Number.NaN }),
      error: RangeError,
      message:
        "TokenBucket: initialTokens must be a finite number from 0 to capacity (10), got NaN",
    },
    {
      name: "initialTokens a string",
      make: () =>
        new TokenBucket({ capacity: 10, refillPerSecond: 1, initialTokens: "5" as never }),
      error: TypeError,
      message:
        'TokenBucket: initialTokens must be a finite number from 0 to capacity (10), got "5" (string)',
    },
    {
      name: "initialLevel above capacity",
      make: () => new LeakyBucket({ capacity: 2, leakPerSecond: 1, initialLevel: 2.5 }),
      error: RangeError,
      message: "LeakyBucket: initialLevel must be a finite number from 0 to capacity (2), got 2.5",
    },
    {
      name: "initialLevel Infinity",
      make: () =>
        new LeakyBucket({ capacity: 2, leakPerSecond: 1, initialLevel: Number.POSITIVE_INFINITY }),
      error: RangeError,
      message:
        "LeakyBucket: initialLevel must be a finite number from 0 to capacity (2), got Infinity",
    },
    {
      name: "a capacity reconfigured below the initialTokens given",
      make: () =>
        new TokenBucket({ capacity: 10, refillPerSecond: 1, initialTokens: 8 }).reconfigure({
          capacity: 5,
        }),
      error: RangeError,
      message: "TokenBucket: initialTokens must be a finite number from 0 to capacity (5), got 8",
    },
    {
      name: "a capacity reconfigured below the initialLevel given",
      make: () =>
        new LeakyBucket({ capacity: 10, leakPerSecond: 1, initialLevel: 8 }).reconfigure({
          capacity: 5,
        }),
      error: RangeError,
      message: "LeakyBucket: initialLevel must be a finite number from 0 to capacity (5), got 8",
    },
    {
      name: "RedisTokenBucket's initialTokens above capacity",
      make: () =>
        new RedisTokenBucket({ client, capacity: 3, refillPerSecond: 1, initialTokens: 4 }),
      error: RangeError,
      message:
        "RedisTokenBucket: initialTokens must be a finite number from 0 to capacity (3), got 4",
    },
    {
      name: "RedisLeakyBucket's initialLevel negative",
      make: () =>
        new RedisLeakyBucket({ client, capacity: 3, leakPerSecond: 1, initialLevel: -0.5 }),
      error: RangeError,
      message:
        "RedisLeakyBucket: initialLevel must be a finite number from 0 to capacity (3), got -0.5",
    },
  ])("$name", ({ make, error, message }) => {
    expect(make).toThrow(error);
    expect(make).toThrow(new error(message));
  });

  test("a capacity reconfigured without an initialTokens given: the bucket still starts full", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 1, clock });
    bucket.reconfigure({ capacity: 20 });
    expect(bucket.initialTokens).toBe(20);
    bucket.reset();
    expect(bucket.peek(20).allowed).toBe(true);
  });
});

describe("TokenBucket with initialTokens", () => {
  test("starts at initialTokens when made, refills from then, and reset() returns to it", () => {
    const clock = manualClock(5000);
    const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 2, initialTokens: 1, clock });
    const steps = [
      // [atMs, op, cost, allowed, remaining, retryAfterMs]
      [5000, "consume", 1, true, 0, 0],
      [5000, "consume", 1, false, 0, 500],
      [5500, "consume", 1, true, 0, 0],
      [10_000, "peek", 10, false, 9, 500], // 4.5 s at 2 per second: 9 tokens, not 10
      [20_000, "consume", 10, true, 0, 0], // full after 5 s
      [20_000, "reset", 0, true, 1, 0],
      [20_000, "consume", 2, false, 1, 500], // back at 1 token, from 20 000
      [20_500, "consume", 2, true, 0, 0],
    ] as const;
    steps.forEach(([atMs, op, cost, allowed, remaining, retryAfterMs], i) => {
      clock.set(atMs);
      if (op === "reset") {
        bucket.reset();
        return;
      }
      expect(bucket[op](cost), `step ${i} at ${atMs} ms: ${op}(${cost})`).toMatchObject({
        allowed,
        remaining,
        retryAfterMs,
      });
    });
    expect(bucket.clone().initialTokens).toBe(1);
  });

  test("initialTokens 0: the first request waits for the first token", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 5, refillPerSecond: 10, initialTokens: 0, clock });
    const served: number[] = [];
    const waits = [1, 2].map((n) => bucket.wait(1).then(() => served.push(n)));
    await advance(99);
    expect(served).toEqual([]);
    await advance(1);
    expect(served).toEqual([1]);
    await advance(100);
    await Promise.all(waits);
    expect(served).toEqual([1, 2]);
  });

  test("idle once full, as without it", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, initialTokens: 0, clock });
    expect(bucket.isIdle()).toBe(false);
    clock.set(2000);
    expect(bucket.isIdle()).toBe(true);
  });
});

describe("LeakyBucket with initialLevel", () => {
  test("a full start: as a meter nothing fits until it drains, and no wait may queue", async () => {
    const clock = manualClock();
    const full = new LeakyBucket({ capacity: 2, leakPerSecond: 4, initialLevel: 2, clock });
    expect(full.consume(1)).toMatchObject({ allowed: false, retryAfterMs: 250 });
    await expect(full.wait(1)).rejects.toMatchObject({ name: "RateLimitError" });
    clock.set(250);
    expect(full.consume(1).allowed).toBe(true);
  });

  test("a partly full start: wait() shapes from that level", async () => {
    const { clock, advance } = timerClock();
    const shaper = new LeakyBucket({ capacity: 3, leakPerSecond: 4, initialLevel: 1, clock });
    const at: number[] = [];
    const waits = [shaper.wait(1), shaper.wait(1)].map((w) => w.then(() => at.push(clock())));
    await advance(1000);
    await Promise.all(waits);
    // Level 1 drains at 4 per second: the first leaves at 250 ms, the next 250 ms later.
    expect(at).toEqual([250, 500]);
  });

  test("decides as a TokenBucket with initialTokens = capacity - initialLevel (GCRA)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 20 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(
          fc.record({
            dtMs: fc.integer({ min: 0, max: 800 }),
            cost: fc.constantFrom(0, 0.5, 1, 1, 2, 3),
          }),
          { maxLength: 30 },
        ),
        (capacity, rate, share, steps) => {
          const clock = manualClock(1000);
          const level = capacity * share;
          const leaky = new LeakyBucket({
            capacity,
            leakPerSecond: rate,
            initialLevel: level,
            clock,
          });
          const token = new TokenBucket({
            capacity,
            refillPerSecond: rate,
            initialTokens: capacity - level,
            clock,
          });
          for (const [i, s] of steps.entries()) {
            clock.advance(s.dtMs);
            expect(leaky.consume(s.cost), `step ${i}`).toEqual(token.consume(s.cost));
          }
        },
      ),
    );
  });
});

/** A per-key model: one limiter per key, made at the key's first use, replaced when idle. */
class ForgettingModel {
  private readonly limiters = new Map<string, Limiter>();
  constructor(private readonly make: () => Limiter) {}

  /** Forgets `key`, as `KeyedLimiter.reset(key)` does. */
  forget(key: string): void {
    this.limiters.delete(key);
  }

  /** Whether `key` has a limiter. */
  has(key: string): boolean {
    return this.limiters.has(key);
  }

  /** Forgets every idle key, as `KeyedLimiter.sweep()` does. */
  sweep(): void {
    for (const [key, limiter] of this.limiters) if (limiter.isIdle()) this.limiters.delete(key);
  }

  of(key: string): Limiter {
    let limiter = this.limiters.get(key);
    if (limiter === undefined) {
      limiter = this.make();
      this.limiters.set(key, limiter);
    }
    return limiter;
  }
}

describe("KeyedLimiter: each key starts at its first use", () => {
  const policies: { name: string; make: (clock: () => number) => Limiter }[] = [
    {
      name: "TokenBucket, initialTokens 1 of 4",
      make: (clock) =>
        new TokenBucket({ capacity: 4, refillPerSecond: 2, initialTokens: 1, clock }),
    },
    {
      name: "LeakyBucket, initialLevel 4 of 4",
      make: (clock) => new LeakyBucket({ capacity: 4, leakPerSecond: 3, initialLevel: 4, clock }),
    },
    {
      name: "allOf(TokenBucket with initialTokens 0, FixedWindow)",
      make: (clock) =>
        allOf(
          new TokenBucket({ capacity: 3, refillPerSecond: 5, initialTokens: 0, clock }),
          new FixedWindow({ limit: 5, windowMs: 2000, clock }),
        ),
    },
  ];

  test.each(policies)(
    "$name: slab and generic path decide as a limiter made at the key's first use, forgotten when idle",
    ({ make }) => {
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              dtMs: fc.integer({ min: 0, max: 1500 }),
              key: fc.constantFrom("a", "b", "c"),
              cost: fc.constantFrom(0, 1, 1, 2, 5),
              op: fc.constantFrom("consume", "consume", "peek", "allow", "reset"),
            }),
            { maxLength: 40 },
          ),
          (steps) => {
            const clock = manualClock(1_000_000);
            const options = { sweepIntervalMs: Number.POSITIVE_INFINITY };
            const slab = new KeyedLimiter(make(clock) as never, options);
            const generic = new KeyedLimiter(() => make(clock), options);
            const model = new ForgettingModel(() => make(clock));
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              // Forgetting idle keys is the registries' choice of moment: all at each step here.
              slab.sweep();
              generic.sweep();
              model.sweep();
              const where = `step ${i}: ${s.op}(${s.key}, ${s.cost}) at ${clock()}`;
              if (s.op === "reset") {
                slab.reset(s.key);
                generic.reset(s.key);
                // A KeyedLimiter forgets the key: its next request starts as a new key.
                model.forget(s.key);
              } else if (s.op === "allow") {
                const expected = model.of(s.key).allow(s.cost);
                expect(slab.allow(s.key, s.cost), where).toBe(expected);
                expect(generic.allow(s.key, s.cost), where).toBe(expected);
              } else {
                // A peek of an unknown key makes nothing: the model's limiter then is a new one.
                const known = s.op === "consume" || model.has(s.key);
                const limiter = known ? model.of(s.key) : make(clock);
                const expected = s.op === "peek" ? limiter.peek(s.cost) : limiter.consume(s.cost);
                expect(slab[s.op](s.key, s.cost), where).toEqual(expected);
                expect(generic[s.op](s.key, s.cost), where).toEqual(expected);
              }
            }
          },
        ),
      );
    },
  );

  test("a new key refused at its first use is kept: its refill runs from then", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      new TokenBucket({ capacity: 5, refillPerSecond: 1, initialTokens: 0, clock }),
      { sweepIntervalMs: Number.POSITIVE_INFINITY },
    );
    for (let t = 0; t < 1000; t += 100) {
      clock.set(t);
      expect(keyed.allow("k"), `at ${t} ms`).toBe(false);
    }
    clock.set(1000);
    expect(keyed.allow("k"), "one token after 1 s of asking every 100 ms").toBe(true);
    expect(keyed.consume("fresh")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    expect(keyed.size).toBe(2);
  });
});

describe("tollgate replay", () => {
  test("--initial-tokens and --initial-level reach the constructors; --nodes refuses them", () => {
    const replay = (...args: string[]) =>
      (parseCommand(["replay", "a.log", ...args]) as ReplayCommand).policies;
    expect(
      replay(
        "-a",
        "token-bucket",
        "--capacity",
        "5",
        "--refill-per-second",
        "1",
        "--initial-tokens",
        "0",
      ),
    ).toEqual([
      {
        algorithm: "token-bucket",
        options: { capacity: 5, refillPerSecond: 1, initialTokens: 0 },
        derived: false,
      },
    ]);
    expect(
      replay("-a", "gcra", "--capacity", "5", "--leak-per-second", "1", "--initial-level", "2"),
    ).toEqual([
      {
        algorithm: "leaky-bucket",
        options: { capacity: 5, leakPerSecond: 1, initialLevel: 2 },
        derived: false,
      },
    ]);
    expect(() =>
      replay(
        "-a",
        "token-bucket",
        "--capacity",
        "5",
        "--refill-per-second",
        "1",
        "--initial-tokens",
        "6",
      ),
    ).toThrow(
      new UsageError(
        "TokenBucket: initialTokens must be a finite number from 0 to capacity (5), got 6\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
      ),
    );
    expect(() =>
      replay(
        ...["-a", "token-bucket", "--capacity", "5", "--refill-per-second", "1"],
        ...["--initial-tokens", "0", "--nodes", "2"],
      ),
    ).toThrow(
      new UsageError(
        "--initial-tokens does not apply with --nodes: LeasedTokenBucket's shared bucket starts full",
      ),
    );
  });
});
