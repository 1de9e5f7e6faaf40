// The HTTP middleware's refundIf, charge and blockDurationMs with a Redis limiter: a real
// node:http server on loopback in front of a private redis-server, with an explicit clock.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { type RequestCharges, rateLimit } from "../../src/http/index.js";
import { metricsText } from "../../src/metrics/prometheus.js";
import { withMetrics } from "../../src/metrics/with-metrics.js";
import { RedisFixedWindow, RedisTokenBucket } from "../../src/redis/index.js";
import { close, listen } from "../http/support.js";
import { manualClock } from "../support/manual-clock.js";
import {
  deleteTestKeys,
  ioredisAdapter,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

const redis = useRedis();
let conn: TestClient;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(close));
});

/** Serves `/ok` (200), `/fail` (401) and `/charge/N` (charges N more, 200) behind `limit`. */
async function serve(limit: ReturnType<typeof rateLimit>): Promise<string> {
  const charges = limit as unknown as RequestCharges<IncomingMessage>;
  const server = createServer((req: IncomingMessage, res: ServerResponse) =>
    limit(req, res, async () => {
      const [, route, n] = (req.url ?? "/").split("/");
      if (route === "charge") {
        const decision = await charges.charge(req, Number(n));
        res.end(String(decision?.allowed));
        return;
      }
      res.statusCode = route === "fail" ? 401 : 200;
      res.end();
    }),
  );
  servers.push(server);
  return listen(server);
}

/** Waits until Redis has run the middleware's after-response writes (they are not awaited). */
async function settled(): Promise<void> {
  for (let i = 0; i < 5; i++) await conn.client.evalScript("return 1", [], []);
}

