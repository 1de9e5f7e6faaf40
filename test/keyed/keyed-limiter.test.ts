import { spawnSync } from "node:child_process";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { AllOf, allOf } from "../../src/composite/all-of.js";
import { RateLimitError } from "../../src/core/errors.js";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import {
  type CloneableLimiter,
  DEFAULT_MAX_KEYS,
  KeyedLimiter,
} from "../../src/keyed/keyed-limiter.js";
import { repoRoot } from "../support/access-log.js";
import { bundle } from "../support/bundle.js";
import { MapOfLimiters } from "../support/keyed-model.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";

/** A bucket of 3 refilled at 1 token per second: full again 3 s after it is emptied. */
const bucketOf3 = (clock: Clock) => new TokenBucket({ capacity: 3, refillPerSecond: 1, clock });

/** The two storage paths every behaviour must hold on. */
const paths = [
  {
    name: "fast path (TokenBucket policy)",
    generic: false,
    make: (clock: Clock, maxKeys?: number) =>
      new KeyedLimiter(bucketOf3(clock), maxKeys === undefined ? {} : { maxKeys }),
  },
  {
    name: "generic path (policy function)",
    generic: true,
    make: (clock: Clock, maxKeys?: number) =>
      new KeyedLimiter(() => bucketOf3(clock), maxKeys === undefined ? {} : { maxKeys }),
  },
  {
    name: "fast path (allOf of buckets)",
    generic: false,
    make: (clock: Clock, maxKeys?: number) =>
      new KeyedLimiter(
        allOf(bucketOf3(clock), new TokenBucket({ capacity: 100, refillPerSecond: 100, clock })),
        maxKeys === undefined ? {} : { maxKeys },
      ),
  },
  {
    name: "fast path (allOf with a window)",
    generic: false,
    make: (clock: Clock, maxKeys?: number) =>
      new KeyedLimiter(
        allOf(bucketOf3(clock), new FixedWindow({ limit: 100, windowMs: 1000, clock })),
        maxKeys === undefined ? {} : { maxKeys },
      ),
  },
] as const;

afterEach(() => {
  vi.useRealTimers();
});

