import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { rateLimit } from "../../../src/http/node.js";
import { LeasedTokenBucket, MemoryLeaseStore } from "../../../src/redis/index.js";
import type { LeasedTokenBucketOptions } from "../../../src/redis/leased/options.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";
import { type ManualScheduler, manualScheduler, settle } from "../../support/manual-scheduler.js";

interface World {
  readonly clock: ManualClock;
  readonly timers: ManualScheduler;
  readonly store: MemoryLeaseStore;
  limiter(options?: Partial<LeasedTokenBucketOptions>): LeasedTokenBucket;
}

function world(capacity: number, refillPerSecond: number, latencyMs = 0): World {
  const clock = manualClock(1000);
  const timers = manualScheduler(clock);
  const store = new MemoryLeaseStore({
    capacity,
    refillPerSecond,
    clock,
    latencyMs,
    scheduler: timers.schedule,
  });
  return {
    clock,
    timers,
    store,
    limiter: (options = {}) =>
      new LeasedTokenBucket({
        capacity,
        refillPerSecond,
        store,
        clock,
        scheduler: timers.schedule,
        ...options,
      }),
  };
}

describe("LeasedTokenBucket options", () => {
  const store = new MemoryLeaseStore({ capacity: 10, refillPerSecond: 1, clock: () => 0 });
  const base = { capacity: 10, refillPerSecond: 1, store };
  test.each([
    [{ capacity: 0 }, RangeError, "LeasedTokenBucket: capacity must be a finite number > 0, got 0"],
    [
      { maxLeaseShare: 1.5 },
      RangeError,
      "maxLeaseShare must be a share of capacity > 0 and <= 1, got 1.5",
    ],
    [
      { lowWaterShare: 1 },
      RangeError,
      "lowWaterShare must be a share of the lease > 0 and < 1, got 1",
    ],
    // A share of 0 gets the share's message, not a plain number's.
    [
      { maxLeaseShare: 0 },
      RangeError,
      "maxLeaseShare must be a share of capacity > 0 and <= 1, got 0",
    ],
    [
      { lowWaterShare: 0 },
      RangeError,
      "lowWaterShare must be a share of the lease > 0 and < 1, got 0",
    ],
    // Infinity is the default, so 0 is not told "a finite number".
    [
      { maxLeaseTokens: 0 },
      RangeError,
      "maxLeaseTokens must be a number > 0 (Infinity: only maxLeaseShare caps a lease), got 0",
    ],
    [
      { maxLeaseTokens: "10" },
      TypeError,
      'maxLeaseTokens must be a number > 0 (Infinity: only maxLeaseShare caps a lease), got "10"',
    ],
    [
      { maxLeaseShare: "0.5" },
      TypeError,
      'maxLeaseShare must be a share of capacity > 0 and <= 1, got "0.5"',
    ],
    [{ initialCredit: -1 }, RangeError, "initialCredit must be a finite number >= 0, got -1"],
    [{ batchWindowMs: 0 }, RangeError, "batchWindowMs must be a finite number > 0, got 0"],
    [{ maxKeys: 1.5 }, RangeError, "maxKeys must be an integer from 1 to"],
    [{ failure: "sometimes" }, RangeError, "failure must be 'local', 'open', 'closed', 'throw'"],
    [{ credit: 3 }, TypeError, 'unknown option "credit" (use "initialCredit")'],
    [{ batchWindowMS: 3 }, TypeError, 'did you mean "batchWindowMs"?'],
    [{ store: {} }, TypeError, "store must be a LeaseStore"],
    [{ record: "yes" }, TypeError, "record must be a boolean"],
    [{ circuit: {} }, TypeError, 'unknown option "circuit" (LeasedTokenBucket has no circuit'],
  ] as const)("%o throws", (extra, type, message) => {
    expect(() => new LeasedTokenBucket({ ...base, ...(extra as object) } as never)).toThrow(type);
    expect(() => new LeasedTokenBucket({ ...base, ...(extra as object) } as never)).toThrow(
      message,
    );
  });

  test("a missing client or limit is named, with a call that gives them all", () => {
    // Before: "client must be a RedisLike (...), got undefined", one problem at a time.
    expect(() => new LeasedTokenBucket({ capacity: 100 } as never)).toThrow(
      'LeasedTokenBucket: missing options "client" and "refillPerSecond"; for example: new LeasedTokenBucket({ client: fromIoredis(redis), capacity: 100, refillPerSecond: 50 })',
    );
    expect(() => new LeasedTokenBucket({ store } as never)).toThrow(
      'LeasedTokenBucket: missing options "capacity" and "refillPerSecond"; for example: new LeasedTokenBucket({ store, capacity: 100, refillPerSecond: 50 })',
    );
  });

  test("a raw client is refused with the wrapper to use", () => {
    expect(
      () => new LeasedTokenBucket({ capacity: 1, refillPerSecond: 1, client: {} as never }),
    ).toThrow("client must be a RedisLike");
  });

  test("bad keys and costs throw at the boundary", () => {
    const limiter = new LeasedTokenBucket({ ...base, maxKeyLength: 4 });
    expect(() => limiter.consume(42 as never)).toThrow(
      "LeasedTokenBucket.consume: key must be a string, got 42",
    );
    expect(() => limiter.consume("toolong")).toThrow(RangeError);
    expect(() => limiter.allow("k", -1)).toThrow("cost must be a finite number >= 0, got -1");
    expect(() => limiter.peek("k", Number.NaN)).toThrow(RangeError);
    void limiter.close();
  });
});

