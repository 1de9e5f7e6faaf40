import { describe, expect, test } from "vitest";
import { MemoryLeaseStore } from "../../../src/redis/leased/memory-store.js";

describe("MemoryLeaseStore options", () => {
  test("without a clock it uses the process clock instead of failing at first use", async () => {
    // No refill: the process clock moves between the exchange and the read, and under load
    // it moved 5 ms, 0.005 tokens at 1 per second (7.005, where 7 was expected within 0.005).
    const store = new MemoryLeaseStore({ capacity: 10, refillPerSecond: 0 });
    const exchange = await store.exchange(
      [{ key: "k", want: 3, need: 1, give: 0, charge: 0, demand: 1 }],
      "p",
      1,
    );
    expect(exchange.late ? undefined : exchange.grants[0]?.granted).toBe(3);
    expect(store.tokens("k")).toBe(7);
  });

  test("a string capacity is a TypeError, not a bucket of 100 tokens", () => {
    expect(
      () => new MemoryLeaseStore({ capacity: "10" as unknown as number, refillPerSecond: 1 }),
    ).toThrow(
      new TypeError('MemoryLeaseStore: capacity must be a finite number > 0, got "10" (string)'),
    );
  });

  test.each([
    [
      { capacity: 0, refillPerSecond: 1 },
      RangeError,
      "capacity must be a finite number > 0, got 0",
    ],
    [
      { capacity: 10, refillPerSecond: -1 },
      RangeError,
      "refillPerSecond must be a finite number >= 0, got -1",
    ],
    [
      { capacity: 10, refillPerSecond: Number.NaN },
      RangeError,
      "refillPerSecond must be a finite number >= 0, got NaN",
    ],
    [
      { capacity: 10, refillPerSecond: 1, latencyMs: -5 },
      RangeError,
      "latencyMs must be a finite number >= 0, got -5",
    ],
    [{ capacity: 10, refillPerSecond: 1, clock: 5 }, TypeError, "clock must be a function"],
    [
      { capacity: 10, refillPerSecond: 1, scheduler: "soon" },
      TypeError,
      "scheduler must be a function",
    ],
    [{ capacity: 10, refillPerSecond: 1, latency: 5 }, TypeError, 'unknown option "latency"'],
  ])("%o is refused", (options, type, message) => {
    expect(() => new MemoryLeaseStore(options as never)).toThrow(type);
    expect(() => new MemoryLeaseStore(options as never)).toThrow(`MemoryLeaseStore: ${message}`);
  });

  test("positional arguments are refused with a message naming the options object", () => {
    expect(
      () => new (MemoryLeaseStore as unknown as new (...a: unknown[]) => unknown)(10, 1),
    ).toThrow(new TypeError("MemoryLeaseStore: options must be an object, got 10"));
  });

  test("latencyMs delays answers through the scheduler", async () => {
    const queued: (() => void)[] = [];
    const store = new MemoryLeaseStore({
      capacity: 10,
      refillPerSecond: 1,
      clock: () => 0,
      latencyMs: 20,
      scheduler: (run, delayMs) => {
        expect(delayMs).toBe(20);
        queued.push(run);
        return () => {};
      },
    });
    let answered = false;
    const reply = store
      .exchange([{ key: "k", want: 2, need: 1, give: 0, charge: 0, demand: 1 }], "p", 1)
      .then((r) => {
        answered = true;
        return r;
      });
    await Promise.resolve();
    expect(answered).toBe(false);
    for (const run of queued.splice(0)) run();
    const exchange = await reply;
    expect(exchange.late ? undefined : exchange.grants[0]?.granted).toBe(2);
  });
});
