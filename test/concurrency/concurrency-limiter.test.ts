// ConcurrencyLimiter: step tables for permits and the queue, and a property against a
// reference model (a counter and a FIFO array) for FIFO order and the limit.
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter } from "../../src/concurrency/concurrency-limiter.js";
import type { Permit } from "../../src/concurrency/permit.js";
import { RateLimitError } from "../../src/core/errors.js";

/** Lets queued promise callbacks run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

afterEach(() => {
  vi.useRealTimers();
});

describe("ConcurrencyLimiter options", () => {
  it.each([
    [{}, TypeError, /limit must be an integer from 1 to 2147483647, got undefined/],
    [{ limit: 0 }, RangeError, /limit must be an integer from 1 to 2147483647, got 0/],
    [{ limit: 1.5 }, RangeError, /limit must be an integer/],
    [{ limit: "2" }, TypeError, /limit must be an integer.*got "2" \(string\)/],
    [{ limit: 1, maxQueue: -1 }, RangeError, /maxQueue must be an integer from 0/],
    [
      { limit: 1, retryAfterMs: Number.NaN },
      RangeError,
      /retryAfterMs must be a finite number >= 0, got NaN/,
    ],
    [{ limit: 1, concurrency: 2 }, TypeError, /use "limit"/],
    [{ limit: 1, queueLimit: 2 }, TypeError, /use "maxQueue"/],
  ])("%o throws", (options, type, message) => {
    expect(() => new ConcurrencyLimiter(options as never)).toThrow(type);
    expect(() => new ConcurrencyLimiter(options as never)).toThrow(message);
  });

  it("defaults: no queue, a one-second retry hint", () => {
    const c = new ConcurrencyLimiter({ limit: 3 });
    expect([c.limit, c.maxQueue, c.retryAfterMs]).toEqual([3, 0, 1000]);
  });
});

describe("tryAcquire and release", () => {
  it("steps: permits up to the limit, null past it, release gives one back once", () => {
    const c = new ConcurrencyLimiter({ limit: 2 });
    const steps: [string, () => unknown, number][] = [];
    const a = c.tryAcquire();
    steps.push(["a", () => a !== null, c.inUse]);
    const b = c.tryAcquire();
    steps.push(["b", () => b !== null, c.inUse]);
    const none = c.tryAcquire();
    steps.push(["full", () => none === null, c.inUse]);
    a!.release();
    steps.push(["release a", () => a!.released, c.inUse]);
    a!.release();
    steps.push(["release a again: nothing", () => a!.released, c.inUse]);
    b!.release();
    steps.push(["release b", () => b!.released, c.inUse]);
    expect(steps.map(([name, ok, inUse]) => [name, ok(), inUse])).toEqual([
      ["a", true, 1],
      ["b", true, 2],
      ["full", true, 2],
      ["release a", true, 1],
      ["release a again: nothing", true, 1],
      ["release b", true, 0],
    ]);
    expect(c.available).toBe(2);
  });

  it("a double release of one permit never frees a unit another holder has", () => {
    const c = new ConcurrencyLimiter({ limit: 1 });
    const a = c.tryAcquire()!;
    a.release();
    const b = c.tryAcquire()!;
    a.release();
    expect(c.tryAcquire()).toBeNull();
    expect(c.inUse).toBe(1);
    b.release();
    expect(c.inUse).toBe(0);
  });

  it("tryAcquire never overtakes a waiter", async () => {
    const c = new ConcurrencyLimiter({ limit: 1, maxQueue: 1 });
    const a = c.tryAcquire()!;
    const waiting = c.acquire();
    a.release(); // passes straight to the waiter
    expect(c.tryAcquire()).toBeNull();
    const b = await waiting;
    expect(c.inUse).toBe(1);
    b.release();
    expect(c.inUse).toBe(0);
  });
});

describe("acquire", () => {
  it("rejects at once with a RateLimitError when the queue is full, holding nothing", async () => {
    const c = new ConcurrencyLimiter({ limit: 1, maxQueue: 1, retryAfterMs: 250 });
    const a = c.tryAcquire()!;
    const first = c.acquire();
    const second = c.acquire();
    await expect(second).rejects.toBeInstanceOf(RateLimitError);
    await expect(second).rejects.toThrow(/the queue is full/);
    await second.catch((e: RateLimitError) => {
      expect(e.decision).toEqual({
        allowed: false,
        limit: 1,
        remaining: 0,
        retryAfterMs: 250,
        resetAfterMs: 250,
      });
    });
    expect(c.waiting).toBe(1);
    a.release();
    (await first).release();
    expect([c.inUse, c.waiting]).toEqual([0, 0]);
  });

  it("maxWaitMs 0 never queues; without a queue, acquire only takes a free permit", async () => {
    const c = new ConcurrencyLimiter({ limit: 1, maxQueue: 5 });
    const a = await c.acquire({ maxWaitMs: 0 });
    await expect(c.acquire({ maxWaitMs: 0 })).rejects.toThrow(/maxWaitMs is 0/);
    expect(c.waiting).toBe(0);
    a.release();
    const noQueue = new ConcurrencyLimiter({ limit: 1 });
    const held = noQueue.tryAcquire()!;
    await expect(noQueue.acquire()).rejects.toThrow(/the queue is full/);
    held.release();
  });

  it("rejects past maxWaitMs with a RateLimitError and leaves the queue", async () => {
    vi.useFakeTimers();
    const c = new ConcurrencyLimiter({ limit: 1, maxQueue: 2 });
    const a = c.tryAcquire()!;
    const late = c.acquire({ maxWaitMs: 100 });
    const caught = late.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(99);
    expect(c.waiting).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await caught).toBeInstanceOf(RateLimitError);
    expect(String(await caught)).toMatch(/no permit within maxWaitMs 100/);
    expect(c.waiting).toBe(0);
    a.release();
    expect(c.inUse).toBe(0);
  });

  it("abort: rejects with the signal's reason and the waiters behind move up", async () => {
    const c = new ConcurrencyLimiter({ limit: 1, maxQueue: 3 });
    const a = c.tryAcquire()!;
    const controller = new AbortController();
    const aborted = c.acquire({ signal: controller.signal });
    const next = c.acquire();
    controller.abort(new Error("gone"));
    await expect(aborted).rejects.toThrow("gone");
    expect(c.waiting).toBe(1);
    a.release();
    const b = await next;
    b.release();
    expect([c.inUse, c.waiting]).toEqual([0, 0]);
    const already = AbortSignal.abort(new Error("before"));
    await expect(c.acquire({ signal: already })).rejects.toThrow("before");
  });

  it("bad options reject, never throw", async () => {
    const c = new ConcurrencyLimiter({ limit: 1 });
    await expect(c.acquire({ maxWaitMs: -1 })).rejects.toBeInstanceOf(RangeError);
    await expect(c.acquire({ signal: "no" } as never)).rejects.toBeInstanceOf(TypeError);
    await expect(c.acquire({ timeoutMs: 5 } as never)).rejects.toBeInstanceOf(TypeError);
  });
});

/** One step of the model test. */
type Step =
  | { op: "try" }
  | { op: "acquire" }
  | { op: "release"; index: number }
  | { op: "abort"; index: number };