describe.each(paths)("$name", ({ make, generic }) => {
  test("creates a key's state lazily, on its first charged request", () => {
    const clock = manualClock();
    const keyed = make(clock);
    expect(keyed.size).toBe(0);
    expect(keyed.consume("a", 0).allowed, "a free probe keeps nothing").toBe(true);
    expect(keyed.consume("a", 4).allowed, "a denied first request keeps nothing").toBe(false);
    expect(keyed.size).toBe(0);
    expect(keyed.allow("a")).toBe(true);
    expect(keyed.size).toBe(1);
    expect(keyed.consume("b", 2)).toEqual({
      allowed: true,
      limit: 3,
      remaining: 1,
      retryAfterMs: 0,
      resetAfterMs: 2000,
    });
    expect(keyed.size).toBe(2);
    expect(keyed.stats).toMatchObject({ created: 2, evictedIdle: 0, evictedLossy: 0 });
  });

  test("peek answers like a fresh limiter for an unknown key and keeps nothing", () => {
    const clock = manualClock();
    const keyed = make(clock);
    expect(keyed.peek("x", 2)).toEqual({
      allowed: true,
      limit: 3,
      remaining: 1,
      retryAfterMs: 0,
      resetAfterMs: 2000,
    });
    expect(keyed.peek("x", 5)).toMatchObject({ allowed: false, retryAfterMs: Infinity });
    expect(keyed.size).toBe(0);
    keyed.consume("x", 3);
    expect(keyed.peek("x")).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1000 });
    expect(keyed.peek("x")).toMatchObject({ allowed: false, remaining: 0 });
  });

  test("keys are independent", () => {
    const clock = manualClock();
    const keyed = make(clock);
    expect(keyed.consume("a", 3).allowed).toBe(true);
    expect(keyed.allow("a")).toBe(false);
    expect(keyed.allow("b")).toBe(true);
    expect(keyed.peek("b")).toMatchObject({ remaining: 1 });
  });

  test("reset(key) forgets one key, clear() forgets all", () => {
    const clock = manualClock();
    const keyed = make(clock);
    keyed.consume("a", 3);
    keyed.consume("b", 3);
    keyed.reset("a");
    keyed.reset("never-seen");
    expect(keyed.consume("a", 3).allowed, "a starts fresh").toBe(true);
    expect(keyed.allow("b"), "b is untouched").toBe(false);
    keyed.clear();
    expect(keyed.size).toBe(0);
    expect(keyed.consume("b", 3).allowed).toBe(true);
  });

  test("sweep drops exactly the idle keys and says how many", () => {
    const clock = manualClock();
    const keyed = make(clock);
    keyed.consume("one", 1); // full again after 1 s
    keyed.consume("two", 2); // after 2 s
    keyed.consume("three", 3); // after 3 s
    const steps = [
      // atMs, dropped by sweep(), size after
      [500, 0, 3],
      [1000, 1, 2],
      [1999, 0, 2],
      [2000, 1, 1],
      [3000, 1, 0],
    ] as const;
    steps.forEach(([atMs, dropped, size], i) => {
      clock.set(atMs);
      expect(keyed.sweep(), `step ${i}: dropped`).toBe(dropped);
      expect(keyed.size, `step ${i}: size`).toBe(size);
    });
    expect(keyed.stats.evictedIdle).toBe(3);
  });

  test("a bucket of 3 that spent all 3 tokens is kept 1 s later and dropped 3 s later", () => {
    const clock = manualClock();
    const keyed = make(clock);
    expect(keyed.consume("client", 3).allowed).toBe(true);
    clock.advance(1000);
    expect(keyed.sweep()).toBe(0);
    expect(keyed.size).toBe(1);
    expect(keyed.peek("client", 2).allowed, "only 1 token is back").toBe(false);
    clock.advance(2000);
    expect(keyed.sweep()).toBe(1);
    expect(keyed.size).toBe(0);
  });

  test("the incremental sweep drops idle keys during normal calls, without sweep()", () => {
    const clock = manualClock();
    const keyed = make(clock);
    for (let i = 0; i < 100; i++) keyed.consume(`k${i}`, 3);
    clock.advance(3000);
    // Calls on one other key drive the sweep: a few entries every few calls.
    for (let i = 0; i < 1000; i++) keyed.peek("other");
    expect(keyed.size).toBe(0);
    expect(keyed.stats.evictedIdle).toBe(100);
  });

  test("10 cycles of 10,000 expired keys leave size 0 and nothing grows", () => {
    const clock = manualClock();
    const keyed = make(clock);
    const slots: number[] = [];
    for (let cycle = 0; cycle < 10; cycle++) {
      for (let i = 0; i < 10_000; i++) keyed.allow(`c${cycle}-k${i}`);
      expect(keyed.size, `cycle ${cycle}: all kept while in use`).toBe(10_000);
      clock.advance(1000); // one token per key: full again after 1 s
      keyed.sweep();
      expect(keyed.size, `cycle ${cycle}`).toBe(0);
      slots.push(keyed.stats.slots);
    }
    expect(new Set(slots).size, `slab slots per cycle: ${slots.join(",")}`).toBe(1);
    expect(keyed.stats).toMatchObject({ created: 100_000, evictedIdle: 100_000, evictedLossy: 0 });
  });

  test("a flood of 20,000 new keys never exceeds maxKeys, and the limited client stays limited", () => {
    const clock = manualClock();
    const keyed = make(clock, 1000);
    expect(keyed.consume("abuser", 3).allowed).toBe(true);
    expect(keyed.allow("abuser")).toBe(false);
    clock.advance(10); // not idle: the abuser needs 3 s to be full again
    for (let i = 0; i < 20_000; i++) {
      keyed.allow(`flood-${i}`);
      if (keyed.size > 1000) throw new Error(`size ${keyed.size} after flood key ${i}`);
    }
    expect(keyed.size).toBe(1000);
    expect(keyed.allow("abuser"), "the limited client was not forgotten").toBe(false);
    expect(keyed.peek("abuser")).toMatchObject({ remaining: 0 });
    if (generic) {
      // A limiter of its own cannot be bounded: new keys are refused while none is idle.
      expect(keyed.stats).toMatchObject({ evictedLossy: 0, refused: 19_001, created: 1000 });
    } else {
      // None was ever idle: every key created past the first 1000 pushed one in use out.
      expect(keyed.stats.evictedLossy).toBe(keyed.stats.created - 1000);
      expect(keyed.stats.created).toBeGreaterThanOrEqual(20_001);
    }
  });

  test("when full, idle keys make room before any key in use is dropped", () => {
    const clock = manualClock();
    const keyed = make(clock, 10);
    for (let i = 0; i < 10; i++) keyed.allow(`old-${i}`);
    clock.advance(1000); // all ten are full again
    for (let i = 0; i < 10; i++) keyed.allow(`new-${i}`);
    expect(keyed.size).toBe(10);
    expect(keyed.stats).toMatchObject({ evictedIdle: 10, evictedLossy: 0 });
  });

  test("rejects a key that is not a string, for every method", async () => {
    const keyed = make(manualClock());
    const message = "KeyedLimiter: key must be a string, got 42";
    const bad = 42 as unknown as string;
    expect(() => keyed.allow(bad)).toThrow(new TypeError(message));
    expect(() => keyed.consume(bad)).toThrow(new TypeError(message));
    expect(() => keyed.peek(bad)).toThrow(new TypeError(message));
    expect(() => keyed.reset(bad)).toThrow(new TypeError(message));
    await expect(keyed.wait(bad)).rejects.toThrow(new TypeError(message));
    expect(keyed.size).toBe(0);
  });

  test.each([
    { name: "a string", cost: "1", error: TypeError, got: '"1" (string)' },
    { name: "NaN", cost: Number.NaN, error: RangeError, got: "NaN" },
    { name: "a negative number", cost: -1, error: RangeError, got: "-1" },
    { name: "Infinity", cost: Number.POSITIVE_INFINITY, error: RangeError, got: "Infinity" },
  ])("rejects a cost that is $name and keeps nothing", async ({ cost, error, got }) => {
    const keyed = make(manualClock());
    const c = cost as number;
    const message = `KeyedLimiter: cost must be a finite number >= 0, got ${got}`;
    expect(() => keyed.allow("a", c)).toThrow(new error(message));
    expect(() => keyed.consume("a", c)).toThrow(new error(message));
    expect(() => keyed.peek("a", c)).toThrow(new error(message));
    await expect(keyed.wait("a", c)).rejects.toThrow(
      new error(`KeyedLimiter.wait: cost must be a finite number >= 0, got ${got}`),
    );
    expect(keyed.size).toBe(0);
  });

  test("wait resolves once the key's tokens are back, first-in, first-out per key", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const keyed = make(clock);
    keyed.consume("a", 3);
    const order: string[] = [];
    const big = keyed.wait("a", 2).then((d) => order.push(`big ${d.remaining}`));
    const small = keyed.wait("a", 1).then((d) => order.push(`small ${d.remaining}`));
    const other = keyed.wait("b", 3).then((d) => order.push(`other ${d.remaining}`));
    await other;
    expect(order, "another key does not wait").toEqual(["other 0"]);
    clock.advance(2000);
    await vi.advanceTimersByTimeAsync(2000);
    await big;
    clock.advance(1000);
    await vi.advanceTimersByTimeAsync(1000);
    await small;
    expect(order).toEqual(["other 0", "big 0", "small 0"]);
  });

  test("wait rejects a cost above the capacity and a wait past maxWaitMs", async () => {
    const clock = manualClock();
    const keyed = make(clock);
    await expect(keyed.wait("a", 4)).rejects.toThrow(RangeError);
    keyed.consume("a", 3);
    const late = keyed.wait("a", 1, { maxWaitMs: 999 });
    await expect(late).rejects.toBeInstanceOf(RateLimitError);
    await expect(late).rejects.toMatchObject({ decision: { retryAfterMs: 1000 } });
  });

  test("an aborted wait rejects with the signal's reason and leaves the key idle", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const keyed = make(clock);
    keyed.consume("a", 3);
    const controller = new AbortController();
    const waiting = keyed.wait("a", 1, { signal: controller.signal });
    controller.abort(new Error("client went away"));
    await expect(waiting).rejects.toThrow("client went away");
    clock.advance(3000);
    expect(keyed.sweep()).toBe(1);
    expect(keyed.size).toBe(0);
  });

  test("maxKeys 1 keeps exactly the latest key", () => {
    const clock = manualClock();
    const keyed = make(clock, 1);
    keyed.consume("a", 3);
    expect(keyed.consume("b", 1).allowed, "b is refused on the generic path").toBe(!generic);
    expect(keyed.size).toBe(1);
    // Either way "a" never comes back fresh: kept (generic), or restored from its trace.
    expect(keyed.peek("a", 0).remaining, "a is not forgotten").toBe(0);
    if (generic) expect(keyed.stats).toMatchObject({ evictedLossy: 0, refused: 1 });
    else {
      expect(keyed.peek("b", 0).remaining).toBe(2);
      expect(keyed.stats).toMatchObject({ evictedLossy: 1, refused: 0 });
    }
  });

  test("a key with a pending waiter is not idle", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const keyed = make(clock);
    keyed.consume("a", 3);
    const waiting = keyed.wait("a", 3);
    clock.advance(5000); // the bucket is full, but its waiter has not been served yet
    expect(keyed.sweep()).toBe(0);
    expect(keyed.size).toBe(1);
    await vi.advanceTimersByTimeAsync(3000);
    // `remaining` depends on the path's waiting model (the generic path waits by the
    // limiter's own reservation, the fast path by a FIFO queue); both grant the request.
    await expect(waiting).resolves.toMatchObject({ allowed: true, limit: 3 });
  });

  test("a clock going backwards adds nothing", () => {
    const clock = manualClock(10_000);
    const keyed = make(clock);
    keyed.consume("a", 3);
    clock.set(0);
    expect(keyed.allow("a")).toBe(false);
    expect(keyed.peek("a")).toMatchObject({ retryAfterMs: 1000 });
    clock.set(11_000);
    expect(keyed.allow("a")).toBe(true);
  });

  test("the background sweep drops idle keys during quiet periods", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const keyed = make(clock);
    for (let i = 0; i < 5; i++) keyed.allow(`k${i}`);
    clock.advance(1000);
    expect(keyed.size).toBe(5);
    vi.advanceTimersByTime(60_000);
    expect(keyed.size).toBe(0);
  });
});

