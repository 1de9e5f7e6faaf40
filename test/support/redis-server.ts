import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { afterAll, beforeAll } from "vitest";

/**
 * The Redis the tests talk to. `REDIS_URL` when set; otherwise a private
 * `redis-server` on a free loopback port (no persistence), started by {@link useRedis}
 * before the file's tests and stopped by pid after them. With `CI=true` a missing
 * Redis is an error (the file fails), never a silent skip; locally the Redis tests skip
 * with a warning.
 */
export const REDIS_BINARY = "redis-server";

/** How this run gets a Redis: an URL given, a binary to start, or none. */
export type RedisSource = { kind: "url"; url: string } | { kind: "binary" } | { kind: "none" };

/** Decides once, synchronously (at collection time, so `describe.skipIf` can use it). */
export function redisSource(): RedisSource {
  const url = process.env["REDIS_URL"];
  if (url) return { kind: "url", url };
  const probe = spawnSync(REDIS_BINARY, ["--version"], { stdio: "ignore" });
  if (probe.status === 0) return { kind: "binary" };
  if (process.env["CI"] === "true") {
    throw new Error("CI=true but no Redis: set REDIS_URL or put redis-server on PATH");
  }
  return { kind: "none" };
}

/** A free TCP port on 127.0.0.1 (nothing listens on it once this resolves). */
export function freePort(): Promise<number> {
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

/** A private redis-server process. */
export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Stops it by pid (SIGTERM) and resolves once it exited. */
  stop(): Promise<void>;
}

/** Starts `redis-server` on `port` (a free one by default), resolving once it accepts connections. */
export async function startRedis(port?: number): Promise<PrivateRedis> {
  const p = port ?? (await freePort());
  const child: ChildProcess = spawn(
    REDIS_BINARY,
    ["--port", String(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(
      () => reject(new Error(`redis-server did not start:\n${output}`)),
      10_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${output}`));
    });
  });
  const pid = child.pid as number;
  return {
    url: `redis://127.0.0.1:${p}`,
    port: p,
    pid,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(pid, "SIGTERM");
      await exited;
    },
  };
}

/** What {@link useRedis} gives a test file. */
export interface RedisHandle {
  /** False only locally when no Redis can be had (the tests then skip). */
  readonly available: boolean;
  /** The URL, valid inside tests (after `beforeAll`). */
  url(): string;
}

/**
 * Registers `beforeAll`/`afterAll` hooks that provide a Redis for this file (see the
 * module doc); no vitest config change is needed.
 */
export function useRedis(): RedisHandle {
  const source = redisSource();
  if (source.kind === "none") {
    console.warn("No Redis (REDIS_URL unset, redis-server not on PATH): Redis tests skipped");
    return { available: false, url: () => "" };
  }
  let url = source.kind === "url" ? source.url : "";
  let server: PrivateRedis | undefined;
  if (source.kind === "binary") {
    beforeAll(async () => {
      server = await startRedis();
      url = server.url;
    });
    afterAll(async () => {
      await server?.stop();
    });
  }
  return {
    available: true,
    url: () => url,
  };
}

/**
 * Whether this run can start (and so stop) a private redis-server, for the tests that
 * stop Redis mid-run. With `CI=true` a missing binary is an error, never a skip.
 */
export function canStartRedis(): boolean {
  const probe = spawnSync(REDIS_BINARY, ["--version"], { stdio: "ignore" });
  if (probe.status === 0) return true;
  if (process.env["CI"] === "true") {
    throw new Error("CI=true but redis-server is not on PATH: the failure tests need to stop one");
  }
  console.warn("redis-server not on PATH: the stop-the-server tests are skipped");
  return false;
}
