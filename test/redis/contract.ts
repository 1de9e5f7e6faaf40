import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Clock, Decision, Limiter } from "../../src/core/limiter.js";
import {
  RateLimitStoreError,
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
  type Adapter,
  deleteTestKeys,
  HEALTHY_TIMEOUT_MS,
  keyOf,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import type { RedisHandle } from "../support/redis-server.js";

/** One algorithm: its in-memory class and its Redis twin with the same options. */
export interface Algorithm {
  readonly name: string;
  memory(clock: Clock): Limiter;
  redis(client: RedisLike, prefix: string, clock?: Clock): RedisLimiter;
}

/** Explicit-clock keys live maxTtlMs after their last write: keep test garbage short on a shared Redis. */
const TEST_TTL_MS = 60_000;

type Step = readonly [
  atMs: number,
  cost: number,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
  resetAfterMs: number,
];

/** A step table per algorithm: [atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs]. */
export const STEP_TABLES: readonly { algorithm: Algorithm; steps: readonly Step[] }[] = [
  {
    algorithm: {
      name: "TokenBucket { capacity: 3, refillPerSecond: 10 }",
      memory: (clock) => new TokenBucket({ capacity: 3, refillPerSecond: 10, clock }),
      redis: (client, prefix, clock) =>
        new RedisTokenBucket({
          client,
          prefix,
          clock,
          maxTtlMs: TEST_TTL_MS,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          capacity: 3,
          refillPerSecond: 10,
        }),
    },
    steps: [
      [0, 1, true, 2, 0, 100],
      [0, 5, false, 2, Number.POSITIVE_INFINITY, 100], // cost > capacity: never, state untouched
      [0, 2, true, 0, 0, 300],
      [0, 1, false, 0, 100, 300],
      [100, 1, true, 0, 0, 300], // 100 ms at 10/s refilled one token
      [150, 0.5, true, 0, 0, 300], // fractional cost
      [450, 0, true, 3, 0, 0], // full again: a free probe sees it fresh
    ],
  },
  {
    algorithm: {
      name: "LeakyBucket { capacity: 2, leakPerSecond: 1 }",
      memory: (clock) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock }),
      redis: (client, prefix, clock) =>
        new RedisLeakyBucket({
          client,
          prefix,
          clock,
          maxTtlMs: TEST_TTL_MS,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          capacity: 2,
          leakPerSecond: 1,
        }),
    },
    steps: [
      [0, 2, true, 0, 0, 2000],
      [500, 1, false, 0, 500, 1500], // half a unit drained
      [1000, 1, true, 0, 0, 2000],
      [4000, 0.25, true, 1, 0, 250],
    ],
  },
  {
    algorithm: {
      name: "FixedWindow { limit: 2, windowMs: 1000 }",
      memory: (clock) => new FixedWindow({ limit: 2, windowMs: 1000, clock }),
      redis: (client, prefix, clock) =>
        new RedisFixedWindow({
          client,
          prefix,
          clock,
          maxTtlMs: TEST_TTL_MS,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          limit: 2,
          windowMs: 1000,
        }),
    },
    steps: [
      [0, 1, true, 1, 0, 1000],
      [999, 1, true, 0, 0, 1],
      [999.5, 0.5, false, 0, 0.5, 0.5],
      [1000, 2, true, 0, 0, 1000], // the boundary instant belongs to the new window
      [1500, 3, false, 0, Number.POSITIVE_INFINITY, 500],
    ],
  },
  {
    algorithm: {
      name: "SlidingWindowLog { limit: 3, windowMs: 1000 }",
      memory: (clock) => new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }),
      redis: (client, prefix, clock) =>
        new RedisSlidingWindowLog({
          client,
          prefix,
          clock,
          maxTtlMs: TEST_TTL_MS,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          limit: 3,
          windowMs: 1000,
        }),
    },
    steps: [
      [0, 2, true, 1, 0, 1000],
      [500, 1, true, 0, 0, 1000],
      [600, 1, false, 0, 400, 900], // the entry of t=0 leaves at 1000
      [1000, 1, true, 1, 0, 1000],
      [1000, 0.5, true, 0, 0, 1000], // fractional cost
      [1100, 4, false, 0, Number.POSITIVE_INFINITY, 900],
    ],
  },
  {
    algorithm: {
      name: "SlidingWindowCounter { limit: 4, windowMs: 1000 }",
      memory: (clock) => new SlidingWindowCounter({ limit: 4, windowMs: 1000, clock }),
      redis: (client, prefix, clock) =>
        new RedisSlidingWindowCounter({
          client,
          prefix,
          clock,
          maxTtlMs: TEST_TTL_MS,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          limit: 4,
          windowMs: 1000,
        }),
    },
    steps: [
      [0, 4, true, 0, 0, 2000],
      [1000, 1, false, 0, 250, 1000], // the previous window weighs 4 * (1000 - 0) / 1000
      [1250, 1, true, 0, 0, 1750], // 4 * 0.75 + 1 = 4
      [1500, 1, true, 0, 0, 1500], // 4 * 0.5 + 1 + 1 = 4
      [3000, 0, true, 4, 0, 0],
    ],
  },
];

