import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Clock, Limiter, Receipt } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import {
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import {
  deleteTestKeys,
  HEALTHY_TIMEOUT_MS,
  ioredisAdapter,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

// Refunds, blocks and reconfigure of the Redis limiters against a private redis-server,
// with an explicit clock: step tables, and random timelines beside the in-memory classes.

const redis = useRedis();
let conn: TestClient;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});

const maxTtlMs = 60_000;

interface Shared {
  consume(key: string, cost?: number): Promise<object>;
  charge(key: string, cost?: number): Promise<Receipt & { source: string }>;
  peek(key: string, cost?: number): Promise<object>;
  refund(key: string | Receipt, cost?: number): Promise<number>;
  block(key: string, durationMs: number): Promise<number>;
  blockOnce(key: string, durationMs: number): Promise<number>;
  reset(key: string): Promise<void>;
  reconfigure(options: object): void;
}

interface Twin {
  readonly name: string;
  readonly options: fc.Arbitrary<[number, number]>;
  /** The size option's name, for reconfigure (`capacity` or `limit`). */
  readonly size: string;
  memory(
    clock: Clock,
    a: number,
    b: number,
  ): Limiter & {
    reconfigure(o: object): void;
    charge(cost?: number): Receipt;
    refund(receipt: Receipt, units?: number): number;
  };
  /** True when refunds without a receipt are refused (a fixed window). */
  readonly receiptsOnly?: boolean;
  redis(client: RedisLike, clock: Clock, prefix: string, a: number, b: number): Shared;
}

const size = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constantFrom(0.5, 2.5, 7.25));
const rate = fc.oneof(fc.integer({ min: 0, max: 20 }), fc.constantFrom(0.3, 1000 / 7));
const windowMs = fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.constantFrom(0.5, 1000 / 3));