describe("KeyedLimiter construction", () => {
  test("defaults maxKeys to a finite bound", () => {
    const keyed = new KeyedLimiter(bucketOf3(manualClock()));
    expect(keyed.maxKeys).toBe(DEFAULT_MAX_KEYS);
    expect(Number.isFinite(DEFAULT_MAX_KEYS)).toBe(true);
  });

  const policy = bucketOf3(manualClock());
  test.each([
    {
      name: "a policy that is a number",
      make: () => new KeyedLimiter(5 as never),
      error: TypeError,
      message:
        "KeyedLimiter: policy must be a limiter with clone() or a function (key) => Limiter, got 5",
    },
    {
      name: "regression: a class, not an instance (it failed only at the first key, without new)",
      make: () => new KeyedLimiter(TokenBucket as never),
      error: TypeError,
      message:
        "KeyedLimiter: policy must be a limiter with clone() or a function (key) => Limiter, got the class TokenBucket; pass an instance: new KeyedLimiter(new TokenBucket({ ... }))",
    },
    {
      name: "a limiter without clone()",
      make: () =>
        new KeyedLimiter({
          allow: () => true,
          consume: () => undefined,
          peek: () => undefined,
          reset: () => undefined,
          isIdle: () => true,
          wait: () => undefined,
        } as never),
      error: TypeError,
      message:
        "KeyedLimiter: policy must be a limiter with clone() or a function (key) => Limiter, got an object",
    },
    {
      name: "options that are not an object",
      make: () => new KeyedLimiter(policy, 10 as never),
      error: TypeError,
      message: "KeyedLimiter: options must be an object, got 10",
    },
    {
      name: "maxKeys 0",
      make: () => new KeyedLimiter(policy, { maxKeys: 0 }),
      error: RangeError,
      message: "KeyedLimiter: maxKeys must be an integer from 1 to 268435456, got 0",
    },
    {
      name: "maxKeys 1.5",
      make: () => new KeyedLimiter(policy, { maxKeys: 1.5 }),
      error: RangeError,
      message: "KeyedLimiter: maxKeys must be an integer from 1 to 268435456, got 1.5",
    },
    {
      name: "maxKeys as a string",
      make: () => new KeyedLimiter(policy, { maxKeys: "10" as never }),
      error: TypeError,
      message: 'KeyedLimiter: maxKeys must be an integer from 1 to 268435456, got "10" (string)',
    },
    {
      name: "sweepIntervalMs 0",
      make: () => new KeyedLimiter(policy, { sweepIntervalMs: 0 }),
      error: RangeError,
      message: "KeyedLimiter: sweepIntervalMs must be a number > 0 (Infinity for no timer), got 0",
    },
    {
      name: "sweepIntervalMs as a string",
      make: () => new KeyedLimiter(policy, { sweepIntervalMs: "1000" as never }),
      error: TypeError,
      message:
        'KeyedLimiter: sweepIntervalMs must be a number > 0 (Infinity for no timer), got "1000" (string)',
    },
    {
      name: "sweepIntervalMs NaN",
      make: () => new KeyedLimiter(policy, { sweepIntervalMs: Number.NaN }),
      error: RangeError,
      message:
        "KeyedLimiter: sweepIntervalMs must be a number > 0 (Infinity for no timer), got NaN",
    },
  ])("rejects $name", ({ make, error, message }) => {
    expect(make).toThrow(new error(message));
  });

  test("sweepIntervalMs Infinity arms no timer", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const clock = manualClock();
    const keyed = new KeyedLimiter(bucketOf3(clock), { sweepIntervalMs: Number.POSITIVE_INFINITY });
    expect(vi.getTimerCount()).toBe(0);
    keyed.allow("a");
    clock.advance(1000);
    vi.advanceTimersByTime(3_600_000);
    expect(keyed.size, "nothing swept it").toBe(1);
    expect(keyed.sweep()).toBe(1);
  });

  test("the sweep timer holds its registry weakly and stops once it is collected", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    (() => {
      new KeyedLimiter(bucketOf3(manualClock()), { sweepIntervalMs: 1000 }).allow("a");
    })();
    expect(vi.getTimerCount()).toBe(1);
    // WeakRef targets stay alive until the current job ends; then a full GC collects it.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    vi.advanceTimersByTime(1000);
    expect(vi.getTimerCount(), "the timer cleared itself").toBe(0);
  });

  test("a policy function that throws leaves the registry unchanged", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter((key) => {
      if (key === "bad") throw new Error("no plan for bad");
      return bucketOf3(clock);
    });
    keyed.consume("good", 3);
    expect(() => keyed.consume("bad")).toThrow(new Error("no plan for bad"));
    expect(() => keyed.allow("bad")).toThrow(new Error("no plan for bad"));
    expect(keyed.size).toBe(1);
    expect(keyed.allow("good")).toBe(false);
  });

  test("a policy function that returns a non-limiter is a clear TypeError", () => {
    const keyed = new KeyedLimiter(() => ({ allow: () => true }) as never);
    expect(() => keyed.allow("k")).toThrow(
      new TypeError(
        'KeyedLimiter: policy must return a Limiter (allow, consume, peek, reset, isIdle, wait) for key "k", got an object',
      ),
    );
    expect(keyed.size).toBe(0);
  });

  test("calls a policy function once per key while the key is kept", () => {
    const clock = manualClock();
    const made: string[] = [];
    const keyed = new KeyedLimiter((key) => {
      made.push(key);
      return key.startsWith("vip")
        ? new TokenBucket({ capacity: 10, refillPerSecond: 1, clock })
        : bucketOf3(clock);
    });
    for (let i = 0; i < 5; i++) keyed.allow("vip-1");
    for (let i = 0; i < 5; i++) keyed.allow("user-1");
    expect(made).toEqual(["vip-1", "user-1"]);
    expect(keyed.peek("vip-1", 0)).toMatchObject({ limit: 10, remaining: 5 });
    expect(keyed.peek("user-1", 0)).toMatchObject({ limit: 3, remaining: 0 });
  });

  test("every key copies the policy's configuration, not its usage", () => {
    const clock = manualClock();
    const policy = bucketOf3(clock);
    policy.consume(3);
    const keyed = new KeyedLimiter(policy);
    expect(keyed.consume("a")).toMatchObject({ allowed: true, limit: 3, remaining: 2 });
  });

  test("the registry's timer does not keep a process alive", () => {
    // A child that only creates a registry (with a key, so the timer has work) must exit
    // on its own; the spawn timeout only stops a child that hangs, it measures nothing.
    const source = [
      'import { KeyedLimiter } from "./src/keyed/keyed-limiter.ts";',
      'import { TokenBucket } from "./src/algorithms/token-bucket.ts";',
      "const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }), { sweepIntervalMs: 1000 });",
      'keyed.allow("a");',
      'console.log("created", keyed.size);',
    ].join("\n");
    const child = spawnSync(process.execPath, ["--input-type=module"], {
      cwd: repoRoot,
      encoding: "utf8",
      input: bundle(source),
      timeout: 60_000,
    });
    expect(child.stderr).toBe("");
    expect(child.signal, "the child had to be killed: the timer held it open").toBeNull();
    expect(child.status).toBe(0);
    expect(child.stdout).toBe("created 1\n");
  });
});

