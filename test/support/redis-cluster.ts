import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { freePort, REDIS_BINARY } from "./redis-server.js";

/**
 * A Redis Cluster on loopback for the tests: `masters` masters with `replicasPerMaster`
 * replicas each (3 and 1 by default), one `redis-server --cluster-enabled yes` per node
 * (free ports for clients and for the cluster bus, a temp dir each, no persistence),
 * joined by `redis-cli --cluster create`, ready once every node reports
 * `cluster_state:ok` and every replica is in sync.
 *
 * `.ci/run` starts one shared cluster for the whole suite (this file's CLI, below) and
 * exports its seed address in {@link CLUSTER_ENV}; {@link useRedisCluster} uses it when
 * set and otherwise starts a private cluster for the file. Tests that kill nodes or move
 * slots call {@link startRedisCluster} themselves: never the shared one.
 */
export const CLUSTER_ENV = "TOLLGATE_REDIS_CLUSTER";

/**
 * Set by vitest's global setup (cluster-setup.ts) when it starts the run's shared cluster:
 * a file that will hold its seed address (`host:port`), or `error: ...` if it failed.
 */
export const CLUSTER_FILE_ENV = "TOLLGATE_REDIS_CLUSTER_FILE";

/** The Redis CLI the cluster is created with. */
export const REDIS_CLI = "redis-cli";

/** One node's address on loopback. */
export interface ClusterAddress {
  readonly host: string;
  readonly port: number;
}

/** One redis-server of a private cluster. */
export interface ClusterNodeProcess extends ClusterAddress {
  readonly pid: number;
  /** Its working directory (nodes.conf, log), removed by `stop`. */
  readonly dir: string;
  /** Whether it still runs (false once killed or exited). */
  alive(): boolean;
  /** Sends `signal` to it by pid; resolves once it exited (for SIGKILL/SIGTERM). */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** A private cluster started by {@link startRedisCluster}. */
export interface PrivateRedisCluster {
  /** Every node, in start order (which are masters: ask the cluster, roles change on failover). */
  readonly nodes: readonly ClusterNodeProcess[];
  /** A node to start a client from (the first one). */
  readonly seed: ClusterAddress;
  /** `host:port` of the seed, the form of {@link CLUSTER_ENV}. */
  readonly seedAddress: string;
  /** Resolves when every live node reports `cluster_state:ok` and agrees on `slots` coverage. */
  waitOk(timeoutMs?: number): Promise<void>;
  /** Stops every node (SIGKILL: nothing to persist) and removes the temp dirs. */
  stop(): Promise<void>;
}

/** Options of {@link startRedisCluster}. */
export interface ClusterOptions {
  readonly masters?: number;
  readonly replicasPerMaster?: number;
  /** `cluster-node-timeout`: how long a silent node takes to be marked failed (default 5000). */
  readonly nodeTimeoutMs?: number;
  /** `cluster-require-full-coverage` (default true, as Redis): false keeps healthy masters serving while a slot range is down. */
  readonly requireFullCoverage?: boolean;
  /** Spawn the servers detached (they outlive this process: the CI's shared cluster). */
  readonly detached?: boolean;
  /** Called as each node starts (the CLI records pids at once, so a killed start leaks nothing). */
  readonly onNode?: (node: ClusterNodeProcess) => void;
}

/** Runs `redis-cli` with `args`, resolving with its stdout. */
export function redisCli(args: readonly string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, [...args], { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error)
        reject(
          new Error(`redis-cli ${args.join(" ")} failed: ${error.message}\n${stdout}${stderr}`),
        );
      else resolve(stdout);
    });
  });
}

/** One command on one node through a short-lived connection (for setup and inspection). */
export async function nodeCommand(
  node: ClusterAddress,
  name: string,
  ...args: (string | number)[]
): Promise<unknown> {
  const redis = new Redis({
    host: node.host,
    port: node.port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return await redis.call(name, ...args.map(String));
  } finally {
    redis.disconnect();
  }
}

/** `INFO`-style `field:value` lines as a map. */
export function infoFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0) fields.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return fields;
}

/** One line of `CLUSTER NODES`. */
export interface ClusterNodeInfo {
  readonly id: string;
  readonly address: string;
  readonly host: string;
  readonly port: number;
  readonly flags: readonly string[];
  readonly master: boolean;
  /** The master's id for a replica, else undefined. */
  readonly masterId: string | undefined;
  readonly connected: boolean;
  /** Slots served, as [first, last] ranges (migration markers dropped). */
  readonly slots: readonly (readonly [number, number])[];
}

/** Parses `CLUSTER NODES`. */
export function parseClusterNodes(text: string): ClusterNodeInfo[] {
  return text
    .trim()
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      const [id, addr, flagText, masterId, , , , link, ...slotParts] = line.trim().split(" ");
      const address = (addr ?? "").split("@")[0] ?? "";
      const flags = (flagText ?? "").split(",");
      const slots = slotParts
        .filter((s) => !s.startsWith("["))
        .map((s) => {
          const [a, b] = s.split("-");
          return [Number(a), Number(b ?? a)] as const;
        });
      return {
        id: id ?? "",
        address,
        host: address.split(":")[0] ?? "",
        port: Number(address.split(":")[1]),
        flags,
        master: flags.includes("master"),
        masterId: masterId === "-" ? undefined : masterId,
        connected: link === "connected",
        slots,
      };
    });
}