const TWINS: readonly Twin[] = [
  {
    name: "TokenBucket",
    size: "capacity",
    options: fc.tuple(size, rate),
    memory: (clock, capacity, refillPerSecond) =>
      new TokenBucket({ capacity, refillPerSecond, clock }),
    redis: (client, clock, prefix, capacity, refillPerSecond) =>
      new RedisTokenBucket({
        client,
        clock,
        prefix,
        capacity,
        refillPerSecond,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "LeakyBucket",
    size: "capacity",
    options: fc.tuple(size, rate),
    memory: (clock, capacity, leakPerSecond) => new LeakyBucket({ capacity, leakPerSecond, clock }),
    redis: (client, clock, prefix, capacity, leakPerSecond) =>
      new RedisLeakyBucket({
        client,
        clock,
        prefix,
        capacity,
        leakPerSecond,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "FixedWindow",
    size: "limit",
    receiptsOnly: true,
    options: fc.tuple(size, windowMs),
    memory: (clock, limit, w) => new FixedWindow({ limit, windowMs: w, clock }),
    redis: (client, clock, prefix, limit, w) =>
      new RedisFixedWindow({
        client,
        clock,
        prefix,
        limit,
        windowMs: w,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "SlidingWindowLog",
    size: "limit",
    options: fc.tuple(size, windowMs),
    memory: (clock, limit, w) => new SlidingWindowLog({ limit, windowMs: w, clock }),
    redis: (client, clock, prefix, limit, w) =>
      new RedisSlidingWindowLog({
        client,
        clock,
        prefix,
        limit,
        windowMs: w,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "SlidingWindowCounter",
    size: "limit",
    options: fc.tuple(size, windowMs),
    memory: (clock, limit, w) => new SlidingWindowCounter({ limit, windowMs: w, clock }),
    redis: (client, clock, prefix, limit, w) =>
      new RedisSlidingWindowCounter({
        client,
        clock,
        prefix,
        limit,
        windowMs: w,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
];

const step = fc.record({
  dtMs: fc.oneof(fc.integer({ min: 0, max: 1500 }), fc.double({ min: 0, max: 3000, noNaN: true })),
  cost: fc.oneof(fc.constantFrom(0, 1, 1, 2, 0.5, 3), fc.double({ min: 0, max: 12, noNaN: true })),
  op: fc.constantFrom("consume", "consume", "peek", "refund", "refund", "resize"),
});

/**
 * A consume (through `charge`, keeping both receipts, for the refunds) or a peek, on both
 * limiters: the same decision.
 */
async function decideBoth(
  memory: ReturnType<Twin["memory"]>,
  shared: Shared,
  receipts: [Receipt, Receipt][],
  op: string,
  cost: number,
  where: string,
): Promise<void> {
  if (op === "peek") {
    expect(await shared.peek("k", cost), where).toEqual({ ...memory.peek(cost), source: "redis" });
    return;
  }
  const a = memory.charge(cost);
  const b = await shared.charge("k", cost);
  const { allowed, limit, remaining, retryAfterMs, resetAfterMs } = b;
  expect(
    { allowed, limit, remaining, retryAfterMs, resetAfterMs, source: b.source },
    where,
  ).toEqual({
    allowed: a.allowed,
    limit: a.limit,
    remaining: a.remaining,
    retryAfterMs: a.retryAfterMs,
    resetAfterMs: a.resetAfterMs,
    source: "redis",
  });
  expect(b.units, where).toBe(a.units);
  receipts.push([a, b]);
}

/**
 * A refund of `cost` on both: without a receipt (a fixed window: through the newest receipt
 * instead), the same units given back; through the newest receipt for the windows (the
 * sliding log in Redis gives back only out of its newest entry, as the newest receipt's is).
 * A bucket's receipt in Redis does not count what other refunds credited since its charge
 * (docs/redis.md#refunds-and-blocks), so a bucket refunds here without one.
 */
async function refundBoth(
  twin: Twin,
  memory: ReturnType<Twin["memory"]>,
  shared: Shared,
  receipts: [Receipt, Receipt][],
  cost: number,
  where: string,
): Promise<void> {
  const newest = receipts.at(-1);
  if (twin.receiptsOnly || (twin.size === "limit" && newest !== undefined && cost > 1)) {
    if (newest === undefined) return;
    const [a, b] = newest;
    const given = memory.refund(a, cost);
    // The lazy rebase of the Redis log reads an entry's own units a float step apart.
    expect(await shared.refund(b, cost), where).toBeCloseTo(given, 12);
    return;
  }
  const given = (memory as unknown as { refund(c: number): number }).refund(cost);
  expect(await shared.refund("k", cost), where).toBe(given);
}

describe.skipIf(!redis.available)("Redis refund and reconfigure decide as in memory", () => {
  test.each(TWINS)(
    "$name: random timelines with refunds and new sizes",
    async (twin) => {
      await fc.assert(
        fc.asyncProperty(
          twin.options,
          fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.constant(1_764_480_000_123.25)),
          fc.array(step, { minLength: 1, maxLength: 40 }),
          async ([a, b], t0, steps) => {
            const clock = manualClock(t0);
            const memory = twin.memory(clock, a, b);
            const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), a, b);
            const receipts: [Receipt, Receipt][] = [];
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost})`;
              if (s.op === "refund") {
                await refundBoth(twin, memory, shared, receipts, s.cost, where);
              } else if (s.op === "resize") {
                // A new size only: the state carries over alike (a rate or a length
                // change is carried over at the key's next call in Redis: step tables below).
                const next = { [twin.size]: s.cost > 0 ? s.cost : 1 };
                memory.reconfigure(next);
                shared.reconfigure(next);
              } else {
                await decideBoth(memory, shared, receipts, s.op, s.cost, where);
              }
            }
          },
        ),
        { numRuns: Number(process.env["FC_RUNS"] ?? 40) },
      );
    },
    60_000,
  );

  // Long, dense timelines: the sliding log's chunks, rebase and merging under refunds.
  test.each(TWINS)(
    "$name: long dense timelines with refunds",
    async (twin) => {
      const dense = fc.record({
        dtMs: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 40 })),
        cost: fc.constantFrom(1e-3, 1e-3, 0.01, 0.1, 0.25, 0.5, 1, 2.5),
        op: fc.constantFrom("consume", "consume", "consume", "peek", "refund"),
      });
      await fc.assert(
        fc.asyncProperty(
          fc.tuple(fc.constantFrom(3, 10, 100), fc.constantFrom(500, 1000, 3.5)),
          fc.array(dense, { minLength: 100, maxLength: 400 }),
          async ([a, b], steps) => {
            const clock = manualClock(1000);
            const memory = twin.memory(clock, a, b);
            const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), a, b);
            const receipts: [Receipt, Receipt][] = [];
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost})`;
              if (s.op === "refund") {
                await refundBoth(twin, memory, shared, receipts, s.cost, where);
                continue;
              }
              await decideBoth(memory, shared, receipts, s.op, s.cost, where);
            }
          },
        ),
        { numRuns: Math.ceil(Number(process.env["FC_RUNS"] ?? 40) / 4) },
      );
    },
    120_000,
  );

  test.each(TWINS)("$name: consume then refund of the same cost is as no consume", async (twin) => {
    const clock = manualClock(5_000);
    const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), 5, 100);
    const before = await shared.peek("k", 1);
    const receipt = await shared.charge("k", 3);
    expect(await shared.refund(receipt)).toBe(3);
    expect(await shared.peek("k", 1)).toEqual(before);
    // A fresh state is no key: the refund deleted it.
    expect(
      await conn.client.evalScript("return redis.call('KEYS', ARGV[1])", [], ["*k"]),
    ).toSatisfy((keys: unknown) => Array.isArray(keys));
  });

  test("a refund of a key without state creates none", async () => {
    const clock = manualClock(1000);
    const prefix = uniquePrefix("refund-none");
    const bucket = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix,
      capacity: 3,
      refillPerSecond: 1,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    await bucket.refund("nobody", 2);
    const keys = await conn.client.evalScript(
      "return redis.call('KEYS', ARGV[1])",
      [],
      [`${prefix}*`],
    );
    expect(keys).toEqual([]);
    expect((await bucket.peek("nobody", 3)).remaining).toBe(0);
  });
});

describe.skipIf(!redis.available)(
  "a refund in the next window does not come off that window's count",
  () => {
    // Limit 5 per 1 s: 5 charged in [0, 1000), 5 in [1000, 2000), the first five given back
    // after the boundary. Before receipts the refund came off the current window, so 10
    // passed in one window. The same code runs against a build without `charge` (consume,
    // and a refund of the key): that is how the old one was shown to admit 10.
    test("RedisFixedWindow", async () => {
      const clock = manualClock(0);
      const window = new RedisFixedWindow({
        client: conn.client,
        clock,
        prefix: uniquePrefix("next-window"),
        limit: 5,
        windowMs: 1000,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      });
      const charging = window as unknown as { charge?: RedisFixedWindow["charge"] };
      const taken: (Receipt | undefined)[] = [];
      for (let i = 0; i < 5; i++) {
        if (typeof charging.charge === "function") taken.push(await window.charge("k"));
        else {
          await window.consume("k");
          taken.push(undefined);
        }
      }
      clock.set(1000);
      let admitted = 0;
      for (let i = 0; i < 5; i++) if ((await window.consume("k")).allowed) admitted++;
      for (const receipt of taken) {
        if (receipt === undefined)
          await (window.refund as (k: string, c: number) => Promise<unknown>)("k", 1);
        else await window.refund(receipt);
      }
      for (let i = 0; i < 5; i++) if ((await window.consume("k")).allowed) admitted++;
      expect(admitted).toBe(5);
    });
  },
);

describe.skipIf(!redis.available)("Redis block", () => {
  const tb = (clock: Clock, prefix = uniquePrefix("block")) =>
    new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix,
      capacity: 2,
      refillPerSecond: 1,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });

  test("step table: denied with the time left until the block ends, then the usage decides", async () => {
    const clock = manualClock(10_000);
    const shared = tb(clock);
    const memory = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
    const steps: [dtMs: number, op: string, arg: number][] = [
      [0, "consume", 1],
      [0, "block", 5000],
      [0, "consume", 1],
      [1000, "peek", 1],
      [1500, "consume", 2],
      [0, "block", 1000], // a shorter block leaves the longer one
      [2499, "consume", 1],
      [1, "consume", 1], // the block is over: the bucket (full again) decides
      [0, "consume", 1],
      [0, "consume", 1],
    ];
    for (const [i, [dt, op, arg]] of steps.entries()) {
      clock.advance(dt);
      const where = `step ${i} at ${clock()} ${op}(${arg})`;
      if (op === "block") {
        memory.block("k", arg);
        await shared.block("k", arg);
      } else {
        const expected = op === "peek" ? memory.peek("k", arg) : memory.consume("k", arg);
        const actual = op === "peek" ? shared.peek("k", arg) : shared.consume("k", arg);
        expect(await actual, where).toEqual({ ...expected, source: "redis" });
      }
    }
  });

  test.each(TWINS)("$name: a blocked key is denied, every process sees it", async (twin) => {
    const clock = manualClock(1_000);
    const prefix = uniquePrefix(twin.name);
    const a = twin.redis(conn.client, clock, prefix, 5, 100);
    const b = twin.redis(conn.client, clock, prefix, 5, 100);
    expect(await a.block("k", 3000)).toBe(3000);
    const denied = (await b.consume("k", 1)) as { allowed: boolean; retryAfterMs: number };
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeGreaterThanOrEqual(3000);
    clock.advance(3000);
    expect(((await b.consume("k", 1)) as { allowed: boolean }).allowed).toBe(true);
  });

  test("the key lives until the block ends (TTL = the block), then is gone", async () => {
    const prefix = uniquePrefix("block-ttl");
    const shared = new RedisFixedWindow({ client: conn.client, prefix, limit: 5, windowMs: 1000 });
    await shared.block("k", 600_000);
    const [key] = (await conn.client.evalScript(
      "return redis.call('KEYS', ARGV[1])",
      [],
      [`${prefix}*`],
    )) as string[];
    const pttl = Number(
      await conn.client.evalScript("return redis.call('PTTL', KEYS[1])", [key!], []),
    );
    expect(pttl).toBeGreaterThan(590_000);
    expect(pttl).toBeLessThanOrEqual(600_000);
  });

  test("blockOnce keeps a block in place; block extends it to the later end", async () => {
    const clock = manualClock(0);
    const shared = tb(clock);
    expect(await shared.blockOnce("k", 1000)).toBe(1000);
    clock.advance(400);
    expect(await shared.blockOnce("k", 1000)).toBe(600);
    expect(await shared.block("k", 1000)).toBe(1000);
    expect(await shared.block("k", 10)).toBe(1000);
  });

  test("refund keeps the block; reset lifts it", async () => {
    const clock = manualClock(0);
    const shared = tb(clock);
    await shared.consume("k", 2);
    await shared.block("k", 1000);
    await shared.refund("k", 2);
    expect((await shared.consume("k", 1)).allowed).toBe(false);
    await shared.reset("k");
    expect((await shared.consume("k", 1)).allowed).toBe(true);
  });

  test("a bad duration is refused before anything is sent", async () => {
    const shared = tb(manualClock(0));
    await expect(shared.block("k", 0)).rejects.toThrow(
      "RedisTokenBucket.block: durationMs must be a finite number > 0, got 0",
    );
    await expect(shared.block("k", Number.POSITIVE_INFINITY)).rejects.toThrow(RangeError);
  });

  test("the sliding log: a block survives the log emptying, and a refund empties it", async () => {
    const clock = manualClock(0);
    const memory = new KeyedLimiter(new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }));
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix("log-block"),
      limit: 3,
      windowMs: 1000,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    const steps: [dtMs: number, op: string, arg: number][] = [
      [0, "consume", 2],
      [0, "block", 5000],
      [1500, "consume", 1], // the entry left: the log is empty, the block stays
      [0, "peek", 3],
      [3500, "consume", 3],
      [0, "refund", 2],
      [0, "consume", 2],
      [0, "refund", 10],
      [0, "consume", 3],
    ];
    for (const [i, [dt, op, arg]] of steps.entries()) {
      clock.advance(dt);
      const where = `step ${i} at ${clock()} ${op}(${arg})`;
      if (op === "block") {
        memory.block("k", arg);
        await shared.block("k", arg);
      } else if (op === "refund") {
        memory.refund("k", arg);
        await shared.refund("k", arg);
      } else {
        const expected = op === "peek" ? memory.peek("k", arg) : memory.consume("k", arg);
        const actual = op === "peek" ? shared.peek("k", arg) : shared.consume("k", arg);
        expect(await actual, where).toEqual({ ...expected, source: "redis" });
      }
    }
  });
});