describe("KeyedLimiter re-entrancy", () => {
  test("regression: a policy function that consumed its own key lost a decision (3 allowed of 2)", () => {
    const clock = manualClock();
    let calls = 0;
    const errors: unknown[] = [];
    const keyed: KeyedLimiter = new KeyedLimiter((key) => {
      calls++;
      try {
        keyed.consume(key); // re-entrant: refused, and the registry is unchanged
      } catch (error) {
        errors.push(error);
      }
      return new TokenBucket({ capacity: 2, refillPerSecond: 0, clock });
    });
    const allowed = [1, 2, 3, 4].map(() => keyed.allow("x"));
    expect(allowed).toEqual([true, true, false, false]);
    expect(calls).toBe(1);
    expect(errors).toEqual([
      new TypeError(
        'KeyedLimiter: the policy function called the registry re-entrantly for key "x"',
      ),
    ]);
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect(keyed.size).toBe(1);
    expect(keyed.stats.created).toBe(1);
  });

  test("regression: an unbounded re-entrant policy function overflowed the stack without naming the class", async () => {
    const clock = manualClock();
    const held = new TokenBucket({ capacity: 5, refillPerSecond: 0, clock });
    const keyed: KeyedLimiter = new KeyedLimiter((key) => {
      if (key === "held") return held;
      keyed.consume(key === "x" ? "x" : "held"); // "held" is kept below: served normally
      keyed.peek("other"); // a key not held: refused
      return new TokenBucket({ capacity: 2, refillPerSecond: 0, clock });
    });
    const message =
      'KeyedLimiter: the policy function called the registry re-entrantly for key "x"';
    for (const call of [() => keyed.allow("x"), () => keyed.consume("x"), () => keyed.peek("x")]) {
      expect(call).toThrow(new TypeError(message));
      expect(call).toThrow(TypeError);
    }
    await expect(keyed.wait("x")).rejects.toThrow(new TypeError(message));
    expect(keyed.size, "nothing kept for x").toBe(0);
    expect(keyed.consume("held", 3).remaining).toBe(2);
    // A call for a key the registry holds is served; one for a key it does not is refused.
    expect(() => keyed.consume("y")).toThrow(
      new TypeError(
        'KeyedLimiter: the policy function called the registry re-entrantly for key "other" (while making the limiter of key "y")',
      ),
    );
    expect(held.peek(0).remaining, "the served inner call for y took 1").toBe(1);
    expect(keyed.size).toBe(1);
    // The guard is lifted after a throw: the registry works as before.
    expect(keyed.consume("held").remaining).toBe(0);
  });

  test("regression: policy.clone() calling the registry re-entrantly is named as such", () => {
    const clock = manualClock();
    class Calling extends TokenBucket {
      registry: KeyedLimiter | undefined;
      override clone(): TokenBucket {
        this.registry?.allow("z");
        return new TokenBucket({ capacity: 1, refillPerSecond: 1, clock });
      }
    }
    const policy = new Calling({ capacity: 1, refillPerSecond: 1, clock });
    const keyed = new KeyedLimiter(policy);
    policy.registry = keyed;
    expect(() => keyed.allow("z")).toThrow(
      new TypeError('KeyedLimiter: policy.clone() called the registry re-entrantly for key "z"'),
    );
    expect(keyed.size).toBe(0);
  });
});

