// The HTTP examples are the docs' recipes: run from source (bundled once, as tsx compiles
// them for a reader running `npx tsx examples/x.ts`), they exit 0, write nothing to stderr
// (an official example must not set off the untrusted-proxy warning about itself) and
// print what the docs say they print.
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { fromIoredis, RedisTokenBucket } from "../../src/redis/index.js";
import { bundle } from "../support/bundle.js";
import { useRedis } from "../support/redis-server.js";
import { ROOT } from "./markdown.js";

const runs = new Map<string, { status: number | null; stdout: string; stderr: string }>();

/**
 * Runs `examples/<file>` once and remembers what it printed: bundled from source (as tsx
 * would compile it, once, test/support/bundle.ts) beside the example, so that its paths
 * and packages resolve as the example's own, then run by node.
 */
function run(file: string, env: Record<string, string> = {}) {
  let result = runs.get(file);
  if (result === undefined) {
    const bundled = join(ROOT, "examples", `.${file}.${process.pid}.mjs`);
    writeFileSync(bundled, bundle({ entry: join("examples", file) }));
    try {
      const r = spawnSync(process.execPath, [bundled], {
        cwd: ROOT,
        encoding: "utf8",
        // The timeout only stops an example that hangs (a spawnSync cannot be interrupted).
        timeout: 60_000,
        env: { ...process.env, NO_COLOR: "1", ...env },
      });
      result = { status: r.status, stdout: r.stdout, stderr: r.stderr };
    } finally {
      rmSync(bundled, { force: true });
    }
    runs.set(file, result);
  }
  return result;
}

const SLOW = 60_000; // each example runs in a child process

describe.each([
  "api-key.ts",
  "behind-proxy.ts",
  "block.ts",
  "refund.ts",
  "express.ts",
  "fastify.ts",
  "hono.ts",
  "node-http.ts",
])("examples/%s", (file) => {
  it(
    "exits 0 and writes nothing to stderr (no warning about itself)",
    () => {
      const { status, stderr } = run(file);
      expect(stderr).toBe("");
      expect(status).toBe(0);
    },
    SLOW,
  );
});

describe("what the examples print", () => {
  it(
    "refund.ts: the budget gives back what a completion did not use; only failed logins count",
    () => {
      const lines = run("refund.ts").stdout.split("\n");
      expect(lines.slice(0, 5)).toEqual([
        "ok, 1200 tokens",
        "ok, 3900 tokens",
        "4900",
        "ok, 3900 tokens",
        "429: token budget spent",
      ]);
      expect(lines.filter((l) => l.startsWith("login"))).toEqual([
        ...Array(3).fill("login (right) -> 200"),
        "login (wrong) -> 401",
        "login (wrong) -> 401",
        "login (right) -> 200",
        "login (wrong) -> 401",
        "login (wrong) -> 429",
      ]);
    },
    SLOW,
  );

  it(
    "block.ts: a blocked client gets Retry-After the block, a new window does not lift it",
    () => {
      const lines = run("block.ts").stdout.split("\n");
      expect(lines.filter((l) => l.startsWith("at "))).toEqual([
        "at 0 s: 200",
        "at 0 s: 200",
        "at 0 s: 429, Retry-After: 60",
        "at 10 s: 429, Retry-After: 50",
        "at 59 s: 429, Retry-After: 1",
        "at 60 s: 200",
      ]);
    },
    SLOW,
  );

  it(
    "express.ts: the fourth login is refused, with X-RateLimit-Reset a Unix time 20 s on",
    () => {
      const lines = run("express.ts").stdout.split("\n");
      expect(lines).toContain("POST /login #3 -> 401 Unauthorized");
      expect(lines).toContain("POST /login #4 -> 429 Too Many Requests");
      // t of "general" is its next unit (100 per minute: 0.6 s away), not its time to full.
      expect(lines).toContain('ratelimit: "general";r=95;t=1, "login";r=0;t=20');
      const date = Date.parse(lines.find((l) => l.startsWith("date: "))!.slice(6)) / 1000;
      const reset = Number(lines.find((l) => l.startsWith("x-ratelimit-reset: "))!.slice(19));
      // floor(now + 20 s) and the Date field (now, rounded down, a moment later): 20 s
      // apart, or 19 when a second turned between the two readings.
      expect(reset - date).toBeGreaterThanOrEqual(19);
      expect(reset - date).toBeLessThanOrEqual(20);
    },
    SLOW,
  );

  it(
    "fastify.ts: /login has only its own limit, /export both",
    () => {
      const lines = run("fastify.ts").stdout.split("\n");
      expect(lines).toContain('POST /login #1 -> 401; RateLimit: "login";r=2;t=20');
      expect(lines).toContain(
        'GET /export #1 -> 200; RateLimit: "general";r=98;t=1, "export";r=0;t=60',
      );
      expect(lines).toContain(
        'GET /export #2 -> 429; RateLimit: "general";r=97;t=1, "export";r=0;t=60',
      );
    },
    SLOW,
  );

  it(
    "hono.ts: a known API key has its own budget on /api",
    () => {
      const lines = run("hono.ts").stdout.split("\n");
      expect(lines).toContain(
        'GET /api/items #1 -> 200; RateLimit: "api";r=1;t=30, "general";r=98;t=1',
      );
      expect(lines.some((l) => l.startsWith("GET /api/items #3 -> 429"))).toBe(true);
    },
    SLOW,
  );
});

const redis = useRedis();

describe.runIf(redis.available)("examples/global-limit.ts", () => {
  it(
    "cleans up the limiter's own key, fingerprint included, and leaves nothing behind",
    async () => {
      const connection = new Redis(redis.url());
      try {
        // The same bucket as the example's: a key under its fingerprinted keyspace.
        const limiter = new RedisTokenBucket({
          client: fromIoredis(connection),
          capacity: 10,
          refillPerSecond: 10,
          prefix: "example:global:",
        });
        await limiter.consume("global", 10);
        expect(await connection.keys("example:global:*")).toEqual([
          `example:global:${limiter.keyspace}:global`,
        ]);
        const { status, stdout, stderr } = run("global-limit.ts", { REDIS_URL: redis.url() });
        expect(stderr).toBe("");
        expect(status).toBe(0);
        expect(stdout).toMatch(/^instance A passed \d+, instance B passed \d+/);
        expect(await connection.keys("example:global:*")).toEqual([]);
      } finally {
        connection.disconnect();
      }
    },
    SLOW,
  );
});
