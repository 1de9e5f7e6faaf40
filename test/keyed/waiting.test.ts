import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { allOf } from "../../src/composite/all-of.js";
import { RateLimitError } from "../../src/core/errors.js";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { settleLog, timerClock } from "../support/timer-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

const NO_SWEEP = { sweepIntervalMs: Number.POSITIVE_INFINITY };

/** The same policy on the fast path (a policy limiter) and the generic path (a function). */
function paths(make: (clock: Clock) => Limiter & { clone(): Limiter }) {
  return [
    {
      name: "fast path",
      generic: false,
      keyed: (clock: Clock, maxKeys = 100) =>
        new KeyedLimiter(make(clock), { ...NO_SWEEP, maxKeys }),
    },
    {
      name: "generic path",
      generic: true,
      keyed: (clock: Clock, maxKeys = 100) =>
        new KeyedLimiter(() => make(clock), { ...NO_SWEEP, maxKeys }),
    },
  ];
}

describe.each(paths((clock) => new LeakyBucket({ capacity: 20, leakPerSecond: 8, clock })))(
  "KeyedLimiter.wait with a LeakyBucket policy, $name",
  ({ keyed }) => {
    test("shapes per key: 20 simultaneous requests leave exactly 125 ms apart", async () => {
      const { clock, advance } = timerClock();
      const limiter = keyed(clock);
      const { log, track } = settleLog(clock);
      const waits = Array.from({ length: 20 }, (_, i) => track(`${i}`, limiter.wait("a")));
      await expect(limiter.wait("a"), "the 21st: the queue is full").rejects.toBeInstanceOf(
        RateLimitError,
      );
      await expect(limiter.wait("a")).rejects.toThrow(
        // The fast path names the registry; the generic path, the key's own limiter.
        /^(KeyedLimiter|LeakyBucket)\.wait: the queue is full/,
      );
      expect(limiter.allow("a"), "a plain request waits behind the queue").toBe(false);
      expect(limiter.allow("b"), "another key is not held up").toBe(true);
      expect(vi.getTimerCount()).toBe(1);
      await advance(3000);
      await Promise.all(waits);
      expect(log).toEqual(Array.from({ length: 20 }, (_, i) => `${i}@${i * 125}`));
    });
  },
);

describe.each(paths((clock) => new TokenBucket({ capacity: 3, refillPerSecond: 1, clock })))(
  "KeyedLimiter.wait with a TokenBucket policy, $name",
  ({ keyed, generic }) => {
    test("first-in, first-out with costs 3, 1, 1 per key, in debt; other keys unaffected", async () => {
      const { clock, advance } = timerClock();
      const limiter = keyed(clock);
      limiter.consume("a", 3);
      const { log, track } = settleLog(clock);
      const waits = [
        track("3", limiter.wait("a", 3)),
        track("1a", limiter.wait("a", 1)),
        track("1b", limiter.wait("a", 1)),
      ];
      expect(limiter.consume("a", 1)).toMatchObject({ allowed: false, retryAfterMs: 6000 });
      expect(limiter.consume("b", 3)).toMatchObject({ allowed: true, remaining: 0 });
      await advance(10_000);
      await Promise.all(waits);
      expect(log).toEqual(["3@3000", "1a@4000", "1b@5000"]);
    });

    test("an abort in the middle gives its tokens back; the next is served earlier", async () => {
      const { clock, advance } = timerClock();
      const limiter = keyed(clock);
      limiter.consume("a", 3);
      const controller = new AbortController();
      const { log, track } = settleLog(clock);
      const waits = [
        track("x", limiter.wait("a", 1)),
        track("y", limiter.wait("a", 2, { signal: controller.signal })),
        track("z", limiter.wait("a", 1)),
      ];
      await advance(500);
      controller.abort(new Error("gone"));
      await advance(5000);
      await Promise.all(waits);
      expect(log).toEqual(["y!Error@500", "x@1000", "z@2000"]);
    });

    test("a key with waiters is never swept or evicted, and comes back to the store after", async () => {
      const { clock, advance } = timerClock();
      const limiter = keyed(clock, 4);
      limiter.consume("a", 3);
      const waiting = limiter.wait("a", 3);
      // A flood of new keys at the bound: all others go, the waiting key stays.
      for (let i = 0; i < 50; i++) limiter.consume(`k${i}`, 3);
      expect(limiter.sweep()).toBe(0);
      expect(limiter.peek("a", 1), "still in debt").toMatchObject({
        allowed: false,
        retryAfterMs: 4000,
      });
      expect(limiter.size).toBeLessThanOrEqual(4);
      await advance(3000);
      await expect(waiting).resolves.toMatchObject({ allowed: true, remaining: 0 });
      // Back in the store with its state: the next token is 1 s away, as in a bucket of its own.
      expect(limiter.peek("a", 1)).toMatchObject({ allowed: false, retryAfterMs: 1000 });
      // The fast path pushes flood keys in use out (with traces); the generic path refuses
      // them once full. Either way "a" counts once.
      if (generic) expect(limiter.stats).toMatchObject({ created: 4, refused: 47 });
      else expect(limiter.stats.created, "a counts once, and each of the 50 flood keys").toBe(51);
      await advance(3000);
      expect(limiter.peek("a", 3)).toMatchObject({ allowed: true });
    });

    test("a rejected wait keeps nothing and evicts nobody (it used to insert the key first)", async () => {
      const { clock } = timerClock();
      const limiter = keyed(clock, 1);
      limiter.consume("limited", 3);
      await expect(limiter.wait("new", 4)).rejects.toThrow(RangeError);
      await expect(limiter.wait("new", 1, { maxWaitMs: -1 })).rejects.toThrow(RangeError);
      await expect(
        limiter.wait("new", 1, { signal: AbortSignal.abort(new Error("stop")) }),
      ).rejects.toThrow("stop");
      await Promise.resolve();
      expect(limiter.size).toBe(1);
      expect(limiter.stats.evictedLossy).toBe(0);
      expect(limiter.peek("limited", 1).allowed, "the limited client is remembered").toBe(false);
    });

    test("10,000 waiters on one key use one timer", async () => {
      const { clock, advance } = timerClock();
      const limiter = keyed(clock);
      limiter.consume("a", 3);
      const waits = Array.from({ length: 10_000 }, () => limiter.wait("a", 0.001));
      expect(vi.getTimerCount()).toBe(1);
      await advance(11_000);
      await Promise.all(waits);
      expect(vi.getTimerCount()).toBe(0);
    });
  },
);