describe("KeyedLimiter fast path", () => {
  test("takes the slab path for every built-in policy and allOf of them, exact classes only", () => {
    const clock = manualClock();
    expect(new KeyedLimiter(bucketOf3(clock)).stats.slots).toBeGreaterThan(0);
    const leaky = new LeakyBucket({ capacity: 3, leakPerSecond: 1, clock });
    expect(new KeyedLimiter(leaky).stats.slots).toBeGreaterThan(0);
    const window = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    expect(new KeyedLimiter(window).stats.slots).toBeGreaterThan(0);
    class CustomWindow extends FixedWindow {}
    const customWindow = new CustomWindow({ limit: 3, windowMs: 1000, clock });
    expect(new KeyedLimiter(customWindow).stats.slots, "a window subclass").toBe(0);
    const counter = new SlidingWindowCounter({ limit: 3, windowMs: 1000, clock });
    expect(new KeyedLimiter(counter).stats.slots, "a sliding counter").toBeGreaterThan(0);
    class CustomCounter extends SlidingWindowCounter {}
    const customCounter = new CustomCounter({ limit: 3, windowMs: 1000, clock });
    expect(new KeyedLimiter(customCounter).stats.slots, "a counter subclass").toBe(0);
    const log = new SlidingWindowLog({ limit: 3, windowMs: 1000, clock });
    expect(new KeyedLimiter(log).stats.slots, "a sliding log").toBeGreaterThan(0);
    const buckets = allOf(bucketOf3(clock), leaky.clone());
    expect(new KeyedLimiter(buckets).stats.slots, "allOf of buckets").toBeGreaterThan(0);
    const mixed = allOf(bucketOf3(clock), window.clone());
    expect(new KeyedLimiter(mixed).stats.slots, "allOf with a window").toBeGreaterThan(0);
    const twoClocks = allOf(bucketOf3(clock), bucketOf3(manualClock()));
    expect(new KeyedLimiter(twoClocks).stats.slots, "allOf over two clocks").toBe(0);
    expect(new KeyedLimiter(() => bucketOf3(clock)).stats.slots).toBe(0);
    class Custom extends TokenBucket {}
    const custom = new Custom({ capacity: 3, refillPerSecond: 1, clock });
    expect(new KeyedLimiter(custom).stats.slots, "a subclass may override anything").toBe(0);
  });

  test("regression: a bucket subclass's overrides were dropped (slab fast path, base-class clone)", () => {
    const clock = manualClock();
    class DenyAll extends TokenBucket {
      override allow(): boolean {
        return false;
      }
      override consume(cost?: number) {
        return { ...this.peek(cost), allowed: false };
      }
    }
    class Closed extends LeakyBucket {
      override allow(): boolean {
        return false;
      }
      override consume(cost?: number) {
        return { ...this.peek(cost), allowed: false };
      }
    }
    const deny = new DenyAll({ capacity: 5, refillPerSecond: 1, clock });
    const closed = new Closed({ capacity: 5, leakPerSecond: 1, clock });
    // clone() keeps the subclass, with the same options and clock.
    expect(deny.clone()).toBeInstanceOf(DenyAll);
    expect(deny.clone()).toMatchObject({ capacity: 5, refillPerSecond: 1, clock });
    expect(closed.clone()).toBeInstanceOf(Closed);
    expect(closed.clone()).toMatchObject({ capacity: 5, leakPerSecond: 1, clock });
    // The fast-path test looks at the prototype: a shadowed `constructor` does not fool it.
    const shadowed = new DenyAll({ capacity: 5, refillPerSecond: 1, clock });
    Object.defineProperty(shadowed, "constructor", { value: TokenBucket });
    expect(new KeyedLimiter(shadowed).stats.slots, "shadowed constructor").toBe(0);
    const policies = [deny, closed, allOf(deny, closed.clone())];
    for (const [i, policy] of policies.entries()) {
      const keyed = new KeyedLimiter(policy);
      expect(keyed.stats.slots, `policy ${i}: generic path`).toBe(0);
      expect(keyed.allow("k"), `policy ${i}: allow`).toBe(false);
      expect(keyed.consume("k").allowed, `policy ${i}: consume`).toBe(false);
    }
    // An AllOf subclass is cloned as itself and takes the generic path too.
    class Both extends AllOf {}
    const both = new Both([new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }), closed]);
    expect(both.clone()).toBeInstanceOf(Both);
    expect(new KeyedLimiter(both).stats.slots).toBe(0);
    // The exact classes keep the fast path.
    expect(
      new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock })).stats.slots,
    ).toBeGreaterThan(0);
  });

  test("a bucket policy still gives a KeyedLimiter, and a subclass of it works too", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter(bucketOf3(clock));
    expect(keyed).toBeInstanceOf(KeyedLimiter);
    class Named extends KeyedLimiter {
      readonly name = "per-ip";
    }
    const named = new Named(bucketOf3(clock));
    expect(named).toBeInstanceOf(Named);
    expect(named.name).toBe("per-ip");
    expect(named.consume("a", 3)).toMatchObject({ allowed: true, remaining: 0 });
    expect(named.allow("a")).toBe(false);
    expect(named.peek("a")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    expect(named.stats.slots, "the subclass keeps the slab store").toBeGreaterThan(0);
  });

  test("reads the clock once per call", () => {
    let reads = 0;
    const clock = () => {
      reads++;
      return 0;
    };
    const keyed = new KeyedLimiter(bucketOf3(clock));
    keyed.allow("a");
    keyed.consume("a");
    keyed.peek("b");
    expect(reads).toBe(3);
  });

  test.each([
    { name: "NaN", reading: Number.NaN, error: RangeError, got: "NaN" },
    { name: "a string", reading: "5", error: TypeError, got: '"5" (string)' },
  ])("rejects a clock reading that is $name", ({ reading, error, got }) => {
    const keyed = new KeyedLimiter(bucketOf3(() => reading as number));
    expect(() => keyed.allow("a")).toThrow(
      new error(`KeyedLimiter: clock must return a finite number of milliseconds, got ${got}`),
    );
  });
});