describe.skipIf(!redis.available)("HTTP middleware with a Redis limiter", () => {
  test("refundIf: only failed requests count (express-rate-limit's skipSuccessfulRequests)", async () => {
    const clock = manualClock(1000);
    const limiter = new RedisFixedWindow({
      client: conn.client,
      clock,
      prefix: uniquePrefix("http-refund"),
      limit: 2,
      windowMs: 60_000,
      maxTtlMs: 60_000,
    });
    const url = await serve(rateLimit({ limiter, refundIf: (status) => status < 400 }));
    // [path, status]: successes are given back, so only the two failures use the window.
    const steps: readonly [string, number][] = [
      ["/ok", 200],
      ["/ok", 200],
      ["/ok", 200],
      ["/fail", 401],
      ["/ok", 200],
      ["/fail", 401],
      ["/ok", 429],
    ];
    for (const [i, [path, status]] of steps.entries()) {
      expect((await fetch(`${url}${path}`)).status, `step ${i} ${path}`).toBe(status);
      await settled();
    }
  });

  test("charge after the response takes more from the shared bucket", async () => {
    const clock = manualClock(0);
    const limiter = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix: uniquePrefix("http-charge"),
      capacity: 10,
      refillPerSecond: 0,
      maxTtlMs: 60_000,
    });
    const url = await serve(rateLimit({ limiter }));
    expect(await (await fetch(`${url}/charge/6`)).text()).toBe("true");
    // 3 left; this request takes 1, and 6 more do not fit: the charge is denied, nothing taken
    expect(await (await fetch(`${url}/charge/6`)).text()).toBe("false");
    expect((await limiter.peek("127.0.0.1", 0)).remaining).toBe(2);
  });

  test("blockDurationMs: blocked in Redis with Retry-After the block, not extended meanwhile", async () => {
    const clock = manualClock(0);
    const limiter = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix: uniquePrefix("http-block"),
      capacity: 1,
      refillPerSecond: 1,
      maxTtlMs: 60_000,
    });
    const url = await serve(rateLimit({ limiter, blockDurationMs: 60_000 }));
    expect((await fetch(`${url}/ok`)).status).toBe(200);
    // [clock ms, status, Retry-After]
    const steps: readonly [number, number, string | null][] = [
      [0, 429, "60"],
      [1000, 429, "59"], // the bucket has refilled, but the block holds
      [30_500, 429, "30"], // requests during the block do not extend it
      [60_000, 200, null],
    ];
    for (const [at, status, retryAfter] of steps) {
      clock.set(at);
      const response = await fetch(`${url}/ok`);
      expect(response.status, `at ${at} ms`).toBe(status);
      expect(response.headers.get("retry-after"), `at ${at} ms`).toBe(retryAfter);
    }
    // Another process sharing the Redis sees the block too.
    const other = new RedisTokenBucket({
      client: conn.client,
      clock,
      prefix: limiter.prefix,
      capacity: 1,
      refillPerSecond: 1,
      maxTtlMs: 60_000,
    });
    await fetch(`${url}/ok`); // hits the limit again at 60 000: blocked until 120 000
    expect((await other.consume("127.0.0.1")).allowed).toBe(false);
    expect((await other.peek("127.0.0.1", 0)).retryAfterMs).toBeGreaterThanOrEqual(59_000);
  });

  test("a block that Redis cannot store is reported as an outage; the request is denied all the same", async () => {
    const clock = manualClock(0);
    let down = false;
    const client = {
      evalSha: (sha: string, keys: readonly string[], args: readonly string[]) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalSha(sha, keys, args),
      evalScript: (src: string, keys: readonly string[], args: readonly string[]) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalScript(src, keys, args),
    };
    const limiter = new RedisTokenBucket({
      client,
      clock,
      prefix: uniquePrefix("http-block-down"),
      capacity: 1,
      refillPerSecond: 0.5,
      maxTtlMs: 60_000,
      failure: "local",
    });
    const reported: string[] = [];
    const url = await serve(
      rateLimit({
        limiter,
        blockDurationMs: 5000,
        onError: (_error, info) => {
          reported.push(info.kind);
        },
      }),
    );
    expect((await fetch(`${url}/ok`)).status).toBe(200);
    down = true;
    expect((await fetch(`${url}/ok`)).status).toBe(200); // the local policy: a fresh bucket
    const denied = await fetch(`${url}/ok`);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("2"); // the bucket's own answer
    expect(reported).toContain("outage");
    // The local policy's limiter kept the block.
    const blocked = await fetch(`${url}/ok`);
    expect([blocked.status, blocked.headers.get("retry-after")]).toEqual([429, "5"]);
  });

  test("through withMetrics: refundIf and blockDurationMs still work; a failed refund is a store failure", async () => {
    const clock = manualClock(0);
    let down = false;
    const client = {
      evalSha: (sha: string, keys: readonly string[], args: readonly string[]) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalSha(sha, keys, args),
      evalScript: (src: string, keys: readonly string[], args: readonly string[]) =>
        down ? Promise.reject(new Error("down")) : conn.client.evalScript(src, keys, args),
    };
    const redisLimiter = new RedisTokenBucket({
      client,
      clock,
      prefix: uniquePrefix("http-metrics"),
      capacity: 1,
      refillPerSecond: 1,
      maxTtlMs: 60_000,
      circuit: { failuresToOpen: 100 },
    });
    const limiter = withMetrics(redisLimiter, { name: "api" });
    const url = await serve(
      rateLimit({ limiter, refundIf: (status) => status < 400, blockDurationMs: 10_000 }),
    );
    expect((await fetch(`${url}/ok`)).status).toBe(200); // given back
    // Regression: the next request raced the refund, which goes to Redis after the response;
    // under load it arrived first and found the bucket empty (429 for 401).
    await settled();
    expect((await fetch(`${url}/fail`)).status).toBe(401); // counts
    await settled();
    const limited = await fetch(`${url}/fail`); // limited: blocked
    expect([limited.status, limited.headers.get("retry-after")]).toEqual([429, "10"]);
    clock.set(5000);
    expect((await fetch(`${url}/ok`)).headers.get("retry-after")).toBe("5");
    down = true;
    await expect(limiter.refund!("someone", 1)).rejects.toThrow(/down/);
    await Promise.resolve();
    expect(limiter.metrics().store?.failures).toBe(1);
    expect(metricsText([limiter])).toMatch(/tollgate_store_failures_total\{limiter="api"\} 1/);
  });
});