describe("LeasedTokenBucket decisions (deterministic store, clock and timers)", () => {
  test("step table: credit for a new key, then leases; the credit is charged with the batch", async () => {
    const w = world(10, 1);
    const limiter = w.limiter({ initialCredit: 1, batchWindowMs: 5 });
    // Credit admits the first unit; the second waits for the lease.
    expect(limiter.consume("a")).toMatchObject({ allowed: true, source: "credit", remaining: 9 });
    expect(limiter.consume("a")).toMatchObject({
      allowed: false,
      source: "pending",
      remaining: 0,
      retryAfterMs: 5,
    });
    await w.timers.advance(5);
    // The lease: target 1..cap (2 = 0.2 x 10), the debt of 1 paid from it.
    const first = w.store.record("a").taken;
    expect(first).toBeGreaterThanOrEqual(2);
    expect(limiter.consume("a")).toMatchObject({ allowed: true, source: "lease" });
    expect(limiter.stats.creditAdmitted).toBe(1);
    await limiter.close();
  });

  test("a new key's credit admission reported the remaining before it, and its pending denials the shared count", async () => {
    const w = world(100, 10);
    const limiter = w.limiter({ batchWindowMs: 5 });
    // Step table: [advance ms, decision]; the first lease is on its way until the batch runs.
    const steps: [number, Partial<ReturnType<LeasedTokenBucket["consume"]>>][] = [
      [0, { allowed: true, source: "credit", remaining: 99, retryAfterMs: 0 }],
      [0, { allowed: false, source: "pending", remaining: 0, retryAfterMs: 5 }],
      [2, { allowed: false, source: "pending", remaining: 0 }],
      [3, { allowed: true, source: "lease" }],
    ];
    for (const [ms, expected] of steps) {
      await w.timers.advance(ms);
      expect(limiter.consume("k")).toMatchObject(expected);
    }
    // The lease took 20 (0.2 x 100), paid the debt of 1 and spent 1: 98 left in all.
    expect(limiter.peek("k", 0)).toMatchObject({ allowed: true, source: "lease", remaining: 98 });
    await limiter.close();
  });

  test("initialCredit 0 denies until the first lease", async () => {
    const w = world(10, 1);
    const limiter = w.limiter({ initialCredit: 0 });
    expect(limiter.peek("a")).toMatchObject({ allowed: false, source: "pending", remaining: 0 });
    expect(limiter.consume("a")).toMatchObject({ allowed: false, source: "pending", remaining: 0 });
    await w.timers.advance(5);
    expect(limiter.consume("a")).toMatchObject({ allowed: true, source: "lease" });
    await limiter.close();
  });

  test("an empty shared bucket: denied with the server's wait, and no calls until then", async () => {
    const w = world(2, 1);
    const limiter = w.limiter({ initialCredit: 0, maxLeaseShare: 1 });
    limiter.consume("a");
    await w.timers.advance(5);
    expect(limiter.consume("a").allowed).toBe(true);
    expect(limiter.consume("a").allowed).toBe(true);
    // The bucket had 2 and both went into this lease: the next exchange hears "empty".
    expect(limiter.consume("a").allowed).toBe(false);
    await w.timers.advance(5);
    const calls = w.store.roundTrips;
    const denied = limiter.consume("a");
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeGreaterThan(900);
    for (let i = 0; i < 50; i++) {
      limiter.consume("a");
      await w.timers.advance(10);
    }
    expect(w.store.roundTrips - calls).toBeLessThanOrEqual(2); // heartbeats only
    await limiter.close();
  });

  test("at no refill, a process once denied takes the tokens another gives back", async () => {
    // At a rate of 0 the store answers an empty bucket's wait as Infinity: only give-backs
    // (idle leases, resets, refunds, close) fill it again. The denied process never asked
    // again while it kept asking locally, so what another process gave back stayed unused.
    const w = world(10, 0);
    const options = { initialCredit: 0, maxLeaseShare: 0.5, idleAfterMs: 1000 };
    const a = w.limiter(options);
    const b = w.limiter(options);
    let admitted = 0;
    for (let i = 0; i < 5 && admitted === 0; i++) {
      if (a.allow("k")) admitted++;
      await w.timers.advance(5);
    }
    expect(admitted).toBe(1); // a holds the rest of its lease
    for (let i = 0; i < 40; i++) {
      if (b.allow("k")) admitted++;
      await w.timers.advance(5);
    }
    expect(b.consume("k").allowed).toBe(false);
    expect(admitted).toBeLessThan(10);
    // a goes idle: its unused tokens go back; b keeps asking, and gets them.
    for (let i = 0; i < 100; i++) {
      if (b.allow("k")) admitted++;
      await w.timers.advance(50);
    }
    expect(admitted).toBe(10);
    await a.close();
    await b.close();
  });

  test("keys of one batch window go in one exchange, at most one in flight per key", async () => {
    const w = world(100, 10, 20);
    const limiter = w.limiter({ initialCredit: 0, batchWindowMs: 5 });
    await w.timers.advance(1);
    const before = limiter.stats.exchanges;
    for (let i = 0; i < 50; i++) limiter.consume(`k${i}`);
    for (let i = 0; i < 50; i++) limiter.consume(`k${i}`);
    await w.timers.advance(5);
    expect(limiter.stats.exchanges - before).toBe(1);
    // In flight (latency 20 ms): more denials add no exchange.
    for (let i = 0; i < 50; i++) limiter.consume(`k${i}`);
    await w.timers.advance(10);
    expect(limiter.stats.exchanges - before).toBe(1);
    await w.timers.advance(20);
    expect(limiter.consume("k0").allowed).toBe(true);
    const closing = limiter.close();
    await w.timers.advance(100);
    await closing;
  });

  test("a hot key's lease grows with its rate, capped by maxLeaseShare, and round trips stay rare", async () => {
    const w = world(1000, 1000);
    const limiter = w.limiter({ initialCredit: 0, maxLeaseShare: 0.25, leaseHorizonMs: 1000 });
    let allowed = 0;
    for (let ms = 0; ms < 5000; ms++) {
      // 500 per second: half the refill rate.
      if (ms % 2 === 0 && limiter.allow("hot")) allowed++;
      await w.timers.advance(1);
    }
    expect(allowed).toBeGreaterThanOrEqual(2490);
    const leases = limiter.stats.exchanges;
    expect(leases / (allowed / 100)).toBeLessThanOrEqual(1);
    const held = w.store.record("hot").taken - w.store.record("hot").given - allowed;
    expect(held).toBeLessThanOrEqual(250);
    await limiter.close();
  });

  test("a second close() resolves only once the tokens went back", async () => {
    const w = world(100, 0, 20);
    const limiter = w.limiter({ initialCredit: 0, maxLeaseShare: 0.5 });
    limiter.consume("k");
    await w.timers.advance(50);
    expect(limiter.consume("k").allowed).toBe(true);
    expect(w.store.tokens("k")).toBeLessThan(99);
    void limiter.close();
    let second = false;
    void limiter.close().then(() => {
      second = true;
    });
    await settle();
    expect(second).toBe(false);
    await w.timers.advance(100);
    expect(second).toBe(true);
    expect(w.store.tokens("k")).toBeCloseTo(99, 9);
  });

  test("idle keys and close() give unused tokens back", async () => {
    const w = world(100, 0);
    const limiter = w.limiter({ initialCredit: 0, idleAfterMs: 1000, maxLeaseShare: 0.5 });
    let admitted = 0;
    for (let i = 0; i < 30; i++) {
      if (limiter.allow("idle")) admitted++;
      await w.timers.advance(1);
    }
    // Tokens sit in this process's lease, beyond what it admitted.
    expect(100 - w.store.tokens("idle")).toBeGreaterThan(admitted);
    await w.timers.advance(3000);
    expect(w.store.tokens("idle")).toBeCloseTo(100 - admitted, 9);
    let closing = 0;
    for (let i = 0; i < 50; i++) {
      if (limiter.allow("closing")) closing++;
      await w.timers.advance(1);
    }
    expect(100 - w.store.tokens("closing")).toBeGreaterThan(0);
    await limiter.close();
    expect(w.store.tokens("closing")).toBeCloseTo(100 - closing, 9);
  });

  test("Redis down: after the lease runs out, a local bucket of capacity/N; recovery charges it, no burst", async () => {
    const w = world(40, 4);
    const errors: string[] = [];
    const recoveries: number[] = [];
    const others = [w.limiter(), w.limiter(), w.limiter()];
    const limiter = w.limiter({
      initialCredit: 0,
      onError: (e) => errors.push(e.operation),
      onRecover: (e) => recoveries.push(e.failedCalls),
    });
    await w.timers.advance(5);
    expect(limiter.liveProcesses).toBe(4);
    limiter.consume("k");
    await w.timers.advance(5);
    w.store.failing = true;
    const sources = new Set<string>();
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      const d = limiter.consume("k");
      sources.add(d.source);
      if (d.allowed) admitted++;
      await w.timers.advance(5);
    }
    expect(sources.has("local")).toBe(true);
    expect(errors).toContain("lease");
    // The lease (at most 0.2 x 40 = 8) plus the local share of 40/4 = 10 and its refill.
    expect(admitted).toBeLessThanOrEqual(8 + 10 + 1);
    w.store.failing = false;
    await w.timers.advance(1000);
    const d = limiter.consume("k");
    expect(d.source).toBe("lease");
    expect(recoveries.length).toBeGreaterThan(0);
    await Promise.all([limiter.close(), ...others.map((o) => o.close())]);
  });

  test("property: N limiters on one store never admit more than the store gave out, plus N x credit", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(0, 1, 3),
        fc.array(
          fc.tuple(fc.nat(3), fc.nat(2), fc.integer({ min: 0, max: 30 }), fc.constantFrom(1, 2)),
          {
            maxLength: 120,
          },
        ),
        async (n, credit, steps) => {
          const w = world(10, 5);
          const limiters = Array.from({ length: n }, () => w.limiter({ initialCredit: credit }));
          const admitted = [0, 0, 0];
          for (const [who, key, gapMs, cost] of steps) {
            const l = limiters[who % n] as LeasedTokenBucket;
            if (l.allow(`k${key}`, cost)) admitted[key] = (admitted[key] as number) + cost;
            await w.timers.advance(gapMs);
          }
          for (let key = 0; key < 3; key++) {
            const r = w.store.record(`k${key}`);
            expect(admitted[key] as number).toBeLessThanOrEqual(
              r.taken - r.given + n * credit + 1e-9,
            );
          }
          await Promise.all(limiters.map((l) => l.close()));
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("LeasedTokenBucket in rateLimit of tollgate/http", () => {
  test("drops in as a keyed limiter: synchronous decisions, 429 after the limit", async () => {
    const w = world(3, 0);
    const limiter = w.limiter({ initialCredit: 0, maxLeaseShare: 1 });
    const limit = rateLimit({ limiter, key: () => "client" });
    const statuses: number[] = [];
    const run = async () => {
      let status = 200;
      const res = {
        statusCode: 200,
        headersSent: false,
        setHeader() {},
        getHeader() {
          return undefined;
        },
        end() {
          status = (res as { statusCode: number }).statusCode;
        },
      };
      await limit(
        { headers: {}, socket: { remoteAddress: "192.0.2.1" } } as never,
        res as never,
        () => {
          status = 200;
        },
      );
      statuses.push(status);
    };
    await run(); // denied: no lease yet (credit 0)
    await w.timers.advance(5);
    for (let i = 0; i < 4; i++) await run();
    // Spent with refill 0: it can never pass again, so 403, not a 429 to retry.
    expect(statuses).toEqual([429, 200, 200, 200, 403]);
    await limiter.close();
  });

  test("a 429 while the first lease is pending said 5 were left; it says 0", async () => {
    const w = world(100, 10);
    const limiter = w.limiter();
    const limit = rateLimit({ limiter, key: () => "client", policy: "api" });
    const run = async () => {
      const headers = new Map<string, unknown>();
      const res = {
        statusCode: 200,
        headersSent: false,
        setHeader(name: string, value: unknown) {
          headers.set(name.toLowerCase(), value);
        },
        getHeader(name: string) {
          return headers.get(name.toLowerCase());
        },
        end() {},
      };
      await limit(
        { headers: {}, socket: { remoteAddress: "192.0.2.1" } } as never,
        res as never,
        () => {},
      );
      return { status: res.statusCode, rate: String(headers.get("ratelimit")) };
    };
    expect(await run()).toEqual({ status: 200, rate: '"api";r=99;t=1' });
    expect(await run()).toMatchObject({ status: 429, rate: expect.stringMatching(/^"api";r=0;/) });
    await limiter.close();
  });
});
