// The Redis twins with a starting amount (initialTokens, initialLevel) decide as one
// in-memory bucket per key made at the key's first use (or at its first use after a reset):
// explicit time, under which a key's state lives at least a minute, longer than a run
// here, so no key is forgotten by expiry mid-timeline.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Clock } from "../../src/core/limiter.js";
import { LeakyBucket, type Limiter, TokenBucket } from "../../src/index.js";
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

/** One in-memory bucket per key, made at its first use; `reset` forgets it. */
class PerKey {
  private readonly buckets = new Map<string, Limiter>();
  constructor(private readonly make: () => Limiter) {}

  /** The key's bucket; for a peek of a key without one, a new bucket that is not kept. */
  of(key: string, keep: boolean): Limiter {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = this.make();
      if (keep) this.buckets.set(key, bucket);
    }
    return bucket;
  }

  reset(key: string): void {
    this.buckets.delete(key);
  }
}

interface Twin {
  readonly name: string;
  memory(clock: Clock, capacity: number, rate: number, share: number): PerKey;
  redis(
    client: RedisLike,
    clock: Clock,
    capacity: number,
    rate: number,
    share: number,
  ): RedisLimiter;
}

const TWINS: readonly Twin[] = [
  {
    name: "RedisTokenBucket, initialTokens",
    memory: (clock, capacity, refillPerSecond, share) =>
      new PerKey(
        () =>
          new TokenBucket({ capacity, refillPerSecond, initialTokens: capacity * share, clock }),
      ),
    redis: (client, clock, capacity, refillPerSecond, share) =>
      new RedisTokenBucket({
        client,
        clock,
        prefix: uniquePrefix("initial-tb"),
        capacity,
        refillPerSecond,
        initialTokens: capacity * share,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
  {
    name: "RedisLeakyBucket, initialLevel",
    memory: (clock, capacity, leakPerSecond, share) =>
      new PerKey(
        () => new LeakyBucket({ capacity, leakPerSecond, initialLevel: capacity * share, clock }),
      ),
    redis: (client, clock, capacity, leakPerSecond, share) =>
      new RedisLeakyBucket({
        client,
        clock,
        prefix: uniquePrefix("initial-lb"),
        capacity,
        leakPerSecond,
        initialLevel: capacity * share,
        maxTtlMs,
        timeoutMs: HEALTHY_TIMEOUT_MS,
      }),
  },
];

describe.skipIf(!redis.available)("a starting amount on Redis", () => {
  test.each(TWINS)(
    "$name: random timelines over two keys decide as a bucket per key",
    async (twin) => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 8 }),
          fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constant(0)),
          fc.constantFrom(0, 0.25, 0.5, 0.999),
          fc.array(
            fc.record({
              dtMs: fc.oneof(fc.integer({ min: 0, max: 1200 }), fc.constant(0)),
              key: fc.constantFrom("a", "b"),
              cost: fc.constantFrom(0, 1, 1, 2, 0.5, 9),
              op: fc.constantFrom("consume", "consume", "peek", "reset"),
            }),
            { minLength: 1, maxLength: 25 },
          ),
          async (capacity, rate, share, steps) => {
            const clock = manualClock(1_764_480_000_000);
            const memory = twin.memory(clock, capacity, rate, share);
            const shared = twin.redis(conn.client, clock, capacity, rate, share);
            for (const [i, s] of steps.entries()) {
              clock.advance(s.dtMs);
              const where = `step ${i} at ${clock()}: ${s.op}(${s.key}, ${s.cost})`;
              if (s.op === "reset") {
                memory.reset(s.key);
                await shared.reset(s.key);
                continue;
              }
              const bucket = memory.of(s.key, s.op === "consume");
              const expected = s.op === "peek" ? bucket.peek(s.cost) : bucket.consume(s.cost);
              const actual =
                s.op === "peek" ? shared.peek(s.key, s.cost) : shared.consume(s.key, s.cost);
              expect(await actual, where).toEqual({ ...expected, source: "redis" });
            }
          },
        ),
        { numRuns: 30 },
      );
    },
  );

  test("a new key refused at its first use keeps its state: its refill runs from then", async () => {
    const clock = manualClock(1_764_480_000_000);
    const shared = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix: uniquePrefix("initial-first"),
      capacity: 3,
      refillPerSecond: 1,
      initialTokens: 0,
      maxTtlMs,
      timeoutMs: HEALTHY_TIMEOUT_MS,
    });
    for (let t = 0; t < 1000; t += 250) {
      expect((await shared.consume("k")).allowed, `at ${t} ms`).toBe(false);
      clock.advance(250);
    }
    expect((await shared.consume("k")).allowed, "one token after 1 s").toBe(true);
    expect(await shared.peek("other")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
  });
});
