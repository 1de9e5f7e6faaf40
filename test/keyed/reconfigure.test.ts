import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../../src/index.js";
import { MapOfLimiters } from "../support/keyed-model.js";
import { manualClock } from "../support/manual-clock.js";
import { timerClock } from "../support/timer-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

interface Reconfigurable extends Limiter {
  clone(): Limiter;
  reconfigure(options: never): void;
}

/** Each policy kind with two option sets to switch between (integers: exact on both sides). */
const POLICIES: readonly (readonly [
  string,
  (clock: Clock) => Reconfigurable,
  readonly [object, object],
])[] = [
  [
    "TokenBucket",
    (clock) => new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
    [
      { capacity: 3, refillPerSecond: 0 },
      { capacity: 8, refillPerSecond: 2 },
    ],
  ],
  [
    "LeakyBucket",
    (clock) => new LeakyBucket({ capacity: 5, leakPerSecond: 1, clock }),
    [
      { capacity: 2, leakPerSecond: 0 },
      { capacity: 9, leakPerSecond: 4 },
    ],
  ],
  [
    "FixedWindow",
    (clock) => new FixedWindow({ limit: 5, windowMs: 1000, clock }),
    [{ limit: 2 }, { limit: 7, windowMs: 3000 }],
  ],
  [
    "SlidingWindowLog",
    (clock) => new SlidingWindowLog({ limit: 5, windowMs: 1000, clock }),
    [
      { limit: 2, windowMs: 500 },
      { limit: 7, windowMs: 2000 },
    ],
  ],
  [
    "SlidingWindowCounter",
    (clock) => new SlidingWindowCounter({ limit: 5, windowMs: 1000, clock }),
    [{ limit: 3 }, { limit: 8, windowMs: 2000 }],
  ],
  [
    "allOf",
    (clock) =>
      allOf(
        new TokenBucket({ capacity: 6, refillPerSecond: 2, clock }),
        new FixedWindow({ limit: 4, windowMs: 1000, clock }),
      ) as unknown as Reconfigurable,
    [
      [{ capacity: 3 }, undefined],
      [{ refillPerSecond: 0 }, { limit: 9 }],
    ] as unknown as [object, object],
  ],
];

