import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Clock, Limiter } from "../../src/core/limiter.js";
import {
  RedisLeakyBucket,
  type RedisLike,
  type RedisLimiter,
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

// The bucket script keeps the overdraft within the fit tolerance exactly as bucket-math.ts
// does: the same tolerance-sized timelines through memory and Redis, field by field.

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

interface Twin {
  readonly name: string;
  memory(clock: Clock, capacity: number, rate: number): Limiter;
  redis(client: RedisLike, clock: Clock, capacity: number, rate: number): RedisLimiter;
}

const TWINS: readonly Twin[] = [
  {
    name: "TokenBucket",
    memory: (clock, capacity, refillPerSecond) =>
      new TokenBucket({ capacity, refillPerSecond, clock }),
    redis: (client, clock, capacity, refillPerSecond) =>
      new RedisTokenBucket({
        client,
        clock,
        prefix: uniquePrefix("tb"),
        capacity,
        refillPerSecond,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "LeakyBucket",
    memory: (clock, capacity, leakPerSecond) => new LeakyBucket({ capacity, leakPerSecond, clock }),
    redis: (client, clock, capacity, leakPerSecond) =>
      new RedisLeakyBucket({
        client,
        clock,
        prefix: uniquePrefix("lb"),
        capacity,
        leakPerSecond,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
];

describe.skipIf(!redis.available)("Redis bucket script: the fit tolerance", () => {
  test.each(TWINS)(
    "regression: $name after capacity 1 was spent, every allow(1e-9) was granted",
    async (twin) => {
      const clock = manualClock(1000);
      const shared = twin.redis(conn.client, clock, 1, 0);
      expect(await shared.allow("k", 1)).toBe(true);
      let granted = 0;
      for (let i = 0; i < 200; i++) if (await shared.allow("k", 1e-9)) granted++;
      expect(granted, "one request's tolerance, as in memory").toBe(1);
      expect(await shared.consume("k", 0)).toMatchObject({ allowed: true, remaining: 0 });
    },
  );

  test.each(TWINS)(
    "regression: $name keeps an overdraft as memory does (retry, reset, free probe)",
    async (twin) => {
      const clock = manualClock(1000);
      const memory = twin.memory(clock, 2 ** 20, 3000);
      const shared = twin.redis(conn.client, clock, 2 ** 20, 3000);
      const costs = [2 ** 20 + 2 ** -12, 0, 1, 2 ** -31, 0];
      for (const [i, cost] of costs.entries()) {
        const expected = memory.consume(cost);
        expect(await shared.consume("k", cost), `step ${i}: consume(${cost})`).toEqual({
          ...expected,
          source: "redis",
        });
        clock.advance(i === 3 ? 2 ** -12 / 3 : 0);
      }
    },
  );

  test.each(TWINS)(
    "$name: tolerance-sized timelines decide as memory, field by field",
    async (twin) => {
      const tiny = fc.constantFrom(1e-9, 2 ** -30, 2 ** -31, 3 * 2 ** -31, 5e-10);
      const step = fc.record({
        dtMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5 })),
        cost: fc.oneof(tiny, tiny, fc.constantFrom(0, 0.5, 1, 3)),
        op: fc.constantFrom("consume", "consume", "allow", "peek"),
      });
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(1, 1e-9, 3, 2 ** 20),
          fc.constantFrom(0, 0, 1, 1000 / 7),
          fc.array(step, { minLength: 1, maxLength: 40 }),
          async (capacity, rate, steps) => {
            const clock = manualClock(1000);
            const memory = twin.memory(clock, capacity, rate);
            const shared = twin.redis(conn.client, clock, capacity, rate);
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()} ${s.op}(${s.cost})`;
              if (s.op === "allow") {
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
        { numRuns: Number(process.env["FC_RUNS"] ?? 40) },
      );
    },
    60_000,
  );
});