/** One step of a random timeline. */
interface Step {
  readonly dtMs: number;
  readonly key: number;
  readonly cost: number;
  readonly op: "allow" | "consume" | "peek" | "sweep" | "burst";
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  dtMs: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 0, max: 400 }),
    fc.integer({ min: 0, max: 5000 }),
  ),
  key: fc.integer({ min: 0, max: 7 }),
  cost: fc.integer({ min: 0, max: 4 }),
  op: fc.constantFrom("allow", "consume", "consume", "peek", "sweep", "burst"),
});

const algorithms: readonly {
  name: string;
  policy: (clock: ManualClock) => Limiter & { clone(): Limiter };
}[] = [
  {
    name: "TokenBucket",
    policy: (clock) => new TokenBucket({ capacity: 4, refillPerSecond: 2, clock }),
  },
  {
    name: "LeakyBucket",
    policy: (clock) => new LeakyBucket({ capacity: 3, leakPerSecond: 1, clock }),
  },
  { name: "FixedWindow", policy: (clock) => new FixedWindow({ limit: 3, windowMs: 1000, clock }) },
  {
    // Fractional limit and a window that does not divide the clock's steps evenly.
    name: "FixedWindow (limit 2.5, windowMs 700)",
    policy: (clock) => new FixedWindow({ limit: 2.5, windowMs: 700, clock }),
  },
  {
    name: "SlidingWindowLog",
    policy: (clock) => new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }),
  },
  {
    name: "SlidingWindowCounter",
    policy: (clock) => new SlidingWindowCounter({ limit: 4, windowMs: 1000, clock }),
  },
  {
    name: "SlidingWindowCounter (limit 3.5, windowMs 700)",
    policy: (clock) => new SlidingWindowCounter({ limit: 3.5, windowMs: 700, clock }),
  },
  {
    name: "allOf(TokenBucket, LeakyBucket, TokenBucket)",
    policy: (clock) =>
      allOf(
        new TokenBucket({ capacity: 4, refillPerSecond: 2, clock }),
        new LeakyBucket({ capacity: 6, leakPerSecond: 1, clock }),
        new TokenBucket({ capacity: 3, refillPerSecond: 3, clock }),
      ),
  },
  {
    name: "allOf(TokenBucket, FixedWindow)",
    policy: (clock) =>
      allOf(
        new TokenBucket({ capacity: 4, refillPerSecond: 2, clock }),
        new FixedWindow({ limit: 6, windowMs: 3000, clock }),
      ),
  },
];