/** `CLUSTER NODES` as seen from `node`. */
export async function clusterNodes(node: ClusterAddress): Promise<ClusterNodeInfo[]> {
  return parseClusterNodes(String(await nodeCommand(node, "CLUSTER", "NODES")));
}

/** The node serving `slot`, as `CLUSTER NODES` from `from` says. */
export async function masterOfSlot(from: ClusterAddress, slot: number): Promise<ClusterNodeInfo> {
  const nodes = await clusterNodes(from);
  const found = nodes.find(
    (n) =>
      n.master && !n.flags.includes("fail") && n.slots.some(([a, b]) => slot >= a && slot <= b),
  );
  if (!found) throw new Error(`no master serves slot ${slot}`);
  return found;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` every `everyMs` until it resolves true; rejects after `timeoutMs` with
 * `what` and the last error. (Waiting on servers is waiting on wall time: no clock to
 * inject; the bound keeps a broken cluster from hanging the suite.)
 */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() > until) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`,
      );
    }
    await sleep(everyMs);
  }
}

/** Starts one cluster-mode redis-server in `dir`, resolving once it accepts connections. */
async function startNode(
  dir: string,
  options: Required<Omit<ClusterOptions, "onNode">>,
): Promise<ClusterNodeProcess> {
  const port = await freePort();
  let busPort = await freePort();
  while (busPort === port) busPort = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--cluster-enabled",
    "yes",
    "--cluster-port",
    String(busPort),
    "--cluster-config-file",
    join(dir, "nodes.conf"),
    "--cluster-node-timeout",
    String(options.nodeTimeoutMs),
    "--cluster-require-full-coverage",
    options.requireFullCoverage ? "yes" : "no",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
    "--logfile",
    join(dir, "redis.log"),
  ];
  const child: ChildProcess = spawn(REDIS_BINARY, args, {
    stdio: "ignore",
    detached: options.detached,
  });
  if (options.detached) child.unref();
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once("exit", () => {
      exited = true;
      resolve();
    }),
  );
  const pid = child.pid as number;
  const address = { host: "127.0.0.1", port };
  try {
    await waitFor(
      `redis-server on port ${port} (log ${join(dir, "redis.log")})`,
      async () => {
        if (exited) throw new Error(readLog(dir));
        return (await nodeCommand(address, "PING")) === "PONG";
      },
      15_000,
      20,
    );
  } catch (error) {
    if (!exited) process.kill(pid, "SIGKILL");
    await exit;
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    ...address,
    pid,
    dir,
    alive: () => !exited,
    async kill(signal = "SIGKILL") {
      if (!exited) process.kill(pid, signal);
      if (signal === "SIGKILL" || signal === "SIGTERM") await exit;
    },
  };
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, "redis.log"), "utf8").slice(-2000);
  } catch {
    return "(no log)";
  }
}

/** Whether every live node says `cluster_state:ok`, sees every slot served and all links up. */
async function clusterReady(nodes: readonly ClusterNodeProcess[]): Promise<boolean> {
  for (const node of nodes) {
    if (!node.alive()) continue;
    const info = infoFields(String(await nodeCommand(node, "CLUSTER", "INFO")));
    if (info.get("cluster_state") !== "ok" || info.get("cluster_slots_ok") !== "16384")
      return false;
    const replication = infoFields(String(await nodeCommand(node, "INFO", "replication")));
    if (replication.get("role") === "slave" && replication.get("master_link_status") !== "up") {
      return false;
    }
  }
  return true;
}

/**
 * Starts a private cluster (see the module doc). Rejects, having stopped what it
 * started, when a node or `redis-cli --cluster create` fails or the cluster is not ok
 * within 30 s.
 */