describe("KeyedLimiter.reconfigure", () => {
  test.each(POLICIES)(
    "%s: every key, and keys made later, decide as one limiter per key reconfigured alike",
    (_name, make, [first, second]) => {
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              dt: fc.integer({ min: 0, max: 900 }),
              key: fc.constantFrom("a", "b", "c", "d"),
              cost: fc.integer({ min: 0, max: 6 }),
              change: fc.integer({ min: 0, max: 6 }),
            }),
            { maxLength: 40 },
          ),
          (steps) => {
            const clock = manualClock();
            const policy = make(clock);
            const registry = new KeyedLimiter(policy);
            const changes: object[] = [];
            const model = new MapOfLimiters(() => {
              const limiter = make(clock);
              for (const o of changes) limiter.reconfigure(o as never);
              return limiter;
            });
            for (const step of steps) {
              clock.advance(step.dt);
              if (step.change < 2) {
                const o = step.change === 0 ? first : second;
                changes.push(o);
                registry.reconfigure(o);
                for (const limiter of model.map.values()) {
                  (limiter as Reconfigurable).reconfigure(o as never);
                }
              }
              expect(registry.consume(step.key, step.cost), `${step.key} at ${clock()}`).toEqual(
                model.consume(step.key, step.cost),
              );
            }
          },
        ),
      );
    },
  );

  test("a bad option throws before any key changes; the policy given is not changed", () => {
    const clock = manualClock();
    const policy = new TokenBucket({ capacity: 5, refillPerSecond: 1, clock });
    const registry = new KeyedLimiter(policy);
    registry.consume("a", 3);
    expect(() => registry.reconfigure({ capacity: 9, refillPerSecond: Number.NaN })).toThrow(
      "TokenBucket: refillPerSecond must be a finite number >= 0, got NaN",
    );
    expect(() => registry.reconfigure({ maxKeys: 10 })).toThrow(
      /TokenBucket\.reconfigure: unknown option "maxKeys"/,
    );
    expect(registry.peek("a", 0)).toMatchObject({ limit: 5, remaining: 2 });
    registry.reconfigure({ capacity: 9 });
    expect(registry.peek("a", 0)).toMatchObject({ limit: 9, remaining: 2 });
    expect(registry.peek("new", 0)).toMatchObject({ limit: 9, remaining: 9 });
    expect(policy.capacity).toBe(5);
  });

  test("a registry built from a function refuses, naming why", () => {
    const registry = new KeyedLimiter(() => new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    expect(() => registry.reconfigure({ capacity: 2 })).toThrow(
      /built from a function \(key\) => Limiter/,
    );
  });

  test("the generic path (a subclass policy) carries every key over and makes new keys anew", () => {
    const clock = manualClock();
    class Mine extends TokenBucket {}
    const registry = new KeyedLimiter(new Mine({ capacity: 4, refillPerSecond: 1, clock }));
    registry.consume("a", 4);
    registry.reconfigure({ refillPerSecond: 0, capacity: 6 });
    clock.advance(10_000);
    expect(registry.consume("a", 1)).toMatchObject({ allowed: false, limit: 6 });
    expect(registry.consume("b", 6)).toMatchObject({ allowed: true, limit: 6 });
  });

  test("a key pushed out with a trace comes back as it would be had it been kept", () => {
    const clock = manualClock();
    const registry = new KeyedLimiter(new TokenBucket({ capacity: 4, refillPerSecond: 1, clock }), {
      maxKeys: 2,
    });
    const model = new TokenBucket({ capacity: 4, refillPerSecond: 1, clock });
    registry.consume("busy", 4);
    model.consume(4);
    registry.consume("x", 1);
    registry.consume("y", 1); // pushes "busy" out (idle soonest of those in use), trace kept
    expect(registry.stats.evictedLossy).toBeGreaterThan(0);
    clock.advance(1000);
    registry.reconfigure({ capacity: 10, refillPerSecond: 0 });
    model.reconfigure({ capacity: 10, refillPerSecond: 0 });
    clock.advance(60_000);
    // Never fresher: the 1 token accrued before the change, and none after.
    expect(registry.consume("busy", 2)).toEqual(model.consume(2));
    expect(registry.consume("busy", 1)).toEqual(model.consume(1));
  });

  test("keyed bucket waiters are re-planned, with the error a fresh keyed wait gets", async () => {
    const { clock, advance } = timerClock();
    const registry = new KeyedLimiter(new TokenBucket({ capacity: 4, refillPerSecond: 1, clock }));
    registry.consume("k", 4);
    const big = registry.wait("k", 4);
    const small = registry.wait("k", 1);
    registry.reconfigure({ capacity: 3, refillPerSecond: 10 });
    await expect(big).rejects.toThrow(new RangeError("KeyedLimiter.wait: cost 4 exceeds limit 3"));
    await expect(registry.wait("k", 4)).rejects.toThrow(
      "KeyedLimiter.wait: cost 4 exceeds limit 3",
    );
    await advance(100);
    await expect(small).resolves.toMatchObject({ allowed: true, limit: 3 });
  });

  test("keyed window waiters are re-planned", async () => {
    const { clock, advance } = timerClock();
    const registry = new KeyedLimiter(new FixedWindow({ limit: 4, windowMs: 1000, clock }));
    registry.consume("k", 4);
    const big = registry.wait("k", 4);
    const small = registry.wait("k", 1);
    registry.reconfigure({ limit: 2 });
    await expect(big).rejects.toThrow(new RangeError("KeyedLimiter.wait: cost 4 exceeds limit 2"));
    await advance(1000);
    await expect(small).resolves.toMatchObject({ allowed: true, limit: 2 });
  });
});