describe.each(algorithms)("eviction changes no decision: $name", ({ policy }) => {
  const policies = [
    {
      via: "policy limiter",
      keyed: (clock: ManualClock) => new KeyedLimiter(policy(clock), { maxKeys: 64 }),
    },
    {
      via: "policy function",
      keyed: (clock: ManualClock) => new KeyedLimiter(() => policy(clock).clone(), { maxKeys: 64 }),
    },
  ];
  test.each(policies)(
    "same decisions as a Map that never forgets, via $via",
    ({ keyed: makeKeyed }) => {
      let evicted = 0;
      fc.assert(
        fc.property(fc.array(stepArb, { minLength: 1, maxLength: 120 }), (steps) => {
          const clock = manualClock(1_000_000);
          const keyed = makeKeyed(clock);
          const template = policy(clock);
          const model = new MapOfLimiters(() => template.clone());
          steps.forEach(({ dtMs, key, cost, op }, i) => {
            clock.advance(dtMs);
            const k = `key-${key}`;
            const where = `step ${i} (${op} ${k} cost ${cost} at ${clock()})`;
            if (op === "allow") expect(keyed.allow(k, cost), where).toBe(model.allow(k, cost));
            else if (op === "consume")
              expect(keyed.consume(k, cost), where).toEqual(model.consume(k, cost));
            else if (op === "peek") expect(keyed.peek(k, cost), where).toEqual(model.peek(k, cost));
            else if (op === "sweep") keyed.sweep();
            else {
              // 40 free probes of other keys drive the incremental sweep.
              for (let j = 0; j < 40; j++) expect(keyed.allow(`probe-${j % 3}`, 0)).toBe(true);
            }
            expect(keyed.size, where).toBeLessThanOrEqual(8);
          });
          evicted += keyed.stats.evictedIdle;
          expect(keyed.stats.evictedLossy).toBe(0);
        }),
        { numRuns: 150 },
      );
      expect(evicted, "the timelines did evict idle keys").toBeGreaterThan(0);
    },
  );
});