describe.skipIf(!redis.available)("Redis reconfigure", () => {
  test("validation first, with the constructor's messages; nothing changes", () => {
    const bucket = new RedisTokenBucket({
      client: conn.client,
      capacity: 5,
      refillPerSecond: 1,
    });
    expect(() => bucket.reconfigure({ capacity: 0 })).toThrow(
      "RedisTokenBucket: capacity must be a finite number > 0, got 0",
    );
    expect(() => bucket.reconfigure({ prefix: "x" } as object)).toThrow(TypeError);
    expect(() => bucket.reconfigure({ clock: () => 0 } as object)).toThrow(/clock cannot change/);
    const window = new RedisFixedWindow({ client: conn.client, limit: 5, windowMs: 1000 });
    expect(() => window.reconfigure({ windowMs: 0.0001 })).toThrow(/windowMs must be/);
    expect([bucket.capacity, window.windowMs]).toEqual([5, 1000]);
  });

  test("the keyspace stays: the same keys are read with the new numbers", async () => {
    const clock = manualClock(0);
    const bucket = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix: uniquePrefix("retune"),
      capacity: 4,
      refillPerSecond: 1,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    const keyspace = bucket.keyspace;
    await bucket.consume("k", 4);
    bucket.reconfigure({ capacity: 10, refillPerSecond: 2 });
    expect(bucket.keyspace).toBe(keyspace);
    clock.advance(1000);
    // 0 tokens at the last write, 1 s at the new rate since then
    expect(await bucket.peek("k", 1)).toMatchObject({ allowed: true, remaining: 1, limit: 10 });
  });

  test("step table: a fixed window's count is kept until the end of its window", async () => {
    const clock = manualClock(0);
    const window = new RedisFixedWindow({
      client: conn.client,
      clock,
      prefix: uniquePrefix("fw-len"),
      limit: 3,
      windowMs: 1000,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    clock.advance(500);
    await window.consume("k", 3);
    window.reconfigure({ windowMs: 400 });
    expect(await window.peek("k", 1)).toMatchObject({ allowed: false, retryAfterMs: 500 });
    clock.advance(500); // 1000: the old window ended; windows of 400 from here
    expect(await window.consume("k", 3)).toMatchObject({ allowed: true, resetAfterMs: 200 });
  });

  test("step table: a counter's estimate becomes the count of the new-length window", async () => {
    const clock = manualClock(0);
    const memory = new SlidingWindowCounter({ limit: 10, windowMs: 1000, clock });
    const shared = new RedisSlidingWindowCounter({
      client: conn.client,
      clock,
      prefix: uniquePrefix("swc-len"),
      limit: 10,
      windowMs: 1000,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    clock.advance(200);
    memory.consume(6);
    await shared.consume("k", 6);
    clock.advance(1300); // 1500: prev 6 weighted by half
    memory.reconfigure({ windowMs: 2000 });
    shared.reconfigure({ windowMs: 2000 });
    // At the same instant, Redis carries the state over at the key's next call as memory did.
    expect(await shared.consume("k", 1)).toEqual({ ...memory.consume(1), source: "redis" });
    clock.advance(700);
    expect(await shared.peek("k", 1)).toEqual({ ...memory.peek(1), source: "redis" });
  });

  test("a leaky bucket's smaller capacity in Redis decides as in memory at the next call", async () => {
    // The random timelines' counterexample: memory clamped the level at the change, Redis
    // at the key's next call, 1 ms of draining later. Both now keep the level as it is.
    const clock = manualClock(0);
    const memory = new LeakyBucket({ capacity: 7.25, leakPerSecond: 1, clock });
    const shared = new RedisLeakyBucket({
      client: conn.client,
      clock,
      prefix: uniquePrefix("leaky-size"),
      capacity: 7.25,
      leakPerSecond: 1,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    // [ms advanced, "consume" | "peek" | capacity, cost, allowed, remaining, resetAfterMs]
    const rows: [number, string | number, number, boolean, number, number][] = [
      [0, "consume", 3, true, 4, 3000],
      [0, 1, 0, false, 0, 0], // capacity 7.25 -> 1: the level 3 is kept
      [1, "consume", 0, true, 0, 2999],
      [999, "peek", 1, false, 0, 2000],
      [1000, "consume", 1, false, 0, 1000],
      [1000, "consume", 1, true, 0, 1000],
    ];
    for (const [i, [dt, op, cost, allowed, remaining, resetAfterMs]] of rows.entries()) {
      clock.advance(dt);
      if (typeof op === "number") {
        memory.reconfigure({ capacity: op });
        shared.reconfigure({ capacity: op });
        continue;
      }
      const where = `row ${i} at ${clock()} ms: ${op}(${cost})`;
      const a = op === "peek" ? memory.peek(cost) : memory.consume(cost);
      const b = await (op === "peek" ? shared.peek("k", cost) : shared.consume("k", cost));
      expect(a, where).toMatchObject({ allowed, remaining, resetAfterMs });
      expect(b, where).toEqual({ ...a, source: "redis" });
    }
  });

  test("the local policy's limiter follows: reconfigured, keeping its state", async () => {
    let down = false;
    const client: RedisLike = {
      evalSha: (sha, keys, args) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalSha(sha, keys, args),
      evalScript: (src, keys, args) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalScript(src, keys, args),
    };
    const clock = manualClock(0);
    const bucket = new RedisTokenBucket({
      client,
      clock,
      prefix: uniquePrefix("local-retune"),
      capacity: 2,
      refillPerSecond: 0,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
      failure: "local",
    });
    down = true;
    expect(await bucket.consume("k", 2)).toMatchObject({ allowed: true, source: "local" });
    bucket.reconfigure({ capacity: 5 });
    // The local key keeps its 0 tokens; the new capacity shows.
    expect(await bucket.consume("k", 1)).toMatchObject({
      allowed: false,
      limit: 5,
      source: "local",
    });
    await bucket.refund("k", 1).catch(() => undefined); // Redis down: rejected, the local refunded
    expect(await bucket.consume("k", 1)).toMatchObject({ allowed: true, source: "local" });
  });
});
