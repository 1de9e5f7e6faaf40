import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import {
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  type RedisLimiter,
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
import { bitStep, resolutionMessage } from "../support/window-resolution.js";

// The same random timelines through the in-memory class and its Redis twin (explicit
// time): every decision must be identical, field by field, floats included.

const redis = useRedis();
let conn: TestClient;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});

interface Twin {
  readonly name: string;
  /** Options: [size, rateOrWindow]. */
  readonly options: fc.Arbitrary<[number, number]>;
  memory(clock: Clock, a: number, b: number): Limiter;
  redis(client: RedisLike, clock: Clock, prefix: string, a: number, b: number): RedisLimiter;
}

const size = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constantFrom(0.5, 2.5, 7.25, 1e6));
const rate = fc.oneof(fc.integer({ min: 0, max: 20 }), fc.constantFrom(0.3, 1000 / 7, 1e5));
const windowMs = fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.constantFrom(0.5, 1000 / 3));

// Keys of explicit-time limiters live maxTtlMs after their last write: keep the test garbage short.
const maxTtlMs = 60_000;

const TWINS: readonly Twin[] = [
  {
    name: "TokenBucket",
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
  dtMs: fc.oneof(
    fc.integer({ min: 0, max: 1500 }),
    fc.constant(0),
    fc.double({ min: 0, max: 3000, noNaN: true }),
  ),
  cost: fc.oneof(
    fc.constantFrom(0, 1, 1, 1, 2, 0.5, 0.25, 3),
    fc.double({ min: 0, max: 12, noNaN: true }),
  ),
  op: fc.constantFrom("consume", "consume", "consume", "allow", "peek", "reset"),
});
// Small times, and epoch-sized ones as Redis's TIME gives.
const start = fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.constant(1_764_480_000_123.25));