describe("against a reference model (a count and a FIFO array)", () => {
  it("never more than limit held, waiters granted in arrival order, queue bounded", async () => {
    const step = fc.oneof(
      fc.constant<Step>({ op: "try" }),
      fc.constant<Step>({ op: "acquire" }),
      fc.nat(20).map<Step>((index) => ({ op: "release", index })),
      fc.nat(20).map<Step>((index) => ({ op: "abort", index })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.array(step, { maxLength: 40 }),
        async (limit, maxQueue, steps) => {
          const c = new ConcurrencyLimiter({ limit, maxQueue });
          // The model: ids of held permits, ids of waiters in order.
          let modelHeld = 0;
          const modelQueue: number[] = [];
          const granted: number[] = [];
          const expectedGrants: number[] = [];
          const held: Permit[] = [];
          const waiters = new Map<number, AbortController>();
          let nextId = 0;
          for (const s of steps) {
            if (s.op === "try") {
              const p = c.tryAcquire();
              const model = modelHeld < limit && modelQueue.length === 0;
              expect(p !== null).toBe(model);
              if (p !== null) {
                modelHeld++;
                held.push(p);
              }
            } else if (s.op === "acquire") {
              const id = nextId++;
              const controller = new AbortController();
              const free = modelHeld < limit && modelQueue.length === 0;
              const queued = !free && modelQueue.length < maxQueue;
              if (free) modelHeld++;
              if (queued) {
                modelQueue.push(id);
                waiters.set(id, controller);
              }
              c.acquire({ signal: controller.signal }).then(
                (p) => {
                  granted.push(id);
                  held.push(p);
                },
                () => {},
              );
              if (free) expectedGrants.push(id);
            } else if (s.op === "release") {
              const p = held[s.index % Math.max(1, held.length)];
              if (p !== undefined) {
                held.splice(held.indexOf(p), 1);
                p.release();
                const head = modelQueue.shift();
                if (head === undefined) modelHeld--;
                else {
                  waiters.delete(head);
                  expectedGrants.push(head);
                }
              }
            } else {
              const ids = [...waiters.keys()];
              const id = ids[s.index % Math.max(1, ids.length)];
              if (id !== undefined) {
                waiters.get(id)!.abort();
                waiters.delete(id);
                modelQueue.splice(modelQueue.indexOf(id), 1);
              }
            }
            await settle();
            expect(c.inUse).toBe(modelHeld);
            expect(c.waiting).toBe(modelQueue.length);
            expect(c.inUse).toBeLessThanOrEqual(limit);
            expect(c.waiting).toBeLessThanOrEqual(maxQueue);
          }
          expect(granted).toEqual(expectedGrants);
          for (const controller of waiters.values()) controller.abort();
          for (const p of held.splice(0)) p.release();
          await settle();
          expect(c.waiting).toBe(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});
