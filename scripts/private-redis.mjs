// A private redis-server on a free loopback port, for the scripts that run code needing
// Redis (the examples, the README's blocks): started only when REDIS_URL is unset and
// redis-server is on PATH; the caller stops it by its process (`child.kill()`).
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Sets REDIS_URL to a new private server and returns its process, or undefined when
 * REDIS_URL is already set or redis-server is not on PATH.
 */
export async function startRedis() {
  if (process.env.REDIS_URL) return undefined;
  if (spawnSync("sh", ["-c", "command -v redis-server"]).status !== 0) return undefined;
  const port = await freePort();
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: "ignore" },
  );
  for (let i = 0; i < 100; i++) {
    if (
      spawnSync("redis-cli", ["-p", String(port), "ping"])
        .stdout?.toString()
        .trim() === "PONG"
    ) {
      process.env.REDIS_URL = `redis://127.0.0.1:${port}`;
      return child;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill();
  throw new Error("redis-server did not start");
}
