import { afterEach, describe, expect, test, vi } from "vitest";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { RateLimitError } from "../../src/core/errors.js";
import type { Clock } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";
import { settleLog, timerClock } from "../support/timer-clock.js";
import { bytesPerAllow } from "./bytes-per-call.js";

// The SlidingWindowCounter fast path (src/keyed/counter-slab.ts), reached through
// KeyedLimiter with a SlidingWindowCounter policy. Decisions against per-key counters on
// random timelines are in test/keyed/keyed-limiter.test.ts ("eviction changes no decision: ...").

afterEach(() => {
  vi.useRealTimers();
});

const NO_SWEEP = { sweepIntervalMs: Number.POSITIVE_INFINITY };

/** 4 per sliding second, on the slab. */
function counterOf4(clock: Clock, maxKeys = 1000) {
  const keyed = new KeyedLimiter(new SlidingWindowCounter({ limit: 4, windowMs: 1000, clock }), {
    ...NO_SWEEP,
    maxKeys,
  });
  expect(keyed.stats.slots, "the slab path").toBeGreaterThan(0);
  return keyed;
}

describe("KeyedLimiter fast path for SlidingWindowCounter", () => {
  test("decides like a SlidingWindowCounter per key across windows", () => {
    const clock = manualClock(200);
    const keyed = counterOf4(clock);
    const a = new SlidingWindowCounter({ limit: 4, windowMs: 1000, clock });
    const steps: [number, number][] = [
      [200, 4],
      [900, 1],
      [1000, 1],
      [1250, 1],
      [1250, 2],
      [1750, 2],
      [2100, 1],
      [3500, 4],
    ];
    for (const [i, [at, cost]] of steps.entries()) {
      clock.set(at);
      expect(keyed.peek("a", cost), `step ${i}: peek`).toEqual(a.peek(cost));
      expect(keyed.consume("a", cost), `step ${i}: consume`).toEqual(a.consume(cost));
    }
  });

  test("sweep drops exactly the keys whose estimate is 0", () => {
    const clock = manualClock(0);
    const keyed = counterOf4(clock);
    keyed.consume("a", 1); // window 0
    keyed.peek("probe"); // keeps nothing
    clock.set(1500);
    keyed.consume("b", 2); // window 1
    expect(keyed.sweep(), "a still weighs in window 1").toBe(0);
    clock.set(2000);
    expect(keyed.sweep(), "a's count has slid out").toBe(1);
    expect(keyed.size).toBe(1);
    expect(keyed.peek("b", 0).remaining, "b weighs fully at 2000").toBe(2);
    clock.set(3000);
    expect(keyed.sweep()).toBe(1);
    expect(keyed.size).toBe(0);
  });

  test("10 cycles of 10,000 expired keys leave size 0 and the slab bounded", () => {
    const clock = manualClock(0);
    const keyed = counterOf4(clock, 1_000_000);
    for (let cycle = 0; cycle < 10; cycle++) {
      for (let i = 0; i < 10_000; i++) keyed.allow(`c${cycle}-k${i}`);
      expect(keyed.size, `cycle ${cycle}`).toBe(10_000);
      clock.advance(2000);
      expect(keyed.sweep(), `cycle ${cycle}: all expired`).toBe(10_000);
      expect(keyed.size, `cycle ${cycle}`).toBe(0);
    }
    expect(keyed.stats.slots, "the free list reuses slots").toBeLessThanOrEqual(16_384);
  });

  test("a flood of 20,000 new keys never exceeds maxKeys, and the limited client stays limited", () => {
    const clock = manualClock(0);
    const keyed = counterOf4(clock, 100);
    expect(keyed.consume("attacker", 4).allowed).toBe(true);
    let served = 0;
    for (let i = 0; i < 20_000; i++) {
      clock.set(i / 100);
      if (keyed.allow(`flood-${i}`)) served++;
      expect(keyed.size, `flood ${i}`).toBeLessThanOrEqual(100);
      if (i % 1000 === 0) expect(keyed.allow("attacker"), `attacker at flood ${i}`).toBe(false);
    }
    // 20,000 keys through 100 places: flood keys pushed out in use leave traces, and a
    // new key on a traced entry starts conservatively (never fresher than what left).
    // 19,900 pushed out in one window onto 4,096 entries: an entry hit again keeps the
    // most used of its keys plus what the new one took, so later keys start fuller (and a
    // counter's entry lasts two windows). About 14,700 are served; "refuse" would serve none.
    expect(served, "flood keys served").toBeGreaterThan(12_000);
    expect(keyed.stats.restored).toBeGreaterThan(0);
    expect(keyed.allow("attacker")).toBe(false);
    expect(keyed.stats.evictedLossy).toBeGreaterThan(0);
  });

  test("a windowMs below the clock's float step throws SlidingWindowCounter's RangeError, and the reading is not kept", () => {
    let t = 2 ** 62;
    const clock = () => t;
    const keyed = counterOf4(clock);
    const alone = new SlidingWindowCounter({ limit: 4, windowMs: 1000, clock });
    const message =
      "SlidingWindowCounter: windowMs 1000 is below the clock's resolution at 4611686018427388000 ms " +
      "(a float step of 1024 ms); use a larger windowMs or a clock with a smaller origin";
    expect(() => alone.allow()).toThrow(new RangeError(message));
    expect(() => keyed.allow("a")).toThrow(new RangeError(message));
    expect(() => keyed.consume("a")).toThrow(new RangeError(message));
    expect(keyed.size).toBe(0);
    t = 10;
    expect(keyed.consume("a").resetAfterMs, "the bad reading was not kept").toBe(1990);
  });

  test("wait on a slab key: first-in, first-out, a deadline, then the key returns to the slab", async () => {
    const { clock, advance } = timerClock();
    const keyed = counterOf4(clock);
    keyed.consume("a", 4);
    const { log, track } = settleLog(clock);
    const waits = [
      track("two", keyed.wait("a", 2)),
      track("one", keyed.wait("a", 1)),
      track("late", keyed.wait("a", 1, { maxWaitMs: 100 })),
    ];
    expect(keyed.size).toBe(1);
    expect(keyed.allow("b"), "another key is not held up").toBe(true);
    await advance(2000);
    await Promise.all(waits);
    // Window 1 weighs the 4 of window 0 by (2000 - t) / 1000: 2 fit at 1500, 1 more at 1750.
    expect(log).toEqual(["late!RateLimitError@0", "two@1500", "one@1750"]);
    expect(keyed.size).toBe(2);
    expect(keyed.stats.created, "coming back is not a new key").toBe(2);
    expect(keyed.peek("a", 0), "back in the slab with its counts").toMatchObject({
      remaining: 1,
      resetAfterMs: 1000,
    });
    await advance(1000);
    expect(keyed.sweep()).toBe(2);
  });

  test("a rejected wait keeps nothing", async () => {
    const { clock } = timerClock();
    const keyed = counterOf4(clock);
    keyed.consume("a", 4);
    await expect(keyed.wait("a", 1, { maxWaitMs: 10 })).rejects.toBeInstanceOf(RateLimitError);
    await expect(keyed.wait("a", 5)).rejects.toThrow(
      new RangeError("KeyedLimiter.wait: cost 5 exceeds limit 4"),
    );
    await Promise.resolve();
    expect(keyed.size).toBe(1);
    expect(keyed.allow("a")).toBe(false);
  });

  test("allow on an existing key allocates nothing", () => {
    // Measured in a fresh process (see bytes-per-call.ts); consume, which builds a
    // Decision, shows about 112 bytes there, so the measure can fail.
    expect(
      bytesPerAllow("new SlidingWindowCounter({ limit: 1e12, windowMs: 1e9, clock })"),
      "bytes per call",
    ).toBeLessThan(1);
  });
});
