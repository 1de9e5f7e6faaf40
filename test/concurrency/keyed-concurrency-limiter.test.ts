// KeyedConcurrencyLimiter: per-key limits, keys forgotten once idle, and the bounds a
// hostile client meets (maxKeys, maxWaiters, maxKeyLength).
import { describe, expect, it } from "vitest";
import { KeyedConcurrencyLimiter } from "../../src/concurrency/keyed-concurrency-limiter.js";
import { RateLimitError } from "../../src/core/errors.js";

describe("KeyedConcurrencyLimiter", () => {
  it("limits each key on its own and forgets a key once it holds nothing", () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1 });
    const a = k.tryAcquire("a")!;
    expect(k.tryAcquire("a")).toBeNull();
    const b = k.tryAcquire("b")!;
    expect([k.size, k.inUse, k.inUseOf("a"), k.inUseOf("c")]).toEqual([2, 2, 1, 0]);
    a.release();
    a.release();
    expect([k.size, k.inUse]).toEqual([1, 1]);
    b.release();
    expect([k.size, k.inUse]).toEqual([0, 0]);
  });

  it("a refused tryAcquire or acquire keeps nothing for a new key", async () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1 });
    await expect(k.acquire("x", { maxWaitMs: -1 })).rejects.toBeInstanceOf(RangeError);
    expect(k.size).toBe(0);
  });

  it("past maxKeys a new key is refused, and no key in use is dropped", async () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1, maxKeys: 2, maxQueue: 1 });
    const a = k.tryAcquire("a")!;
    const b = k.tryAcquire("b")!;
    expect(k.tryAcquire("c")).toBeNull();
    await expect(k.acquire("c")).rejects.toBeInstanceOf(RateLimitError);
    expect([k.size, k.refused, k.inUseOf("a")]).toEqual([2, 2, 1]);
    a.release();
    const c = k.tryAcquire("c")!;
    expect(k.size).toBe(2);
    b.release();
    c.release();
    expect(k.size).toBe(0);
  });

  it("maxWaiters bounds the waiters of all keys together", async () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1, maxQueue: 5, maxWaiters: 2 });
    const held = ["a", "b", "c"].map((key) => k.tryAcquire(key)!);
    const w1 = k.acquire("a");
    const w2 = k.acquire("b");
    await expect(k.acquire("c")).rejects.toThrow(/the queue is full/);
    expect(k.waiting).toBe(2);
    for (const p of held) p.release();
    (await w1).release();
    (await w2).release();
    expect([k.size, k.inUse, k.waiting]).toEqual([0, 0, 0]);
  });

  it("a waiter of a key is served in order and the key is kept while it waits", async () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1, maxQueue: 2 });
    const first = k.tryAcquire("a")!;
    const order: number[] = [];
    const w1 = k.acquire("a").then((p) => {
      order.push(1);
      return p;
    });
    const w2 = k.acquire("a").then((p) => {
      order.push(2);
      return p;
    });
    first.release();
    const p1 = await w1;
    expect(k.inUse).toBe(1);
    p1.release();
    (await w2).release();
    expect(order).toEqual([1, 2]);
    expect(k.size).toBe(0);
  });

  it("checks keys and options at the boundary", () => {
    const k = new KeyedConcurrencyLimiter({ limit: 1, maxKeyLength: 4 });
    expect(() => k.tryAcquire(5 as never)).toThrow(/key must be a string, got 5/);
    expect(() => k.tryAcquire("12345")).toThrow(/maxKeyLength \(4\)/);
    expect(() => new KeyedConcurrencyLimiter({ limit: 1, maxKeys: 0 })).toThrow(
      /maxKeys must be an integer from 1 to 268435456, got 0/,
    );
    expect(() => new KeyedConcurrencyLimiter({ limit: 1, whenFull: "evict" } as never)).toThrow(
      /always refuses new keys/,
    );
  });
});

describe("the settings a KeyedConcurrencyLimiter hands each key's limiter, unchecked", () => {
  it("cannot be changed after the check: a new key still gets the checked limit", () => {
    // Every key's limiter skips the option check for these settings (checked once), so a
    // change to the shared object would reach new keys unchecked (NaN refuses forever,
    // Infinity admits all). Frozen, the change is refused.
    const keyed = new KeyedConcurrencyLimiter({ limit: 1 });
    const settings = (keyed as unknown as { settings: { limit: number } }).settings;
    expect(Object.isFrozen(settings)).toBe(true);
    expect(() => {
      settings.limit = Number.POSITIVE_INFINITY;
    }).toThrow(TypeError);
    expect(keyed.tryAcquire("new")).not.toBeNull();
    expect(keyed.tryAcquire("new")).toBeNull();
  });
});