export async function startRedisCluster(
  options: ClusterOptions = {},
): Promise<PrivateRedisCluster> {
  const o: Required<Omit<ClusterOptions, "onNode">> = {
    masters: options.masters ?? 3,
    replicasPerMaster: options.replicasPerMaster ?? 1,
    nodeTimeoutMs: options.nodeTimeoutMs ?? 5000,
    requireFullCoverage: options.requireFullCoverage ?? true,
    detached: options.detached ?? false,
  };
  const count = o.masters * (1 + o.replicasPerMaster);
  const nodes: ClusterNodeProcess[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill("SIGKILL").catch(() => {})));
    for (const n of nodes) rmSync(n.dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(
      Array.from({ length: count }, async () => {
        const node = await startNode(mkdtempSync(join(tmpdir(), "tollgate-cluster-")), o);
        nodes.push(node);
        options.onNode?.(node);
      }),
    );
    await redisCli([
      "--cluster",
      "create",
      ...nodes.map((n) => `${n.host}:${n.port}`),
      "--cluster-replicas",
      String(o.replicasPerMaster),
      "--cluster-yes",
    ]);
    const cluster: PrivateRedisCluster = {
      nodes,
      seed: { host: nodes[0]!.host, port: nodes[0]!.port },
      seedAddress: `${nodes[0]!.host}:${nodes[0]!.port}`,
      waitOk: (timeoutMs = 30_000) =>
        waitFor("cluster_state:ok on every node", () => clusterReady(nodes), timeoutMs),
      stop,
    };
    await cluster.waitOk();
    return cluster;
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Parses `host:port` (the form of {@link CLUSTER_ENV}). */
export function parseAddress(text: string): ClusterAddress {
  const match = /^([^:]+):(\d+)$/.exec(text.trim());
  if (!match) throw new Error(`${CLUSTER_ENV} must be host:port, got ${JSON.stringify(text)}`);
  return { host: match[1] as string, port: Number(match[2]) };
}

/**
 * The seed address the global setup writes to `file` once the run's shared cluster is
 * ok, waited for (it starts while the first files run).
 * @throws {Error} If the cluster failed to start, or no address came within 60 s.
 */
async function sharedSeed(file: string): Promise<string> {
  await waitFor(
    "the run's shared cluster",
    async () => {
      try {
        return existsSync(file);
      } catch {
        return false;
      }
    },
    60_000,
  );
  const text = readFileSync(file, "utf8");
  if (text.startsWith("error: ")) throw new Error(`the shared cluster did not start: ${text}`);
  return text;
}

/** Whether this run can start a cluster (redis-server and redis-cli on PATH). */
export function canStartCluster(): boolean {
  const ok = [REDIS_BINARY, REDIS_CLI].every(
    (bin) => spawnSync(bin, ["--version"], { stdio: "ignore" }).status === 0,
  );
  if (ok) return true;
  if (process.env["CI"] === "true") {
    throw new Error(
      "CI=true but redis-server or redis-cli is not on PATH: the cluster tests need them",
    );
  }
  console.warn("redis-server or redis-cli not on PATH: the Redis Cluster tests are skipped");
  return false;
}

/** What {@link useRedisCluster} gives a test file. */
export interface ClusterHandle {
  /** False only locally when no cluster can be had (the tests then skip). */
  readonly available: boolean;
  /** Whether the cluster is the suite's shared one ({@link CLUSTER_ENV}). */
  readonly shared: boolean;
  /** The seed node, valid inside tests (after `beforeAll`). */
  seed(): ClusterAddress;
}

/**
 * A cluster for this file's tests that neither kill nodes nor move slots: the shared one
 * when {@link CLUSTER_ENV} is set, else a private one started before the file's tests and
 * stopped after them.
 */
export function useRedisCluster(): ClusterHandle {
  const env = process.env[CLUSTER_ENV];
  if (env) {
    const seed = parseAddress(env);
    return { available: true, shared: true, seed: () => seed };
  }
  const file = process.env[CLUSTER_FILE_ENV];
  if (file) {
    let seed: ClusterAddress | undefined;
    beforeAll(async () => {
      seed = parseAddress(await sharedSeed(file));
    }, 90_000);
    return {
      available: true,
      shared: true,
      seed: () => {
        if (!seed) throw new Error("the cluster is only there inside tests (after beforeAll)");
        return seed;
      },
    };
  }
  if (!canStartCluster())
    return { available: false, shared: false, seed: () => ({ host: "", port: 0 }) };
  let cluster: PrivateRedisCluster | undefined;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return {
    available: true,
    shared: false,
    seed: () => {
      if (!cluster) throw new Error("the cluster is only there inside tests (after beforeAll)");
      return cluster.seed;
    },
  };
}

// CLI for .ci/run: `tsx test/support/redis-cluster.ts start STATE_FILE` starts a detached
// cluster, writes its pids and dirs to STATE_FILE and prints the seed address;
// `... stop STATE_FILE` kills those pids and removes the dirs and the file.
async function main(argv: readonly string[]): Promise<void> {
  const [command, stateFile] = argv;
  if (!stateFile || (command !== "start" && command !== "stop")) {
    throw new Error("usage: redis-cluster.ts start|stop STATE_FILE");
  }
  if (command === "start") {
    const started: { pid: number; dir: string }[] = [];
    const cluster = await startRedisCluster({
      detached: true,
      onNode: (node) => {
        started.push({ pid: node.pid, dir: node.dir });
        writeFileSync(stateFile, JSON.stringify({ nodes: started }));
      },
    });
    writeFileSync(stateFile, JSON.stringify({ seed: cluster.seedAddress, nodes: started }));
    process.stdout.write(`${cluster.seedAddress}\n`);
    return;
  }
  let state: { nodes: { pid: number; dir: string }[] };
  try {
    state = JSON.parse(readFileSync(stateFile, "utf8"));
  } catch {
    return; // never started
  }
  for (const { pid, dir } of state.nodes) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true });
  }
  rmSync(stateFile, { force: true });
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
