import { describe, expect, test } from "vitest";
import { RedisTokenBucket } from "../../src/redis/index.js";
import { type Adapter, HEALTHY_TIMEOUT_MS } from "../support/redis-clients.js";
import { parseAddress, useRedisCluster } from "../support/redis-cluster.js";
import { CLUSTER_ADAPTERS } from "../support/redis-cluster-clients.js";
import type { RedisHandle } from "../support/redis-server.js";
import { describeAdapterContract } from "./contract.js";

// The single-Redis contract, unchanged, against a 3-master, 3-replica Redis Cluster
// through both cluster clients: keys spread over the masters (one per client key), so
// every step table, the NOSCRIPT recovery and the exact admission from 4 clients hold
// across nodes. The "URL" the contract passes around is the seed's host:port.
const cluster = useRedisCluster();
const handle: RedisHandle = {
  available: cluster.available,
  url: () => `${cluster.seed().host}:${cluster.seed().port}`,
};

for (const clusterAdapter of CLUSTER_ADAPTERS) {
  const adapter: Adapter = {
    name: clusterAdapter.name,
    connect: (seed) => clusterAdapter.connect(parseAddress(seed)),
  };
  describeAdapterContract(adapter, handle);

  describe.skipIf(!cluster.available)(
    `${clusterAdapter.name}: keys spread over the masters`,
    () => {
      // regression: with a refill of 1/s each key expired after 1 s, before a slow run's KEYS.
      test("200 keys of one limiter land on all 3 masters, as nodeOf says", async () => {
        const c = await clusterAdapter.connect(cluster.seed());
        try {
          const bucket = new RedisTokenBucket({
            client: c.client,
            prefix: `tollgate-test:${process.pid}:spread:${Date.now()}:`,
            capacity: 5,
            // Full again (and expired) only after 500 s: all 200 keys are there for KEYS.
            refillPerSecond: 0.01,
            // A call a loaded machine answers late must not be decided by the local
            // fallback (which writes nothing to Redis): it would leave a key out of KEYS.
            timeoutMs: HEALTHY_TIMEOUT_MS,
            failure: "throw",
          });
          const nodes = new Set<string>();
          for (let i = 0; i < 200; i++) {
            await bucket.consume(`client-${i}`);
            const node = c.client.nodeOf?.(`${bucket.prefix}${bucket.keyspace}:client-${i}`);
            expect(node, `nodeOf client-${i}`).toMatch(/^127\.0\.0\.1:\d+$/);
            nodes.add(node as string);
          }
          expect(nodes.size).toBe(3);
          const stored = (await c.command("KEYS", `${bucket.prefix}*`)) as unknown[];
          expect(stored).toHaveLength(200);
          await c.command(
            "EVAL",
            "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end",
            "0",
            `${bucket.prefix}*`,
          );
        } finally {
          await c.close();
        }
      }, 30_000);
    },
  );
}
