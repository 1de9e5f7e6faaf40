import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { hashSlot } from "../../src/redis/hash-slot.js";
import { type RedisLimiter, RedisTokenBucket } from "../../src/redis/index.js";
import {
  type ClusterAddress,
  type ClusterNodeInfo,
  canStartCluster,
  clusterNodes,
  infoFields,
  nodeCommand,
  type PrivateRedisCluster,
  startRedisCluster,
} from "../support/redis-cluster.js";
import {
  type ClusterTestClient,
  ioredisCluster,
  nodeRedisCluster,
} from "../support/redis-cluster-clients.js";

// Moving the slots of live limiter keys between masters, by hand (CLUSTER SETSLOT
// IMPORTING/MIGRATING, MIGRATE key by key, SETSLOT NODE) while 4 clients (2 ioredis,
// 2 node-redis) consume: every call is answered by the script exactly once, wherever the
// key is (MOVED and ASK followed by the clients), so the admitted totals are exact. A
// private cluster: this test changes the topology.

const available = canStartCluster();

/** Redirection replies the cluster sent, from every node's `INFO errorstats`. */
async function redirections(
  nodes: readonly ClusterAddress[],
): Promise<{ moved: number; ask: number }> {
  let moved = 0;
  let ask = 0;
  for (const node of nodes) {
    const info = infoFields(String(await nodeCommand(node, "INFO", "errorstats")));
    const count = (name: string) => Number(/count=(\d+)/.exec(info.get(name) ?? "")?.[1] ?? 0);
    moved += count("errorstat_MOVED");
    ask += count("errorstat_ASK");
  }
  return { moved, ask };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Moves `slot` from `source` to `target` the way `redis-cli --cluster reshard` does, one
 * key per MIGRATE with a pause after each, so that calls land in the ASK window.
 */
async function moveSlot(
  slot: number,
  source: ClusterNodeInfo,
  target: ClusterNodeInfo,
  masters: readonly ClusterNodeInfo[],
): Promise<void> {
  await nodeCommand(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source.id);
  await nodeCommand(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target.id);
  await pause(50);
  for (;;) {
    const keys = (await nodeCommand(source, "CLUSTER", "GETKEYSINSLOT", slot, 10)) as string[];
    if (keys.length === 0) break;
    for (const key of keys) {
      await nodeCommand(source, "MIGRATE", "127.0.0.1", target.port, key, 0, 5000);
      await pause(50); // the key is on the target, the slot still the source's: ASK
    }
  }
  await nodeCommand(target, "CLUSTER", "SETSLOT", slot, "NODE", target.id);
  await nodeCommand(source, "CLUSTER", "SETSLOT", slot, "NODE", target.id);
  for (const m of masters) {
    if (m.id !== source.id && m.id !== target.id) {
      await nodeCommand(m, "CLUSTER", "SETSLOT", slot, "NODE", target.id);
    }
  }
}

describe.skipIf(!available)("resharding under traffic", () => {
  let cluster: PrivateRedisCluster;
  const clients: ClusterTestClient[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
    for (const adapter of [ioredisCluster(), nodeRedisCluster()]) {
      for (let i = 0; i < 2; i++) clients.push(await adapter.connect(cluster.seed));
    }
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    await cluster?.stop();
  });

  test("slots of live keys move between masters: no decision lost or doubled", async ({
    annotate,
  }) => {
    const prefix = `tollgate-test:reshard:${Date.now()}:`;
    // Small buckets run out during the move (exact admission at the limit); large ones
    // never do (every admitted call charged exactly once, as the state shows afterwards).
    const SMALL = 150;
    const LARGE = 1_000_000_000;
    const make = (client: ClusterTestClient, capacity: number): RedisLimiter =>
      new RedisTokenBucket({
        client: client.client,
        prefix: `${prefix}${capacity}:`,
        capacity,
        refillPerSecond: 0,
        failure: "throw",
        timeoutMs: 10_000,
      });
    const small = clients.map((c) => make(c, SMALL));
    const large = clients.map((c) => make(c, LARGE));
    // 6 keys per bucket size, each in a slot of its own.
    const keys: string[] = [];
    const slots = new Set<number>();
    for (let i = 0; keys.length < 6; i++) {
      const key = `client-${i}`;
      const keySlots = [small[0], large[0]].map((l) =>
        hashSlot(`${l!.prefix}${l!.keyspace}:${key}`),
      );
      if (keySlots.some((s) => slots.has(s)) || keySlots[0] === keySlots[1]) continue;
      for (const s of keySlots) slots.add(s);
      keys.push(key);
    }

    const before = await clusterNodes(cluster.seed);
    const masters = before.filter((n) => n.master);
    expect(masters).toHaveLength(3);
    for (const node of cluster.nodes) await nodeCommand(node, "CONFIG", "RESETSTAT");

    const admitted = new Map<string, number>(); // "small|key" -> allowed decisions
    const calls = new Map<string, number>();
    let errors: unknown[] = [];
    let moving = true;
    const worker = async (i: number) => {
      let n = i;
      while (moving) {
        n++;
        const key = keys[n % keys.length] as string;
        const size = Math.floor(n / keys.length) % 2 === 0 ? "small" : "large";
        const limiter = (size === "small" ? small : large)[i % clients.length] as RedisLimiter;
        try {
          const d = await limiter.consume(key);
          expect(d.source).toBe("redis");
          const id = `${size}|${key}`;
          calls.set(id, (calls.get(id) ?? 0) + 1);
          if (d.allowed) admitted.set(id, (admitted.get(id) ?? 0) + 1);
        } catch (error) {
          errors.push(error);
        }
      }
    };
    const traffic = Promise.all(Array.from({ length: 16 }, (_, i) => worker(i)));

    // Move every live key's slot to the next master, one after the other.
    await pause(100);
    for (const slot of slots) {
      const sourceIndex = masters.findIndex((m) =>
        m.slots.some(([a, b]) => slot >= a && slot <= b),
      );
      const source = masters[sourceIndex] as ClusterNodeInfo;
      const target = masters[(sourceIndex + 1) % masters.length] as ClusterNodeInfo;
      await moveSlot(slot, source, target, masters);
    }
    await pause(300); // calls keep running on the new topology
    moving = false;
    await traffic;
    errors = errors.slice(0, 3);
    expect(errors).toEqual([]);

    const after = await clusterNodes(cluster.seed);
    for (const slot of slots) {
      const owner = (nodes: ClusterNodeInfo[]) =>
        nodes.find((n) => n.master && n.slots.some(([a, b]) => slot >= a && slot <= b))?.id;
      expect(owner(after), `slot ${slot} moved`).not.toBe(owner(before));
    }

    for (const key of keys) {
      expect(calls.get(`small|${key}`), key).toBeGreaterThan(SMALL);
      expect(admitted.get(`small|${key}`), `small bucket ${key}`).toBe(SMALL);
      const largeAdmitted = admitted.get(`large|${key}`) ?? 0;
      expect(largeAdmitted, key).toBe(calls.get(`large|${key}`));
      expect((await large[0]!.peek(key, 0)).remaining, `large bucket ${key}`).toBe(
        LARGE - largeAdmitted,
      );
      expect((await small[0]!.peek(key, 0)).remaining, `small bucket ${key}`).toBe(0);
    }

    // The clients' slot tables follow the move: nodeOf names the new masters.
    for (const c of clients) {
      for (const key of keys) {
        const redisKey = `${large[0]!.prefix}${large[0]!.keyspace}:${key}`;
        const slot = hashSlot(redisKey);
        const master = after.find(
          (n) => n.master && n.slots.some(([a, b]) => slot >= a && slot <= b),
        );
        expect(c.client.nodeOf?.(redisKey)).toBe(master?.address);
      }
    }

    const seen = await redirections(cluster.nodes);
    const total = [...calls.values()].reduce((a, b) => a + b, 0);
    // The figures, shown with the test when it fails.
    await annotate(
      `resharding ${slots.size} slots under traffic: ${total} calls, ${seen.moved} MOVED, ${seen.ask} ASK`,
    );
    expect(seen.moved).toBeGreaterThan(0);
    expect(seen.ask).toBeGreaterThan(0);
  }, 120_000);
});
