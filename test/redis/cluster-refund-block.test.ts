import { describe, expect, test } from "vitest";
import {
  RedisFixedWindow,
  type RedisLimiter,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import { HEALTHY_TIMEOUT_MS } from "../support/redis-clients.js";
import { useRedisCluster } from "../support/redis-cluster.js";
import { CLUSTER_ADAPTERS } from "../support/redis-cluster-clients.js";

// Refund, block and reconfigure on a 3-master Redis Cluster through both cluster clients:
// the block lives in the key's own value, so it is in the key's slot by construction, and
// keys of one limiter spread over every master.
const cluster = useRedisCluster();

for (const clusterAdapter of CLUSTER_ADAPTERS) {
  describe.skipIf(!cluster.available)(`${clusterAdapter.name}: refund, block, reconfigure`, () => {
    test("on keys over all 3 masters, every algorithm", async () => {
      const c = await clusterAdapter.connect(cluster.seed());
      try {
        const clock = manualClock(1_000_000);
        const prefix = `tollgate-test:${process.pid}:refund-block:${Date.now()}:`;
        // No call times out on a loaded machine: the local fallback would decide it instead.
        const common = {
          client: c.client,
          clock,
          prefix,
          maxTtlMs: 600_000,
          timeoutMs: HEALTHY_TIMEOUT_MS,
          failure: "throw" as const,
        };
        const limiters: RedisLimiter[] = [
          new RedisTokenBucket({ ...common, capacity: 2, refillPerSecond: 0.01 }),
          new RedisFixedWindow({ ...common, limit: 2, windowMs: 600_000 }),
          new RedisSlidingWindowLog({ ...common, limit: 2, windowMs: 600_000 }),
          new RedisSlidingWindowCounter({ ...common, limit: 2, windowMs: 600_000 }),
        ];
        const nodes = new Set<string>();
        for (const limiter of limiters) {
          for (let i = 0; i < 12; i++) {
            const key = `client-${i}`;
            const name = `${limiter.constructor.name} ${key}`;
            nodes.add(c.client.nodeOf?.(`${limiter.prefix}${limiter.keyspace}:${key}`) ?? "");
            const first = await limiter.charge(key, 2);
            expect(first.allowed, name).toBe(true);
            expect(await limiter.refund(first, 1), name).toBe(1);
            const second = await limiter.charge(key, 1);
            expect(second.allowed, `${name} after the refund`).toBe(true);
            expect(await limiter.block(key, 30_000), name).toBe(30_000);
            // The older receipt first: a bucket's receipt counts the key's refunds since its
            // charge as repaying the oldest units first, as in memory (refunded the other way
            // round, the second's refund repays the first's last unit, which then gives
            // nothing back).
            await limiter.refund(first, 1);
            await limiter.refund(second, 1);
            expect(await limiter.peek(key, 1), `${name} blocked`).toMatchObject({
              allowed: false,
              remaining: 0,
            });
            expect((await limiter.peek(key, 1)).retryAfterMs).toBeGreaterThanOrEqual(30_000);
          }
          limiter.reconfigure("capacity" in limiter ? { capacity: 4 } : { limit: 4 });
        }
        expect(nodes.size).toBe(3);
        clock.advance(30_000);
        for (const limiter of limiters) {
          // The block is over; the refunds left the state fresh, so 4 fit now.
          expect((await limiter.consume("client-0", 4)).allowed, limiter.constructor.name).toBe(
            true,
          );
        }
        await c.command(
          "EVAL",
          "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end",
          "0",
          `${prefix}*`,
        );
      } finally {
        await c.close();
      }
    }, 60_000);
  });
}
