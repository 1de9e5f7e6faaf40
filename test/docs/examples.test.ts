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
import { HEALTHY_TIMEOUT_MS } from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";
import { ROOT } from "./markdown.js";

const runs = new Map<
  string,
  { status: number | null; stdout: string; stderr: string; wallMs: number }
>();

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
      const started = performance.now();
      const r = spawnSync(process.execPath, [bundled], {
        cwd: ROOT,
        encoding: "utf8",
        // The timeout only stops an example that hangs (a spawnSync cannot be interrupted).
        timeout: 60_000,
        env: { ...process.env, NO_COLOR: "1", ...env },
      });
      const wallMs = performance.now() - started;
      result = { status: r.status, stdout: r.stdout, stderr: r.stderr, wallMs };
    } finally {
      rmSync(bundled, { force: true });
    }
    runs.set(file, result);
  }
  return result;
}

const SLOW = 60_000; // each example runs in a child process

/** One item of a printed `RateLimit` field, as a bucket with the real clock may print it. */
interface Item {
  readonly policy: string;
  /** `r` when no time passed. */
  readonly r: number;
  /** `t` when no time passed. */
  readonly t: number;
  /** The bucket refills one unit per `unitMs`: `r` may be higher by what the run's time refilled. */
  readonly unitMs?: number;
  /** `t` counts down to a refused request's next unit: lower by the run's seconds, rounded up. */
  readonly countsDown?: boolean;
}

/**
 * Finds the line starting with `prefix` and checks its `RateLimit` items against what the
 * rule allows for the wall time the example ran (`wallMs`, which bounds the time between
 * any two of its requests): exactly `items` when no time passed, and never a value that no
 * elapsed time within `wallMs` could give. The examples keep the real clock (a reader runs
 * them as they are), so on a loaded machine a bucket refills between two requests.
 */
function expectItems(
  lines: readonly string[],
  prefix: string,
  items: readonly Item[],
  wallMs: number,
) {
  const line = lines.find((l) => l.startsWith(prefix));
  expect(line, `a line starting with ${prefix}`).toBeDefined();
  const got = [...line!.slice(prefix.length).matchAll(/"([^"]+)";r=(\d+);t=(\d+)/g)].map((m) => ({
    policy: m[1]!,
    r: Number(m[2]),
    t: Number(m[3]),
  }));
  const where = `${line} (the example ran ${Math.round(wallMs)} ms)`;
  expect(got.map((g) => `"${g.policy}";r=${g.r};t=${g.t}`).join(", "), where).toBe(
    line!.slice(prefix.length),
  );
  expect(
    got.map((g) => g.policy),
    where,
  ).toEqual(items.map((i) => i.policy));
  for (const [i, item] of items.entries()) {
    const { r, t } = got[i]!;
    const refilled = item.unitMs === undefined ? 0 : Math.floor(wallMs / item.unitMs);
    expect(r, `${where}: r of ${item.policy}`).toBeGreaterThanOrEqual(item.r);
    expect(r, `${where}: r of ${item.policy}`).toBeLessThanOrEqual(item.r + refilled);
    const fallen = item.countsDown ? Math.ceil(item.t - wallMs / 1000) : item.t;
    expect(t, `${where}: t of ${item.policy}`).toBeGreaterThanOrEqual(fallen);
    expect(t, `${where}: t of ${item.policy}`).toBeLessThanOrEqual(item.t);
  }
}

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
      const { stdout, wallMs } = run("express.ts");
      const lines = stdout.split("\n");
      expect(lines).toContain("POST /login #3 -> 401 Unauthorized");
      expect(lines).toContain("POST /login #4 -> 429 Too Many Requests");
      // t of "general" is its next unit (100 per minute: 0.6 s away), not its time to full;
      // its r is 95 after five requests, plus what refilled while they ran. "login" was
      // emptied by three: its next unit is 20 s after the first, less the time since.
      expectItems(
        lines,
        "ratelimit: ",
        [
          { policy: "general", r: 95, t: 1, unitMs: 600 },
          { policy: "login", r: 0, t: 20, countsDown: true },
        ],
        wallMs,
      );
      const date = Date.parse(lines.find((l) => l.startsWith("date: "))!.slice(6)) / 1000;
      const reset = Number(lines.find((l) => l.startsWith("x-ratelimit-reset: "))!.slice(19));
      // floor(now + 20 s - e), e the time since the first login, and the Date field (now,
      // rounded down, a moment d later): floor(now + 20 - e) - floor(now + d) is at most 20
      // and above 19 - (e + d), with e + d within the run's time.
      expect(reset - date).toBeGreaterThan(19 - wallMs / 1000);
      expect(reset - date).toBeLessThanOrEqual(20);
    },
    SLOW,
  );

  it(
    "fastify.ts: /login has only its own limit, /export both",
    () => {
      const { stdout, wallMs } = run("fastify.ts");
      const lines = stdout.split("\n");
      expect(lines).toContain('POST /login #1 -> 401; RateLimit: "login";r=2;t=20');
      expectItems(
        lines,
        "GET /export #1 -> 200; RateLimit: ",
        [
          { policy: "general", r: 98, t: 1, unitMs: 600 },
          { policy: "export", r: 0, t: 60 },
        ],
        wallMs,
      );
      expectItems(
        lines,
        "GET /export #2 -> 429; RateLimit: ",
        [
          { policy: "general", r: 97, t: 1, unitMs: 600 },
          { policy: "export", r: 0, t: 60, countsDown: true },
        ],
        wallMs,
      );
    },
    SLOW,
  );

  it(
    "hono.ts: a known API key has its own budget on /api",
    () => {
      const { stdout, wallMs } = run("hono.ts");
      const lines = stdout.split("\n");
      expectItems(
        lines,
        "GET /api/items #1 -> 200; RateLimit: ",
        [
          { policy: "api", r: 1, t: 30 },
          { policy: "general", r: 98, t: 1, unitMs: 600 },
        ],
        wallMs,
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
          // The test's own writes must land on a slow healthy Redis (not a policy's answer).
          timeoutMs: HEALTHY_TIMEOUT_MS,
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
