import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import {
  fromIoredis,
  fromNodeRedis,
  RedisTokenBucket,
  type StoreFailureEvent,
  type StoreRecoveryEvent,
} from "../../src/redis/index.js";
import { uniquePrefix } from "../support/redis-clients.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";

// A real stall: the private redis-server is stopped with SIGSTOP (the connection stays up,
// nothing answers), as a hung or paused server looks to a client. With the client at its
// defaults (offline queue on, no command timeout), the circuit opens once, the pending cap
// bounds what piles up in the client's queue, and one probe closes the circuit after
// SIGCONT. Short timeouts keep it quick; the figures for a 5 s stall are in docs/redis.md.

/** The commands ioredis holds: sent and unanswered, plus those waiting for a connection. */
function queued(redis: Redis): number {
  const r = redis as unknown as {
    commandQueue: { length: number };
    offlineQueue: { length: number };
  };
  return r.commandQueue.length + r.offlineQueue.length;
}

describe.skipIf(!canStartRedis())("a stalled server (SIGSTOP)", () => {
  let server: PrivateRedis;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
    redis.on("error", () => {});
    await redis.ping();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  test("the circuit opens once, the client's queue stays under the cap, one probe recovers", async () => {
    const errors: StoreFailureEvent[] = [];
    const recoveries: StoreRecoveryEvent[] = [];
    let now = 0;
    const limiter = new RedisTokenBucket({
      client: fromIoredis(redis),
      prefix: uniquePrefix("stall"),
      capacity: 5,
      refillPerSecond: 0,
      timeoutMs: 100,
      circuit: { maxPendingCalls: 50, clock: () => now },
      onError: (event) => errors.push(event),
      onRecover: (event) => recoveries.push(event),
    });
    expect(await limiter.consume("k")).toMatchObject({ source: "redis", remaining: 4 });

    process.kill(server.pid, "SIGSTOP");
    try {
      const sources = new Map<string, number>();
      let allowed = 0;
      let most = 0;
      for (let round = 0; round < 10; round++) {
        const batch = await Promise.all(Array.from({ length: 200 }, () => limiter.consume("k")));
        most = Math.max(most, queued(redis));
        for (const d of batch) {
          sources.set(d.source, (sources.get(d.source) ?? 0) + 1);
          if (d.allowed) allowed++;
        }
      }
      // Every call was answered, by the local limiter (capacity 5 in this process).
      expect(sources).toEqual(new Map([["local", 2000]]));
      expect(allowed).toBe(5);
      expect(most).toBeLessThanOrEqual(50);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.error.timedOut).toBe(true);
      expect(limiter.circuits()[0]).toMatchObject({ state: "open" });
    } finally {
      process.kill(server.pid, "SIGCONT");
    }
    // The stalled commands drain once the server runs again.
    await redis.ping();
    await new Promise((resolve) => setImmediate(resolve));
    expect(queued(redis)).toBe(0);
    expect(limiter.circuits()[0]!.pendingCalls).toBe(0);
    expect(recoveries).toEqual([]);
    now += 1000; // the cool-down on the circuit's clock
    expect(await limiter.consume("k")).toMatchObject({ source: "redis" });
    expect(recoveries).toHaveLength(1);
    expect(errors).toHaveLength(1);
  }, 30_000);
});

describe.skipIf(!canStartRedis())("a server whose maxmemory-policy evicts limiter keys", () => {
  let server: PrivateRedis;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("each wrapper reads the policy and the limiter warns once, allkeys-lru; not under noeviction", async () => {
    const redis = new Redis(server.url);
    const nodeRedis = createClient({ url: server.url });
    await nodeRedis.connect();
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    try {
      const make = (client: ReturnType<typeof fromIoredis>) =>
        new RedisTokenBucket({ client, capacity: 5, refillPerSecond: 1, prefix: uniquePrefix() });
      const quiet = make(fromIoredis(redis));
      await quiet.consume("k");
      await redis.ping();
      expect(warn).not.toHaveBeenCalled();
      await redis.config("SET", "maxmemory-policy", "allkeys-lru");
      for (const client of [fromIoredis(redis), fromNodeRedis(nodeRedis)]) {
        const limiter = make(client);
        await limiter.consume("a");
        await limiter.consume("b");
        await redis.ping();
      }
      const codes = warn.mock.calls.map((c) => (c[1] as { code?: string } | undefined)?.code);
      expect(codes).toEqual(["TOLLGATE_MAXMEMORY_POLICY", "TOLLGATE_MAXMEMORY_POLICY"]);
      expect(String(warn.mock.calls[0]![0])).toMatch(/maxmemory-policy is allkeys-lru/);
    } finally {
      warn.mockRestore();
      await redis.config("SET", "maxmemory-policy", "noeviction");
      redis.disconnect();
      nodeRedis.destroy();
    }
  }, 30_000);
});
