/**
 * The Redis of the benchmark: `REDIS_URL` when set; otherwise a private `redis-server` on a
 * free loopback port (no persistence), started for the run and stopped by its pid; otherwise
 * none, with the reason, so the report can say the Redis rows were skipped and why.
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";

/** A Redis to talk to, and how to let go of it. */
export interface BenchRedis {
  readonly url: string;
  /** Where it came from, for the report. */
  readonly origin: string;
  /** Stops the private server by pid (a no-op for `REDIS_URL`). */
  stop(): Promise<void>;
}

/** Either a Redis, or the reason there is none. */
export type RedisAvailability =
  | { readonly ok: true; readonly redis: BenchRedis }
  | { readonly ok: false; readonly reason: string };

/** A free TCP port on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The first line of `redis-server --version`, or undefined when it is not on PATH. */
function serverVersion(): string | undefined {
  const probe = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  return probe.status === 0 ? probe.stdout.trim().split("\n")[0] : undefined;
}

/** Starts `redis-server` on a free loopback port and resolves once it accepts connections. */
async function startPrivate(version: string): Promise<BenchRedis> {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      reject(new Error(`redis-server did not start within 10 s:\n${output}`));
    }, 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with status ${code}:\n${output}`));
    });
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error("redis-server has no pid");
  // Do not let the pipes keep this process alive.
  child.stdout.destroy();
  child.stderr.destroy();
  return {
    url: `redis://127.0.0.1:${port}`,
    origin: `private redis-server on 127.0.0.1:${port} (${version.replace(/ sha=.*/, "")}), pid ${pid}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(pid, "SIGTERM");
      await exited;
    },
  };
}

/** Finds a Redis for the benchmark (see the module comment). Never throws. */
export async function benchRedis(): Promise<RedisAvailability> {
  const url = process.env["REDIS_URL"];
  if (url) {
    return { ok: true, redis: { url, origin: "REDIS_URL", stop: async () => {} } };
  }
  const version = serverVersion();
  if (version === undefined) {
    return {
      ok: false,
      reason:
        "REDIS_URL is not set and redis-server is not on PATH (Debian: apt-get install redis-server)",
    };
  }
  try {
    return { ok: true, redis: await startPrivate(version) };
  } catch (error) {
    return { ok: false, reason: `could not start redis-server: ${(error as Error).message}` };
  }
}
