import { Cluster } from "ioredis";
import { createCluster } from "redis";
import { fromIoredis, fromNodeRedis } from "../../src/redis/client.js";
import type { TestClient } from "./redis-clients.js";
import type { ClusterAddress } from "./redis-cluster.js";

/**
 * Cluster clients for the shared contract ({@link TestClient}): the adapter under test
 * over an ioredis `Cluster` or a node-redis `createCluster`, and a `command` that sends a
 * keyed command to its key's master and a keyless one where it means something in a
 * cluster: `KEYS` to every master (the answers concatenated), `SCRIPT ...`, `FLUSHALL`
 * and a 0-key `EVAL` to every master (the first answer).
 */
export interface ClusterAdapter {
  readonly name: string;
  connect(seed: ClusterAddress): Promise<ClusterTestClient>;
}

/** A {@link TestClient} over a cluster client, with what the cluster tests inspect. */
export interface ClusterTestClient extends TestClient {
  /** The library's own client (an ioredis `Cluster` or a node-redis cluster). */
  readonly raw: unknown;
}

type Route = "all-masters-concat" | "all-masters" | "by-key";

function route(args: readonly string[]): Route {
  const name = (args[0] ?? "").toUpperCase();
  if (name === "KEYS") return "all-masters-concat";
  if (name === "SCRIPT" || name === "FLUSHALL") return "all-masters";
  if ((name === "EVAL" || name === "EVALSHA") && args[2] === "0") return "all-masters";
  return "by-key";
}

/** The keyed commands the contract sends have their key first (`SET k v`, `EXISTS k`, `PTTL k`). */
function firstKey(args: readonly string[]): string | undefined {
  return args[1];
}

async function fanOut(route: Route, answers: Promise<unknown>[]): Promise<unknown> {
  const all = await Promise.all(answers);
  if (route === "all-masters-concat") return all.flatMap((a) => (Array.isArray(a) ? a : [a]));
  return all[0];
}

/** ioredis `Cluster` through {@link fromIoredis}. */
export function ioredisCluster(): ClusterAdapter {
  return {
    name: "ioredis Cluster",
    async connect(seed) {
      const cluster = new Cluster([{ host: seed.host, port: seed.port }], {
        lazyConnect: true,
      });
      cluster.on("error", () => {});
      await cluster.connect();
      return {
        client: fromIoredis(cluster),
        raw: cluster,
        async command(...args) {
          const r = route(args);
          const [name, ...rest] = args as [string, ...string[]];
          if (r === "by-key") return cluster.call(name, ...rest);
          return fanOut(
            r,
            cluster.nodes("master").map((node) => node.call(name, ...rest)),
          );
        },
        close: async () => {
          cluster.disconnect();
        },
      };
    },
  };
}

/** node-redis `createCluster` through {@link fromNodeRedis}. */
export function nodeRedisCluster(): ClusterAdapter {
  return {
    name: "node-redis createCluster",
    async connect(seed) {
      const cluster = createCluster({ rootNodes: [{ url: `redis://${seed.host}:${seed.port}` }] });
      cluster.on("error", () => {});
      await cluster.connect();
      return {
        client: fromNodeRedis(cluster),
        raw: cluster,
        async command(...args) {
          const r = route(args);
          if (r === "by-key") return cluster.sendCommand(firstKey(args), false, args);
          return fanOut(
            r,
            cluster.masters.map(async (master) =>
              (await cluster.nodeClient(master)).sendCommand(args),
            ),
          );
        },
        close: async () => {
          cluster.destroy();
        },
      };
    },
  };
}

/** Both cluster clients: every cluster contract test runs once per entry. */
export const CLUSTER_ADAPTERS: readonly ClusterAdapter[] = [ioredisCluster(), nodeRedisCluster()];
