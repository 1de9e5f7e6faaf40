import { describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { SWEEP_EVERY } from "../../src/keyed/stats.js";
import { manualClock } from "../support/manual-clock.js";

// The Map-of-limiters store is reached through KeyedLimiter with any other policy.
describe("LimiterMap (KeyedLimiter generic path)", () => {
  test("copies a subclass policy per key with clone(), as itself", () => {
    const clock = manualClock();
    class Log extends SlidingWindowLog {}
    const keyed = new KeyedLimiter(new Log({ limit: 2, windowMs: 1000, clock }));
    expect(keyed.stats.slots).toBe(0);
    expect(keyed.consume("a", 2)).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
    expect(keyed.allow("a")).toBe(false);
    expect(keyed.allow("b")).toBe(true);
    clock.set(1000);
    expect(keyed.sweep()).toBe(2);
  });

  test("sweep() leaves the incremental sweep where it was: it goes on with the oldest keys", () => {
    // A full pass of its own, as at e296783: when sweep() walked the incremental sweep's
    // iterator instead, the next incremental step began after the keys sweep() had just
    // passed, at keys added since (in use), and left the oldest idle keys kept longer.
    const clock = manualClock();
    const keyed = new KeyedLimiter(() => new FixedWindow({ limit: 1, windowMs: 10, clock }));
    for (let i = 0; i < 20; i++) expect(keyed.allow(`old-${i}`)).toBe(true);
    expect(keyed.sweep()).toBe(0); // all 20 in use
    clock.set(10); // their window ended: all idle
    // The calls up to the incremental step, each on a new key (in use from then on).
    for (let i = 0; i < SWEEP_EVERY - 20; i++) expect(keyed.allow(`new-${i}`)).toBe(true);
    // The step drops the idle keys among the first 8 it looks at: the oldest.
    expect(keyed.stats.evictedIdle).toBe(8);
    expect(keyed.size).toBe(SWEEP_EVERY - 8);
  });

  test("when full and nothing is idle, a new key is refused and no key in use is dropped", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      (key) =>
        key === "slow"
          ? new TokenBucket({ capacity: 10, refillPerSecond: 0.1, clock }) // 10 s per token
          : new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }), // 100 ms per token
      { maxKeys: 2 },
    );
    keyed.consume("slow", 1); // resetAfterMs 10,000
    keyed.consume("fast", 5); // resetAfterMs 500
    expect(keyed.consume("new", 1)).toMatchObject({ allowed: false, remaining: 0 });
    expect(keyed.stats).toMatchObject({ evictedLossy: 0, refused: 1 });
    expect(keyed.peek("fast", 0).remaining, "fast is kept").toBe(5);
    expect(keyed.peek("slow", 0).remaining).toBe(9);
    clock.advance(500); // fast is full again: idle, it makes room
    expect(keyed.consume("new", 1).allowed).toBe(true);
    expect(keyed.stats).toMatchObject({ evictedIdle: 1, evictedLossy: 0, refused: 1 });
  });

  test("a limiter that is idle right after its first call is not kept", () => {
    const clock = manualClock();
    let made = 0;
    const keyed = new KeyedLimiter(() => {
      made++;
      return new TokenBucket({ capacity: 1, refillPerSecond: 1, clock });
    });
    expect(keyed.allow("a", 0)).toBe(true);
    expect(keyed.allow("a", 2)).toBe(false);
    expect(keyed.size).toBe(0);
    expect(made).toBe(2);
  });

  test("wait keeps the key's limiter while it waits", async () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(
      () => new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }),
    );
    await expect(keyed.wait("a")).resolves.toMatchObject({ allowed: true, remaining: 0 });
    expect(keyed.size).toBe(1);
  });
});