describe("KeyedLimiter.refund(key, cost)", () => {
  // A log's or counter's refund may give back a float step more than `cost` (an entry of
  // 1.0000000000000002 units fits in 1): the registry used to cap its answer at `cost`, so
  // a key answered otherwise than its own limiter (and the generic path, and AllOf.refund).
  const policies: [string, (clock: Clock) => CloneableLimiter, number, number][] = [
    ["SlidingWindowLog", (clock) => new SlidingWindowLog({ limit: 3, windowMs: 1, clock }), 0.1, 1],
    [
      "SlidingWindowCounter",
      (clock) => new SlidingWindowCounter({ limit: 10, windowMs: 1000, clock }),
      0.1,
      0.1,
    ],
    [
      "allOf(SlidingWindowLog)",
      (clock) => allOf(new SlidingWindowLog({ limit: 3, windowMs: 1, clock })),
      0.1,
      1,
    ],
  ];
  test.each(policies)(
    "gives back what the key's own %s gives back, a float step over the cost too",
    (_name, make, charged, cost) => {
      const clock = manualClock(0);
      const own = make(clock);
      const keyed = new KeyedLimiter(make(clock), { sweepIntervalMs: Number.POSITIVE_INFINITY });
      const generic = new KeyedLimiter(() => make(clock), {
        sweepIntervalMs: Number.POSITIVE_INFINITY,
      });
      for (let i = 0; i < 15; i++) {
        clock.advance(1e-7);
        expect(keyed.allow("a", charged)).toBe(own.allow(charged));
        generic.allow("a", charged);
      }
      const given = own.refund!(cost);
      expect(given, "this case gives back a float step over the cost").toBeGreaterThan(cost);
      expect(keyed.refund("a", cost)).toBe(given);
      expect(generic.refund("a", cost)).toBe(given);
    },
  );
});
