// What KeyedLimiter needs of its runtime, and what it does without it: workerd before its
// 2025-06-01 compatibility date has no WeakRef, and refuses timers in a module's global
// scope. scripts/smoke/workerd.mjs runs the built package in workerd itself.
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { drawHashSeed, hashSeeds } from "../../src/keyed/engine.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { armSweepTimer } from "../../src/keyed/options.js";
import { manualClock } from "../support/manual-clock.js";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

const bucket = (clock = manualClock()) =>
  new TokenBucket({ capacity: 2, refillPerSecond: 0, clock });

describe("a runtime without WeakRef", () => {
  test("a KeyedLimiter with default options is built and decides where WeakRef is not defined", () => {
    vi.stubGlobal("WeakRef", undefined);
    const limiter = new KeyedLimiter(bucket());
    expect([limiter.allow("a"), limiter.allow("a"), limiter.allow("a")]).toEqual([
      true,
      true,
      false,
    ]);
  });

  test("no sweep timer is armed without WeakRef (a strong one would keep the registry alive)", () => {
    vi.stubGlobal("WeakRef", undefined);
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    expect(armSweepTimer({ sweep: () => 0 }, 1000)).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("a runtime that refuses timers where the registry is built", () => {
  test("a KeyedLimiter is built in a scope where setInterval throws (workerd's global scope)", () => {
    vi.stubGlobal("setInterval", () => {
      throw new Error("Disallowed operation called within global scope.");
    });
    const limiter = new KeyedLimiter(bucket());
    expect(limiter.allow("a")).toBe(true);
    expect(limiter.sweep()).toBe(0);
  });
});

describe("a runtime with WeakRef and timers", () => {
  test("the sweep timer is armed, sweeps idle keys, and stops once the registry is gone", () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    let swept = 0;
    let live: { sweep(): number } | undefined = { sweep: () => ++swept };
    const refs: { deref(): unknown }[] = [];
    class FakeRef {
      constructor(private readonly target: unknown) {
        refs.push(this);
      }
      deref() {
        return live === undefined ? undefined : this.target;
      }
    }
    vi.stubGlobal("WeakRef", FakeRef);
    expect(armSweepTimer(live, 1000)).toBe(true);
    vi.advanceTimersByTime(2000);
    expect(swept).toBe(2);
    live = undefined; // collected
    vi.advanceTimersByTime(1000);
    expect(vi.getTimerCount()).toBe(0);
    expect(refs).toHaveLength(1);
  });

  test("a timer that is a plain number (workerd, browsers) is left as it is", () => {
    vi.stubGlobal("setInterval", () => 7);
    expect(armSweepTimer({ sweep: () => 0 }, 1000)).toBe(true);
  });
});

describe("a runtime that refuses random values where the registry is built", () => {
  test("regression: a KeyedLimiter built in workerd's global scope threw (crypto refused there); it draws its hash keys again at its first key", () => {
    const real = globalThis.crypto;
    let refuse = true;
    let drawn = 0;
    vi.stubGlobal("crypto", {
      getRandomValues: (a: Uint32Array) => {
        if (refuse) throw new Error("Disallowed operation called within global scope.");
        drawn++;
        return real.getRandomValues(a);
      },
    });
    const fixed = hashSeeds.next;
    hashSeeds.next = drawHashSeed;
    try {
      const limiter = new KeyedLimiter(bucket()); // the module's global scope
      expect(drawn).toBe(0);
      refuse = false; // a request
      expect([limiter.allow("a"), limiter.allow("a"), limiter.allow("a")]).toEqual([
        true,
        true,
        false,
      ]);
      expect(drawn).toBe(2); // the index's two 32-bit keys, from crypto
      expect(limiter.allow("b")).toBe(true);
      expect(drawn).toBe(2); // once only
    } finally {
      hashSeeds.next = fixed;
    }
  });
});
