import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../src/algorithms/fixed-window.js";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { AllOf, allOf } from "../src/composite.js";
import { RateLimitError } from "../src/errors.js";
import type { Clock, Decision } from "../src/limiter.js";
import { KeyedLimiter } from "../src/registry.js";
import { manualClock } from "./support/manual-clock.js";

/** 2 per second with a burst of 2, and 5 per 10 s: the "10/s AND 1000/hour" shape, small. */
function layered(clock: Clock) {
  const perSecond = new TokenBucket({ capacity: 2, refillPerSecond: 2, clock });
  const perTenSeconds = new FixedWindow({ limit: 5, windowMs: 10_000, clock });
  return { perSecond, perTenSeconds, both: allOf(perSecond, perTenSeconds) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("allOf", () => {
  test("allows only when every part allows, step by step", () => {
    const clock = manualClock();
    const { both } = layered(clock);
    const steps = [
      // atMs, cost, allowed, limit, remaining, retryAfterMs
      [0, 1, true, 2, 1, 0],
      [0, 1, true, 2, 0, 0],
      [0, 1, false, 2, 0, 500], // the bucket is empty: 500 ms for one token
      [500, 1, true, 2, 0, 0],
      [1000, 1, true, 2, 0, 0],
      [2000, 1, true, 5, 0, 0], // the 5th in this window: the window is the least now
      [2500, 1, false, 5, 0, 7500], // the window is spent until 10 s
      [10_000, 2, true, 2, 0, 0],
    ] as const;
    steps.forEach(([atMs, cost, allowed, limit, remaining, retryAfterMs], i) => {
      clock.set(atMs);
      expect(both.consume(cost), `step ${i}`).toMatchObject({
        allowed,
        limit,
        remaining,
        retryAfterMs,
      });
    });
  });

  test("charges no part when one part denies", () => {
    const clock = manualClock();
    const { perSecond, perTenSeconds, both } = layered(clock);
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      expect(both.allow(), `request ${i}`).toBe(true);
    }
    clock.advance(1000);
    const bucketBefore = perSecond.peek(0);
    expect(both.consume().allowed, "the window is spent").toBe(false);
    expect(both.allow(), "the window is spent").toBe(false);
    expect(perSecond.peek(0), "the bucket was not charged").toEqual(bucketBefore);
    expect(perSecond.peek(2).allowed).toBe(true);
    expect(perTenSeconds.peek(0)).toMatchObject({ remaining: 0 });
  });

  test("a denied composite reports the parts without the cost", () => {
    const clock = manualClock();
    const { both } = layered(clock);
    // The window allows 3 (remaining 5 - 3 = 2 if taken), the bucket of 2 cannot: denied.
    expect(both.consume(3)).toEqual({
      allowed: false,
      limit: 2,
      remaining: 2,
      retryAfterMs: Number.POSITIVE_INFINITY,
      resetAfterMs: 0,
    });
    both.consume(1);
    // Denied by the bucket (1 token, cost 2); the window has 4 left, not 4 - 2.
    expect(both.consume(2)).toEqual({
      allowed: false,
      limit: 2,
      remaining: 1,
      retryAfterMs: 500,
      resetAfterMs: 10_000,
    });
  });

  test("an allowed composite takes the least remaining, largest retry and reset", () => {
    const clock = manualClock();
    const { both } = layered(clock);
    const d: Decision = both.consume(1);
    // bucket: remaining 1, full again in 500 ms; window: remaining 4, empty again at 10 s.
    expect(d).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterMs: 0,
      resetAfterMs: 10_000,
    });
  });

  test("peek changes nothing", () => {
    const clock = manualClock();
    const { perSecond, perTenSeconds, both } = layered(clock);
    expect(both.peek(2)).toMatchObject({ allowed: true, remaining: 0 });
    expect(perSecond.peek(0).remaining).toBe(2);
    expect(perTenSeconds.peek(0).remaining).toBe(5);
  });

  test("isIdle when all parts are idle; reset resets all", () => {
    const clock = manualClock();
    const { both } = layered(clock);
    expect(both.isIdle()).toBe(true);
    both.consume(2);
    expect(both.isIdle()).toBe(false);
    clock.set(1000); // the bucket is full again, the window still counts 2
    expect(both.isIdle()).toBe(false);
    clock.set(10_000);
    expect(both.isIdle()).toBe(true);
    both.consume(2);
    both.reset();
    expect(both.isIdle()).toBe(true);
    expect(both.consume(2).allowed).toBe(true);
  });

  test("clone makes fresh copies of every part, with the same options and clock", () => {
    const clock = manualClock();
    const { both } = layered(clock);
    both.consume(2);
    const copy = both.clone();
    expect(copy).toBeInstanceOf(AllOf);
    expect(copy.parts).toHaveLength(2);
    expect(copy.consume(2)).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
    expect(both.allow(), "the original keeps its own usage").toBe(false);
  });

  test("works as a KeyedLimiter policy: two limits per key", () => {
    const clock = manualClock();
    const perKey = new KeyedLimiter(layered(clock).both);
    expect(perKey.consume("a", 2).allowed).toBe(true);
    expect(perKey.allow("a")).toBe(false);
    expect(perKey.allow("b")).toBe(true);
    clock.set(10_000);
    expect(perKey.sweep()).toBe(2);
  });

  test("wait is all-or-nothing and first-in, first-out", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const { perTenSeconds, both } = layered(clock);
    both.consume(2);
    const order: number[] = [];
    const first = both.wait(2).then(() => order.push(1));
    const second = both.wait(1).then(() => order.push(2));
    clock.set(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await first;
    expect(perTenSeconds.peek(0).remaining, "charged once for the first waiter").toBe(1);
    clock.set(1500);
    await vi.advanceTimersByTimeAsync(500);
    await second;
    expect(order).toEqual([1, 2]);
    expect(perTenSeconds.peek(0).remaining).toBe(0);
  });

  test("wait rejects a cost above any part's limit, and a wait past maxWaitMs", async () => {
    const clock = manualClock();
    const { both } = layered(clock);
    await expect(both.wait(3)).rejects.toThrow(
      new RangeError("allOf.wait: cost 3 exceeds limit 2"),
    );
    await expect(both.wait(-1)).rejects.toThrow(
      new RangeError("allOf.wait: cost must be a finite number >= 0, got -1"),
    );
    both.consume(2);
    await expect(both.wait(1, { maxWaitMs: 100 })).rejects.toBeInstanceOf(RateLimitError);
  });

  test.each([
    {
      name: "no parts",
      make: () => allOf(),
      error: RangeError,
      message: "allOf: needs at least one limiter, got none",
    },
    {
      name: "a part that is not a limiter",
      make: () => allOf(new TokenBucket({ capacity: 1, refillPerSecond: 1 }), {} as never),
      error: TypeError,
      message:
        "allOf: part 1 must be a Limiter, got an object; allOf takes no options: give each limiter its own",
    },
    {
      name: "the same limiter twice",
      make: () => {
        const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1 });
        return allOf(bucket, bucket);
      },
      error: RangeError,
      message: "allOf: part 1 is the same limiter as part 0",
    },
    {
      name: "a cost that is a string",
      make: () => allOf(new TokenBucket({ capacity: 1, refillPerSecond: 1 })).consume("1" as never),
      error: TypeError,
      message: 'allOf: cost must be a finite number >= 0, got "1" (string)',
    },
  ])("rejects $name", ({ make, error, message }) => {
    expect(make).toThrow(new error(message));
  });

  test("regression: a nested allOf sharing a part charged that part twice per request", () => {
    const clock = manualClock();
    const a = new TokenBucket({ capacity: 2, refillPerSecond: 0, clock });
    const b = new TokenBucket({ capacity: 5, refillPerSecond: 0, clock });
    const c = new TokenBucket({ capacity: 5, refillPerSecond: 0, clock });
    const message =
      "allOf: part 1 and part 0 share a limiter (nested allOf parts must be distinct too)";
    expect(() => allOf(a, allOf(a, b))).toThrow(new RangeError(message));
    expect(() => allOf(allOf(a, b), allOf(c, allOf(b)))).toThrow(new RangeError(message));
    const inner = allOf(a, b);
    expect(() => allOf(inner, allOf(inner, c))).toThrow(new RangeError(message));
    expect(() => allOf(c, allOf(allOf(b, a)), a)).toThrow(
      new RangeError(
        "allOf: part 2 and part 1 share a limiter (nested allOf parts must be distinct too)",
      ),
    );
    // Nothing was charged by the refused constructions, and distinct nesting still works.
    const nested = allOf(a, allOf(b, c));
    expect(nested.consume().allowed).toBe(true);
    expect([a.peek(0).remaining, b.peek(0).remaining, c.peek(0).remaining]).toEqual([1, 4, 4]);
  });

  test.each([
    {
      name: "undefined",
      parts: undefined,
      message: "allOf: parts must be an array of limiters, got undefined",
    },
    { name: "null", parts: null, message: "allOf: parts must be an array of limiters, got null" },
    {
      name: "a string",
      parts: "ab",
      message: 'allOf: parts must be an array of limiters, got "ab" (string)',
    },
    {
      name: "a limiter",
      parts: new TokenBucket({ capacity: 1, refillPerSecond: 1 }),
      message: "allOf: parts must be an array of limiters, got an object",
    },
  ])(
    "regression: new AllOf($name) named allOf in a TypeError instead of a generic error",
    ({ parts, message }) => {
      expect(() => new AllOf(parts as never)).toThrow(new TypeError(message));
      expect(() => new AllOf(parts as never)).toThrow(TypeError);
    },
  );

  test("clone of a part without clone() is a TypeError", () => {
    const clock = manualClock();
    const { perSecond } = layered(clock);
    const bare = {
      allow: () => true,
      consume: (c?: number) => perSecond.peek(c),
      peek: (c?: number) => perSecond.peek(c),
      reset: () => undefined,
      isIdle: () => true,
      wait: (c?: number) => perSecond.wait(c),
    };
    expect(() => allOf(perSecond, bare).clone()).toThrow(
      new TypeError("allOf: part 1 has no clone(), so it cannot be copied"),
    );
  });

  test("property: allOf decides as the conjunction of its parts, and a denial charges none", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            dtMs: fc.integer({ min: 0, max: 1500 }),
            cost: fc.integer({ min: 0, max: 3 }),
          }),
          {
            maxLength: 60,
          },
        ),
        (steps) => {
          const clock = manualClock();
          const { both } = layered(clock);
          // The model: the same two parts, consulted by hand.
          const model = layered(clock);
          steps.forEach(({ dtMs, cost }, i) => {
            clock.advance(dtMs);
            const a = model.perSecond.peek(cost);
            const b = model.perTenSeconds.peek(cost);
            const allowed = a.allowed && b.allowed;
            if (allowed) {
              model.perSecond.consume(cost);
              model.perTenSeconds.consume(cost);
            }
            const d = both.consume(cost);
            expect(d.allowed, `step ${i}`).toBe(allowed);
            expect(both.peek(0), `step ${i}: state`).toEqual(model.both.peek(0));
          });
        },
      ),
      { numRuns: 200 },
    );
  });
});