/** The step tables hold for the in-memory classes (so the same tables check both sides). */
export function describeStepTablesInMemory(): void {
  describe("step tables hold in memory", () => {
    test.each(STEP_TABLES.map((t) => ({ ...t, name: t.algorithm.name })))(
      "$name",
      ({ algorithm, steps }) => {
        const clock = manualClock();
        const limiter = algorithm.memory(clock);
        steps.forEach(([atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs], i) => {
          clock.set(atMs);
          expect(limiter.consume(cost), `step ${i}`).toMatchObject({
            allowed,
            remaining,
            retryAfterMs,
            resetAfterMs,
          });
        });
      },
    );
  });
}

/** A RedisLike that records each call's method, so tests see EVALSHA vs EVAL. */
function recording(client: RedisLike, calls: string[]): RedisLike {
  return {
    evalSha: (sha, keys, args) => {
      calls.push("evalSha");
      return client.evalSha(sha, keys, args);
    },
    evalScript: (script, keys, args) => {
      calls.push("evalScript");
      return client.evalScript(script, keys, args);
    },
  };
}

const NO_REFILL: readonly Algorithm[] = [
  {
    name: "RedisTokenBucket",
    memory: (clock) => new TokenBucket({ capacity: 50, refillPerSecond: 0, clock }),
    redis: (client, prefix) =>
      new RedisTokenBucket({
        client,
        prefix,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        capacity: 50,
        refillPerSecond: 0,
      }),
  },
  {
    name: "RedisLeakyBucket",
    memory: (clock) => new LeakyBucket({ capacity: 50, leakPerSecond: 0, clock }),
    redis: (client, prefix) =>
      new RedisLeakyBucket({
        client,
        prefix,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        capacity: 50,
        leakPerSecond: 0,
      }),
  },
  {
    name: "RedisFixedWindow",
    memory: (clock) => new FixedWindow({ limit: 50, windowMs: 1e13, clock }),
    redis: (client, prefix) =>
      new RedisFixedWindow({
        client,
        prefix,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        limit: 50,
        windowMs: 1e13,
      }),
  },
  {
    name: "RedisSlidingWindowLog",
    memory: (clock) => new SlidingWindowLog({ limit: 50, windowMs: 1e12, clock }),
    redis: (client, prefix) =>
      new RedisSlidingWindowLog({
        client,
        prefix,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        limit: 50,
        windowMs: 1e12,
      }),
  },
  {
    name: "RedisSlidingWindowCounter",
    memory: (clock) => new SlidingWindowCounter({ limit: 50, windowMs: 1e13, clock }),
    redis: (client, prefix) =>
      new RedisSlidingWindowCounter({
        client,
        prefix,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        limit: 50,
        windowMs: 1e13,
      }),
  },
];

/**
 * The contract every client adapter must meet, run once per adapter (one suite,
 * parametrized; no copies per client).
 */
