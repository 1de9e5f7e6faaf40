/**
 * vitest's global setup: one Redis Cluster for the whole run, as `.ci/run` starts one for
 * CI, so that the files that share a cluster ({@link useRedisCluster}) do not start one
 * each (about 10 s apiece). Started in the background: the first results do not wait for
 * it, and the files that need it wait for its address in a file named by
 * `TOLLGATE_REDIS_CLUSTER_FILE`. Nothing happens when `TOLLGATE_REDIS_CLUSTER` names a
 * cluster already, or when redis-server or redis-cli is missing (each file then decides,
 * as before). Stopped when the run ends.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CLUSTER_ENV,
  CLUSTER_FILE_ENV,
  type PrivateRedisCluster,
  REDIS_CLI,
  startRedisCluster,
} from "./redis-cluster.js";
import { REDIS_BINARY } from "./redis-server.js";

export default function setup(): (() => Promise<void>) | undefined {
  if (process.env[CLUSTER_ENV] || process.env[CLUSTER_FILE_ENV]) return undefined;
  const present = [REDIS_BINARY, REDIS_CLI].every(
    (bin) => spawnSync(bin, ["--version"], { stdio: "ignore" }).status === 0,
  );
  if (!present) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "tollgate-shared-cluster-"));
  const file = join(dir, "seed");
  // Read by the test workers, which start after this.
  process.env[CLUSTER_FILE_ENV] = file;
  // Written beside, then renamed: a reader sees the whole address or no file.
  const publish = (text: string) => {
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
  };
  const started: Promise<PrivateRedisCluster | undefined> = startRedisCluster().then(
    (cluster) => {
      publish(cluster.seedAddress);
      return cluster;
    },
    (error: unknown) => {
      publish(`error: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    },
  );
  return async () => {
    await (await started)?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
