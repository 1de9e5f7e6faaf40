import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { MapOfLimiters } from "../support/keyed-model.js";
import { manualClock } from "../support/manual-clock.js";

// The slab store is reached through KeyedLimiter with a TokenBucket policy.
describe("BucketSlab (KeyedLimiter fast path)", () => {
  test("a dropped key's cached slot is never read for it after another key reuses the slot", () => {
    // Regression guard for the one-entry cache of the last key: dropping a key must forget it.
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1, clock }));
    expect(keyed.allow("a")).toBe(true); // "a" is the cached key, in slot 0
    clock.advance(1000);
    expect(keyed.sweep()).toBe(1); // slot 0 is free
    expect(keyed.consume("b", 3).allowed).toBe(true); // "b" takes slot 0
    expect(keyed.peek("a")).toMatchObject({ allowed: true, remaining: 2 });
    expect(keyed.consume("a")).toMatchObject({ allowed: true, remaining: 2 });
    expect(keyed.peek("b")).toMatchObject({ allowed: false, remaining: 0 });
  });

  test("reset(key) of the cached key forgets it too", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1, clock }));
    keyed.consume("a", 3);
    keyed.reset("a");
    keyed.consume("b", 3);
    expect(keyed.consume("a", 3).allowed).toBe(true);
  });

  test("the slab grows by doubling up to maxKeys and reuses freed slots", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }), {
      maxKeys: 100,
    });
    const slots = [keyed.stats.slots];
    for (let i = 0; i < 100; i++) {
      keyed.allow(`k${i}`);
      if (keyed.stats.slots !== slots.at(-1)) slots.push(keyed.stats.slots);
    }
    expect(slots).toEqual([16, 32, 64, 100]);
    clock.advance(1000);
    for (let i = 0; i < 100; i++) keyed.allow(`again-${i}`); // each new key reuses an idle slot
    expect(keyed.stats).toMatchObject({ slots: 100, evictedIdle: 100, evictedLossy: 0 });
    keyed.clear();
    expect(keyed.stats.slots, "clear gives the slab back").toBe(16);
  });

  test("when full and nothing is idle, the key idle soonest goes and comes back no fresher", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }), {
      maxKeys: 3,
    });
    keyed.consume("heavy", 9);
    keyed.consume("light", 1);
    keyed.consume("medium", 5);
    keyed.consume("new", 1);
    expect(keyed.stats.evictedLossy).toBe(1);
    // light was dropped (1 token missing, full again soonest) and left its trace.
    expect(keyed.stats.evictedLossy).toBe(1);
    expect(keyed.peek("light", 0).remaining, "light comes back as it left").toBe(9);
    expect(keyed.consume("light", 10).allowed, "not fresh").toBe(false);
    expect(keyed.peek("heavy", 0).remaining).toBe(1);
    expect(keyed.peek("medium", 0).remaining).toBe(5);
  });

  test("property: decisions are bit for bit a TokenBucket's per key, fractional values included", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.5, max: 50, noNaN: true }),
        fc.double({ min: 0, max: 20, noNaN: true }),
        fc.array(
          fc.record({
            dtMs: fc.double({ min: 0, max: 3000, noNaN: true }),
            key: fc.integer({ min: 0, max: 4 }),
            cost: fc.double({ min: 0, max: 8, noNaN: true }),
            consume: fc.boolean(),
          }),
          { maxLength: 80 },
        ),
        (capacity, refillPerSecond, steps) => {
          const clock = manualClock(123.456);
          const policy = new TokenBucket({ capacity, refillPerSecond, clock });
          const keyed = new KeyedLimiter(policy, { maxKeys: 64 });
          const model = new MapOfLimiters(() => policy.clone());
          steps.forEach(({ dtMs, key, cost, consume }, i) => {
            clock.advance(dtMs);
            const k = `k${key}`;
            if (consume)
              expect(keyed.consume(k, cost), `step ${i}`).toEqual(model.consume(k, cost));
            else expect(keyed.allow(k, cost), `step ${i}`).toBe(model.allow(k, cost));
            expect(keyed.peek(k, 0), `step ${i}: state`).toEqual(model.peek(k, 0));
          });
        },
      ),
      { numRuns: 200 },
    );
  });
});
