import { once } from "node:events";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import {
  type FailurePolicy,
  fromIoredis,
  fromNodeRedis,
  RateLimitStoreError,
  type RedisLike,
  RedisTokenBucket,
  type StoreFailureEvent,
  type StoreRecoveryEvent,
} from "../../src/redis/index.js";
import { HEALTHY_TIMEOUT_MS, uniquePrefix } from "../support/redis-clients.js";
import { canStartRedis, freePort, type PrivateRedis, startRedis } from "../support/redis-server.js";

// Real failures: a server stopped mid-run, and a port nobody listens on. These need a
// private redis-server (whatever REDIS_URL says), since they stop it.

const POLICIES: readonly { name: string; policy: () => FailurePolicy; expected: object }[] = [
  { name: "open", policy: () => "open", expected: { allowed: true, source: "open" } },
  { name: "closed", policy: () => "closed", expected: { allowed: false, source: "closed" } },
  {
    name: "local (the default)",
    policy: () => "local",
    expected: { allowed: true, remaining: 1, source: "local" },
  },
  {
    name: "fallback",
    policy: () => new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0 })),
    expected: { allowed: true, remaining: 1, source: "local" },
  },
];

describe.skipIf(!canStartRedis())("Redis failing for real", () => {
  let server: PrivateRedis;
  let ioredis: Redis;
  let nodeRedis: ReturnType<typeof createClient>;
  beforeAll(async () => {
    server = await startRedis();
    // Offline queues off: a call fails at once while disconnected, instead of waiting in
    // the client and running later (after a timeout it could still take units then).
    ioredis = new Redis(server.url, {
      retryStrategy: () => 20,
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    ioredis.on("error", () => {});
    await ioredis.connect();
    nodeRedis = createClient({
      url: server.url,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: () => 20 },
    });
    nodeRedis.on("error", () => {});
    await nodeRedis.connect();
  });
  afterAll(async () => {
    ioredis?.disconnect();
    nodeRedis?.destroy();
    await server?.stop();
  });

  /** Each client, and a promise of its being connected again. */
  const clients: readonly {
    name: string;
    client: () => RedisLike;
    ready: () => Promise<unknown>;
  }[] = [
    {
      name: "ioredis",
      client: () => fromIoredis(ioredis),
      ready: () => (ioredis.status === "ready" ? Promise.resolve() : once(ioredis, "ready")),
    },
    {
      name: "node-redis",
      client: () => fromNodeRedis(nodeRedis),
      ready: () => (nodeRedis.isReady ? Promise.resolve() : once(nodeRedis, "ready")),
    },
  ];

  test.each(clients)(
    "$name: stop the server mid-run, each policy answers, then Redis answers again",
    async ({ name, client, ready }) => {
      const prefix = uniquePrefix(name);
      const events: StoreFailureEvent[] = [];
      const recoveries: StoreRecoveryEvent[] = [];
      const make = (failure: FailurePolicy, timeoutMs = 200) =>
        new RedisTokenBucket({
          client: client(),
          prefix,
          capacity: 2,
          refillPerSecond: 0,
          timeoutMs,
          failure,
          // Each limiter's first failure opens its circuit (one event each); no cool-down, so
          // the first call after the restart is the probe that closes it.
          circuit: { failuresToOpen: 1, coolDownMs: 0 },
          onError: (event) => events.push(event),
          onRecover: (event) => recoveries.push(event),
        });
      const strict = make("throw");
      // The calls to a healthy server go through a twin (same client, key and prefix) with a
      // timeout load cannot trip: through the 200 ms one, which the stopped server needs, a
      // busy machine answered the healthy first call late and the test failed before the stop.
      const healthy = make("throw", HEALTHY_TIMEOUT_MS);
      // The previous test restarted the server: this client may still be reconnecting.
      await ready();
      expect(await healthy.consume("k")).toMatchObject({
        allowed: true,
        remaining: 1,
        source: "redis",
      });

      await server.stop();
      const error = await strict.consume("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitStoreError);
      expect((error as RateLimitStoreError).cause).toBeDefined();
      for (const { name: policy, policy: makePolicy, expected } of POLICIES) {
        expect(await make(makePolicy()).consume("k"), policy).toMatchObject(expected);
      }
      expect(events.map((e) => e.outcome)).toEqual(["throw", "open", "closed", "local", "local"]);

      server = await startRedis(server.port);
      // The restarted server is empty (no persistence); the client reconnects on its own.
      await ready();
      // The first call to the empty server loads the script (one more round trip): it goes
      // through the twin, on another key, so that the probe below takes one round trip.
      expect(await healthy.consume("warm")).toMatchObject({ allowed: true, source: "redis" });
      expect(recoveries).toEqual([]);
      expect(await strict.consume("k")).toMatchObject({
        allowed: true,
        remaining: 1,
        source: "redis",
      });
      // Counted per limiter: `strict` failed once (the other policies were other limiters).
      expect(recoveries).toEqual([{ operation: "consume", failedCalls: 1, node: undefined }]);
    },
    30_000,
  );
});
describe("a port nobody listens on", () => {
  test.each(POLICIES)(
    "policy $name answers at once when the client reports the connection error",
    async ({ policy, expected }) => {
      const port = await freePort();
      const redis = new Redis(`redis://127.0.0.1:${port}`, {
        lazyConnect: true,
        enableOfflineQueue: false,
        retryStrategy: () => null,
      });
      redis.on("error", () => {});
      const events: StoreFailureEvent[] = [];
      const limiter = new RedisTokenBucket({
        client: fromIoredis(redis),
        capacity: 2,
        refillPerSecond: 1,
        failure: policy(),
        circuit: { failuresToOpen: 1 },
        onError: (event) => events.push(event),
      });
      expect(await limiter.consume("k")).toMatchObject(expected);
      expect(events).toHaveLength(1);
      expect(events[0]!.error.timedOut).toBe(false);
      redis.disconnect();
    },
  );

  test("a client that queues while disconnected meets timeoutMs instead of hanging", async () => {
    const port = await freePort();
    const redis = new Redis(`redis://127.0.0.1:${port}`, {
      retryStrategy: () => 50,
      maxRetriesPerRequest: null,
    });
    redis.on("error", () => {});
    const limiter = new RedisTokenBucket({
      client: fromIoredis(redis),
      capacity: 2,
      refillPerSecond: 1,
      timeoutMs: 100,
      failure: "throw",
    });
    const error = await limiter.consume("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect((error as Error).message).toBe(
      "RedisTokenBucket.consume: Redis did not answer within 100 ms",
    );
    redis.disconnect();
  });
});