describe.skipIf(!redis.available)("Redis twin decides as the in-memory class", () => {
  test.each(TWINS)(
    "$name: random timelines",
    async (twin) => {
      await fc.assert(
        fc.asyncProperty(
          twin.options,
          start,
          fc.array(step, { minLength: 1, maxLength: 40 }),
          async ([a, b], t0, steps) => {
            const clock = manualClock(t0);
            const memory = twin.memory(clock, a, b);
            const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), a, b);
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost})`;
              if (s.op === "reset") {
                memory.reset();
                await shared.reset("k");
              } else if (s.op === "allow") {
                expect(await shared.allow("k", s.cost), where).toBe(memory.allow(s.cost));
              } else {
                const expected = s.op === "peek" ? memory.peek(s.cost) : memory.consume(s.cost);
                const actual =
                  s.op === "peek" ? shared.peek("k", s.cost) : shared.consume("k", s.cost);
                expect(await actual, where).toEqual({ ...expected, source: "redis" });
              }
            }
          },
        ),
        { numRuns: Number(process.env["FC_RUNS"] ?? 60) },
      );
    },
    60_000,
  );

  test("regression: beyond max(64, ceil(limit)) entries the log stamps entries per granule, as in memory", async () => {
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit: 3, windowMs: 1000, clock });
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix(),
      limit: 3,
      windowMs: 1000,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    for (let i = 0; i < 150; i++) {
      clock.advance(1); // 150 entries of 0.01 in one window: from the 65th, granules of 1000 / 64 ms
      const expected = memory.consume(0.01);
      expect(await shared.consume("k", 0.01), `step ${i}`).toEqual({
        ...expected,
        source: "redis",
      });
    }
    clock.advance(1000 - 150 + 64); // the exact entries have left, the granule-stamped ones not all
    expect(await shared.peek("k", 3), "after the window").toEqual({
      ...memory.peek(3),
      source: "redis",
    });
  });

  // Large limits: a log of many chunks (expiry by binary search over them, big drops, dead
  // chunks deleted a few per call), the lazy rebase with hundreds of entries older than it,
  // entries stamped exactly after granule-stamped ones, and a limit so small (1e-10) that an
  // entry outlives a rebase. Timelines are phases: bursts of small costs, jumps of a part of
  // the window, large costs; costs are shares of the limit, so every case reaches its limit.
  test("SlidingWindowLog: large limits and many chunks", async () => {
    const phase = fc.oneof(
      fc.record({
        kind: fc.constant("burst" as const),
        count: fc.integer({ min: 50, max: 400 }),
        dtMs: fc.constantFrom(0, 0.01, 0.1, 0.3),
        share: fc.oneof(
          fc.constantFrom(1e-6, 1e-4, 1e-3, 3e-3, 0.01, 0.05),
          fc.double({ min: 0, max: 0.01, noNaN: true }),
        ),
      }),
      fc.record({
        kind: fc.constant("jump" as const),
        part: fc.constantFrom(0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 1.1),
      }),
      fc.record({
        kind: fc.constant("big" as const),
        count: fc.integer({ min: 1, max: 4 }),
        share: fc.constantFrom(0.3, 0.45, 1, 10),
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(1e6, 65, 1000.5, 1e-10),
        fc.constantFrom(500, 1000 / 3),
        fc.constantFrom(5000, 1_764_480_000_123.25),
        fc.array(phase, { minLength: 8, maxLength: 20 }),
        async (limit, w, t0, phases) => {
          const clock = manualClock(t0);
          const memory = new SlidingWindowLog({ limit, windowMs: w, clock });
          const shared = new RedisSlidingWindowLog({
            client: conn.client,
            clock,
            prefix: uniquePrefix("SlidingWindowLog"),
            limit,
            windowMs: w,
            maxTtlMs,
            timeoutMs: HEALTHY_TIMEOUT_MS,
          });
          const check = async (where: string, cost: number, peek: boolean) => {
            const expected = peek ? memory.peek(cost) : memory.consume(cost);
            const actual = await (peek ? shared.peek("k", cost) : shared.consume("k", cost));
            expect(actual, `${where} at ${clock()} cost ${cost}`).toEqual({
              ...expected,
              source: "redis",
            });
          };
          for (const [i, p] of phases.entries()) {
            if (p.kind === "burst") {
              for (let j = 0; j < p.count; j++) {
                clock.advance(p.dtMs);
                await check(`phase ${i} burst ${j}`, p.share * limit, j % 7 === 6);
              }
            } else if (p.kind === "jump") {
              clock.advance(p.part * w);
              await check(`phase ${i} jump`, 1e-3 * limit, true);
            } else {
              for (let j = 0; j < p.count; j++) {
                clock.advance(1);
                await check(`phase ${i} big ${j}`, p.share * limit, false);
              }
            }
          }
        },
      ),
      { numRuns: Math.ceil(Number(process.env["FC_RUNS"] ?? 60) / 6) },
    );
  }, 120_000);

  // Long, dense timelines: the log's running-total rebase and its merging beyond 64 entries.
  test.each(TWINS)(
    "$name: long dense timelines",
    async (twin) => {
      const dense = fc.record({
        dtMs: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 40 })),
        cost: fc.constantFrom(1e-3, 1e-3, 1e-3, 0.01, 0.1, 0.25, 0.5, 1),
        op: fc.constantFrom("consume", "consume", "consume", "peek"),
      });
      await fc.assert(
        fc.asyncProperty(
          fc.tuple(fc.constantFrom(3, 10, 100), fc.constantFrom(500, 1000, 3.5)),
          fc.array(dense, { minLength: 100, maxLength: 400 }),
          async ([a, b], steps) => {
            const clock = manualClock(1000);
            const memory = twin.memory(clock, a, b);
            const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), a, b);
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost})`;
              const expected = s.op === "peek" ? memory.peek(s.cost) : memory.consume(s.cost);
              const actual =
                s.op === "peek" ? shared.peek("k", s.cost) : shared.consume("k", s.cost);
              expect(await actual, where).toEqual({ ...expected, source: "redis" });
            }
          },
        ),
        { numRuns: Math.ceil(Number(process.env["FC_RUNS"] ?? 60) / 6) },
      );
    },
    60_000,
  );

  // Regression: at huge clock readings with a small window the script decided nonsense
  // (RedisFixedWindow at 1e16 ms, windowMs 1: allowed false with retryAfterMs 0). Now a
  // reading where windowMs is below the float step is refused before anything is sent,
  // with the in-memory message, and every other reading decides bit for bit as memory
  // (the log's leave times moved up where the sum rounds down included).
  test.each(TWINS.filter((twin) => twin.name.includes("Window")))(
    "$name: clock origins up to 2^53 and windowMs from 1e-3 to 1e12",
    async (twin) => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.oneof(
            fc.double({ min: -3, max: 12, noNaN: true }).map((x) => 10 ** x),
            fc.integer({ min: -9, max: 39 }).map((j) => 2 ** j),
          ),
          fc.oneof(
            fc.constantFrom(2 ** 53 - 1, 1e16 / 2, 9e15, 2 ** 52 - 0.5),
            fc
              .tuple(fc.integer({ min: 0, max: 52 }), fc.double({ min: 0, max: 1, noNaN: true }))
              .map(([e, f]) => Math.min(2 ** e * (1 + f), 2 ** 53)),
          ),
          fc.array(
            fc.record({
              advance: fc.constantFrom(0, 0.1, 0.5, 0.9, 1, 1.5),
              cost: fc.constantFrom(0, 1, 2),
              op: fc.constantFrom("consume", "consume", "peek"),
            }),
            { minLength: 1, maxLength: 12 },
          ),
          async (limit, w, t0, steps) => {
            const clock = manualClock(t0);
            const memory = twin.memory(clock, limit, w);
            const shared = twin.redis(conn.client, clock, uniquePrefix(twin.name), limit, w);
            for (const [i, s] of steps.entries()) {
              clock.advance(s.advance * w);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost}), windowMs ${w}`;
              const actual =
                s.op === "peek" ? shared.peek("k", s.cost) : shared.consume("k", s.cost);
              if (bitStep(clock()) > w) {
                const run = () => (s.op === "peek" ? memory.peek(s.cost) : memory.consume(s.cost));
                expect(run, where).toThrow(resolutionMessage(twin.name, w, clock()));
                await expect(actual, where).rejects.toThrow(
                  resolutionMessage(`Redis${twin.name}`, w, clock()),
                );
                return;
              }
              const expected = s.op === "peek" ? memory.peek(s.cost) : memory.consume(s.cost);
              expect(await actual, where).toEqual({ ...expected, source: "redis" });
            }
          },
        ),
        { numRuns: Number(process.env["FC_RUNS"] ?? 60) },
      );
    },
    60_000,
  );
});