describe("KeyedLimiter.wait with an allOf of buckets (fast path)", () => {
  test("waits until every bucket allows, first-in, first-out per key", async () => {
    const { clock, advance } = timerClock();
    const limiter = new KeyedLimiter(
      allOf(
        new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
        new TokenBucket({ capacity: 10, refillPerSecond: 0.1, clock }),
      ),
      NO_SWEEP,
    );
    limiter.consume("a", 2);
    const { log, track } = settleLog(clock);
    const waits = [track("2", limiter.wait("a", 2)), track("1", limiter.wait("a", 1))];
    await expect(limiter.wait("a", 3)).rejects.toThrow(
      new RangeError("KeyedLimiter.wait: cost 3 exceeds limit 2"),
    );
    await advance(5000);
    await Promise.all(waits);
    expect(log).toEqual(["2@2000", "1@3000"]);
    expect(limiter.peek("a", 0), "the 1/s bucket is full again; the other has 5").toMatchObject({
      remaining: 2,
    });
  });
});

describe("KeyedLimiter.wait with a window policy (generic path)", () => {
  test("a key with waiters is never evicted", async () => {
    const { clock, advance } = timerClock();
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000, clock }), {
      ...NO_SWEEP,
      maxKeys: 2,
    });
    limiter.consume("a");
    const waiting = limiter.wait("a");
    for (let i = 0; i < 10; i++) limiter.consume(`k${i}`);
    expect(limiter.peek("a").allowed, "a is still limited").toBe(false);
    await advance(1000);
    await expect(waiting).resolves.toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe("KeyedLimiter reset and clear with waiting keys (fast path)", () => {
  test("reset(key) refills a waiting key; its waiters keep their place and are served sooner", async () => {
    const { clock, advance } = timerClock();
    const limiter = new KeyedLimiter(
      new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
      NO_SWEEP,
    );
    limiter.consume("a", 2);
    limiter.consume("b", 2);
    const { log, track } = settleLog(clock);
    const waits = [track("a", limiter.wait("a", 2)), track("b", limiter.wait("b", 2))];
    await advance(500);
    limiter.reset("a");
    limiter.clear(); // b too (a was already fresh)
    await advance(0);
    expect(log.sort()).toEqual(["a@500", "b@500"]);
    await Promise.all(waits);
    expect(limiter.peek("a", 2).allowed, "clear() forgot what the waiters took").toBe(true);
  });
});