export function describeAdapterContract(adapter: Adapter, redis: RedisHandle): void {
  describe.skipIf(!redis.available)(`${adapter.name} adapter contract`, () => {
    let c: TestClient;
    const extra: TestClient[] = [];
    beforeAll(async () => {
      c = await adapter.connect(redis.url());
      for (let i = 0; i < 3; i++) extra.push(await adapter.connect(redis.url()));
    });
    afterAll(async () => {
      if (c) await deleteTestKeys(c);
      await c?.close();
      for (const e of extra) await e.close();
    });

    test.each(STEP_TABLES.map((t) => ({ ...t, name: t.algorithm.name })))(
      "step table, explicit time: $name",
      async ({ algorithm, steps }) => {
        const clock = manualClock();
        const limiter = algorithm.redis(c.client, uniquePrefix(), clock);
        for (const [
          i,
          [atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs],
        ] of steps.entries()) {
          clock.set(atMs);
          const d = await limiter.consume("key", cost);
          expect(d, `step ${i}`).toEqual({
            allowed,
            limit: d.limit,
            remaining,
            retryAfterMs,
            resetAfterMs,
            source: "redis",
          });
        }
      },
    );

    test("runs scripts by SHA1, and after SCRIPT FLUSH falls back to EVAL once", async () => {
      const calls: string[] = [];
      const prefix = uniquePrefix();
      const bucket = new RedisTokenBucket({
        client: recording(c.client, calls),
        prefix,
        capacity: 3,
        refillPerSecond: 0,
      });
      await bucket.consume("k"); // may load the script (a fresh server has none cached)
      calls.length = 0;
      expect((await bucket.consume("k")).remaining).toBe(1);
      expect(calls).toEqual(["evalSha"]);
      await c.command("SCRIPT", "FLUSH");
      calls.length = 0;
      expect((await bucket.consume("k")).remaining).toBe(0); // state kept, script reloaded
      expect(calls).toEqual(["evalSha", "evalScript"]);
      calls.length = 0;
      expect((await bucket.consume("k")).allowed).toBe(false);
      expect(calls).toEqual(["evalSha"]);
    });

    test("keys are binary-safe: distinct strings stay distinct keys", async () => {
      const prefix = uniquePrefix("bin");
      const keys = [
        "\uD800",
        "\uDC00",
        "\uFFFD",
        "",
        "\0",
        "a b\r\n",
        "{tag}",
        "😀",
        "\uD83D",
        "é",
        "e\u0301",
      ];
      const bucket = new RedisTokenBucket({
        client: c.client,
        prefix,
        capacity: keys.length,
        refillPerSecond: 0,
      });
      for (const [i, key] of keys.entries()) {
        // Each key takes i + 1 units of its own bucket; none sees another's.
        expect((await bucket.consume(key, i + 1)).remaining, key).toBe(keys.length - i - 1);
      }
      for (const [i, key] of keys.entries()) {
        expect((await bucket.peek(key, 0)).remaining, key).toBe(keys.length - i - 1);
      }
      const stored = (await c.command("KEYS", `${prefix}*`)) as unknown[];
      expect(stored).toHaveLength(keys.length);
    });

    test("10 concurrent consume calls on a bucket of 1 admit exactly 1", async () => {
      const bucket = new RedisTokenBucket({
        client: c.client,
        prefix: uniquePrefix(),
        capacity: 1,
        refillPerSecond: 0,
      });
      const decisions = await Promise.all(Array.from({ length: 10 }, () => bucket.consume("k")));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(1);
    });

    test.each(NO_REFILL)(
      "200 concurrent calls from 4 clients: $name admits exactly its limit of 50",
      async (algorithm) => {
        const prefix = uniquePrefix();
        const limiters = [c, ...extra].map((client) => algorithm.redis(client.client, prefix));
        const decisions = await Promise.all(
          Array.from({ length: 200 }, (_, i) => limiters[i % 4]!.consume("shared")),
        );
        expect(decisions.filter((d) => d.allowed)).toHaveLength(50);
        // And the in-memory class agrees on the count for the same 200 calls in one instant.
        const memory = algorithm.memory(manualClock(1));
        expect(Array.from({ length: 200 }, () => memory.allow()).filter(Boolean)).toHaveLength(50);
      },
    );

    test("by default the server's clock decides; a client clock 10 s behind changes nothing", async () => {
      const prefix = uniquePrefix();
      const lagging = new RedisTokenBucket({
        client: extra[0]!.client,
        prefix,
        capacity: 2,
        refillPerSecond: 0.25,
      });
      const onTime = new RedisTokenBucket({
        client: c.client,
        prefix,
        capacity: 2,
        refillPerSecond: 0.25,
      });
      // The wall clock lags; performance.now() is monotonic and only measures intervals (the
      // offset to the server's clock for deadlines is learned from replies), so it stays.
      const realDateNow = Date.now.bind(Date);
      const dateSpy = vi.spyOn(Date, "now").mockImplementation(() => realDateNow() - 10_000);
      try {
        expect((await lagging.consume("k", 2)).allowed).toBe(true);
      } finally {
        dateSpy.mockRestore();
      }
      // Had the lagging client's time been used, 10 s of refill (2.5 tokens) would fill the bucket.
      const d = await onTime.peek("k", 1);
      expect(d.allowed).toBe(false);
      expect(d.remaining).toBe(0);
      expect(d.retryAfterMs).toBeGreaterThan(0);
      expect(d.retryAfterMs).toBeLessThanOrEqual(4000);
      // Contrast: an explicit clock 10 s behind is trusted, and rewinds the shared bucket.
      const explicit = new RedisTokenBucket({
        client: extra[0]!.client,
        prefix,
        capacity: 2,
        refillPerSecond: 0.25,
        clock: () => Date.now() - 10_000,
        maxTtlMs: TEST_TTL_MS,
        timeoutMs: HEALTHY_TIMEOUT_MS,
        // An explicit clock has a keyspace of its own; pinned here to share on purpose.
        keyspace: onTime.keyspace,
      });
      await explicit.consume("k2", 2);
      expect((await onTime.peek("k2", 2)).allowed).toBe(true);
    });

    test("a Redis error rejects with RateLimitStoreError carrying the cause", async () => {
      const bucket = new RedisTokenBucket({
        client: c.client,
        prefix: uniquePrefix(),
        capacity: 1,
        refillPerSecond: 1,
        failure: "throw",
      });
      await c.command("HSET", keyOf(bucket, "k"), "not", "a string");
      const error = await bucket.consume("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitStoreError);
      expect((error as RateLimitStoreError).cause).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(
        /^RedisTokenBucket\.consume: Redis failed: .*WRONGTYPE/,
      );
    });

    test("reset deletes the key: the next decision is fresh", async () => {
      const prefix = uniquePrefix();
      const window = new RedisFixedWindow({ client: c.client, prefix, limit: 2, windowMs: 60_000 });
      await window.consume("k", 2);
      expect(await c.command("EXISTS", keyOf(window, "k"))).toBe(1);
      await window.reset("k");
      expect(await c.command("EXISTS", keyOf(window, "k"))).toBe(0);
      const d: Decision = await window.consume("k");
      expect(d.remaining).toBe(1);
    });
  });
}
