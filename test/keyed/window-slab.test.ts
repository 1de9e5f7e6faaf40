import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { RateLimitError } from "../../src/core/errors.js";
import type { Clock } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";
import { settleLog, timerClock } from "../support/timer-clock.js";
import { bytesPerAllow } from "./bytes-per-call.js";

// The FixedWindow fast path (src/keyed/window-slab.ts), reached through KeyedLimiter
// with a FixedWindow policy. Decisions against per-key windows on random timelines are
// in test/keyed/keyed-limiter.test.ts ("eviction changes no decision: FixedWindow ...").

afterEach(() => {
  vi.useRealTimers();
});

const NO_SWEEP = { sweepIntervalMs: Number.POSITIVE_INFINITY };

/** 3 per second, on the slab. */
function windowOf3(clock: Clock, maxKeys = 1000) {
  const keyed = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 1000, clock }), {
    ...NO_SWEEP,
    maxKeys,
  });
  expect(keyed.stats.slots, "the slab path").toBeGreaterThan(0);
  return keyed;
}

describe("KeyedLimiter fast path for FixedWindow", () => {
  test("decides like a FixedWindow per key, with its own state per key", () => {
    const clock = manualClock(500);
    const keyed = windowOf3(clock);
    const a = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    expect(keyed.consume("a", 2)).toEqual(a.consume(2));
    expect(keyed.allow("a")).toBe(a.allow());
    expect(keyed.consume("a")).toEqual(a.consume());
    expect(keyed.peek("b", 3)).toMatchObject({ allowed: true, remaining: 0 });
    clock.set(1000); // the boundary instant belongs to the new window
    expect(keyed.consume("a", 3)).toEqual(a.consume(3));
    expect(keyed.consume("a", 4)).toEqual(a.consume(4)); // above the limit: never
  });

  test("sweep drops exactly the keys whose window ended", () => {
    const clock = manualClock(0);
    const keyed = windowOf3(clock);
    keyed.consume("early", 1); // window [0, 1000)
    keyed.peek("probe"); // keeps nothing
    keyed.allow("free", 0); // keeps nothing
    clock.set(999);
    keyed.consume("late", 3); // same window, limited
    clock.set(1000);
    keyed.consume("next", 1); // window [1000, 2000)
    expect(keyed.size).toBe(3);
    expect(keyed.sweep()).toBe(2);
    expect(keyed.size).toBe(1);
    expect(keyed.stats.evictedIdle).toBe(2);
    expect(keyed.peek("next"), "the kept key keeps its count").toMatchObject({ remaining: 1 });
    expect(keyed.consume("late", 3).allowed, "a dropped key starts fresh").toBe(true);
    clock.set(2000);
    expect(keyed.sweep()).toBe(2);
    expect(keyed.size).toBe(0);
  });

  test("10 cycles of 10,000 expired keys leave size 0 and the slab bounded", () => {
    const clock = manualClock(0);
    const keyed = windowOf3(clock, 1_000_000);
    for (let cycle = 0; cycle < 10; cycle++) {
      for (let i = 0; i < 10_000; i++) keyed.allow(`c${cycle}-k${i}`);
      expect(keyed.size, `cycle ${cycle}: all kept in their window`).toBe(10_000);
      clock.advance(1000);
      expect(keyed.sweep(), `cycle ${cycle}: all expired`).toBe(10_000);
      expect(keyed.size, `cycle ${cycle}`).toBe(0);
    }
    expect(keyed.stats.slots, "the free list reuses slots").toBeLessThanOrEqual(16_384);
    expect(keyed.stats.created).toBe(100_000);
  });

  test("a flood of 20,000 new keys never exceeds maxKeys, and the limited client stays limited", () => {
    const clock = manualClock(0);
    const keyed = windowOf3(clock, 100);
    expect(keyed.consume("attacker", 3).allowed).toBe(true);
    let served = 0;
    for (let i = 0; i < 20_000; i++) {
      clock.set(i / 100); // all within the attacker's window
      if (keyed.allow(`flood-${i}`)) served++;
      expect(keyed.size, `flood ${i}`).toBeLessThanOrEqual(100);
      if (i % 1000 === 0) expect(keyed.allow("attacker"), `attacker at flood ${i}`).toBe(false);
    }
    // 20,000 keys through 100 places: flood keys pushed out in use leave traces, and a
    // new key on a traced entry starts conservatively (never fresher than what left).
    // 19,900 pushed out in one window onto 4,096 entries: an entry hit again keeps the
    // most used of its keys plus what the new one took, so later keys start fuller.
    // More than half are still served; whenFull "refuse" would serve none of them.
    expect(served, "flood keys served").toBeGreaterThan(10_000);
    expect(keyed.stats.restored).toBeGreaterThan(0);
    expect(keyed.allow("attacker")).toBe(false);
    expect(keyed.stats.evictedLossy).toBeGreaterThan(0);
    clock.set(1000);
    expect(keyed.allow("attacker"), "the next window").toBe(true);
  });

  test("at the bound an ended window goes first, then the key of the current window that used least", () => {
    const clock = manualClock(0);
    const keyed = windowOf3(clock, 2);
    keyed.consume("old", 3); // window [0, 1000)
    clock.set(1500);
    keyed.consume("limited", 3); // window [1000, 2000), limited
    keyed.consume("light", 1); // old's window ended: idle, dropped without loss
    expect(keyed.stats).toMatchObject({ evictedIdle: 1, evictedLossy: 0 });
    // Both kept keys' windows end at 2000 (resetAfterMs ties): the lighter one goes.
    keyed.consume("new", 1);
    expect(keyed.stats).toMatchObject({ evictedIdle: 1, evictedLossy: 1 });
    expect(keyed.size).toBe(2);
    expect(keyed.allow("limited"), "the limited client is kept").toBe(false);
    // light went, leaving its trace: it comes back with its count, never fresher.
    expect(keyed.peek("light", 2).allowed, "light has 2 left").toBe(true);
    expect(keyed.peek("light", 3).allowed, "light is not fresh").toBe(false);
  });

  test("the clock is read once per call, with one high-water mark for the registry", () => {
    let reads = 0;
    let t = 5000;
    const keyed = windowOf3(() => {
      reads++;
      return t;
    });
    keyed.consume("a", 3);
    t = 0; // backwards: stands still at 5000, so still a's window
    expect(keyed.allow("a")).toBe(false);
    expect(keyed.peek("b", 0).resetAfterMs).toBe(0);
    expect(keyed.consume("b").resetAfterMs, "b's window is 5000's").toBe(1000);
    expect(reads).toBe(4);
  });

  test("a windowMs below the clock's float step throws FixedWindow's RangeError, and the reading is not kept", () => {
    let t = 2 ** 62; // windowMs 1000 needs |t| < 2^(53 + 9); the float step here is 1024 ms
    const clock = () => t;
    const keyed = windowOf3(clock);
    const alone = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    const message =
      "FixedWindow: windowMs 1000 is below the clock's resolution at 4611686018427388000 ms " +
      "(a float step of 1024 ms); use a larger windowMs or a clock with a smaller origin";
    expect(() => alone.allow()).toThrow(new RangeError(message));
    expect(() => keyed.allow("a")).toThrow(new RangeError(message));
    expect(() => keyed.consume("a")).toThrow(new RangeError(message));
    expect(() => keyed.peek("a")).toThrow(new RangeError(message));
    expect(() => keyed.sweep()).toThrow(new RangeError(message));
    expect(keyed.size).toBe(0);
    t = 10;
    expect(keyed.consume("a").resetAfterMs, "the bad readings were not kept").toBe(990);
  });

  test("wait on a slab key: first-in, first-out, a deadline, then the key returns to the slab", async () => {
    const { clock, advance } = timerClock();
    const keyed = windowOf3(clock);
    expect(keyed.consume("a", 3).allowed).toBe(true);
    expect(keyed.consume("b", 1).allowed).toBe(true);
    const { log, track } = settleLog(clock);
    const waits = [
      track("big", keyed.wait("a", 2)),
      track("small", keyed.wait("a", 1)),
      track("late", keyed.wait("a", 1, { maxWaitMs: 500 })),
    ];
    expect(keyed.size, "a is out of the slab but still counted").toBe(2);
    expect(keyed.allow("a"), "a plain request on a waiting key").toBe(false);
    expect(keyed.allow("b"), "another key is not held up").toBe(true);
    await expect(keyed.wait("a", 4)).rejects.toThrow(
      new RangeError("KeyedLimiter.wait: cost 4 exceeds limit 3"),
    );
    await advance(1000);
    await Promise.all(waits);
    expect(log).toEqual(["late!RateLimitError@0", "big@1000", "small@1000"]);
    expect(keyed.size).toBe(2);
    // Back in the slab with the count of its window: 3 of 3 taken by the two waiters.
    expect(keyed.allow("a")).toBe(false);
    expect(keyed.peek("a")).toMatchObject({ allowed: false, remaining: 0, resetAfterMs: 1000 });
    expect(keyed.stats.created, "coming back is not a new key").toBe(2);
    await advance(1000);
    expect(keyed.sweep(), "its window ended: idle again").toBe(2);
    expect(keyed.size).toBe(0);
  });

  test("a wait on an unknown key that is granted at once leaves the key's count in the slab", async () => {
    const { clock } = timerClock();
    const keyed = windowOf3(clock);
    await expect(keyed.wait("a", 2)).resolves.toMatchObject({ allowed: true, remaining: 1 });
    await Promise.resolve();
    expect(keyed.size).toBe(1);
    expect(keyed.consume("a")).toMatchObject({ allowed: true, remaining: 0 });
    expect(keyed.allow("a")).toBe(false);
  });

  test("a rejected wait keeps nothing", async () => {
    const { clock } = timerClock();
    const keyed = windowOf3(clock);
    keyed.consume("a", 3);
    const controller = new AbortController();
    controller.abort(new Error("gone"));
    await expect(keyed.wait("b", 1, { signal: controller.signal })).rejects.toThrow("gone");
    await expect(keyed.wait("a", 1, { maxWaitMs: 10 })).rejects.toBeInstanceOf(RateLimitError);
    await Promise.resolve();
    expect(keyed.size).toBe(1);
    expect(keyed.allow("a")).toBe(false);
  });

  test("allow on an existing key allocates nothing", () => {
    // Measured in a fresh process (see bytes-per-call.ts); consume, which builds a
    // Decision, shows about 112 bytes there, so the measure can fail.
    expect(
      bytesPerAllow("new FixedWindow({ limit: 1e12, windowMs: 1e9, clock })"),
      "bytes per call",
    ).toBeLessThan(1);
  });
});
