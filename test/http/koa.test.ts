import { createServer, type Server } from "node:http";
import Koa from "koa";
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import { QUOTA_EXCEEDED_TYPE } from "../../src/http/headers.js";
import { type KoaRateLimitOptions, koaRateLimit } from "../../src/http/koa.js";
import { manualClock } from "../support/manual-clock.js";
import {
  close,
  describeWiring,
  limitHeaders,
  listen,
  RESET_AT_T1,
  RecordingLimiter,
  WALL_MS,
} from "./support.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(close));
});

/** A Koa 3 app answering "ok" behind the middleware, on a loopback port. */
async function start(options: KoaRateLimitOptions<Koa.Context>): Promise<string> {
  const app = new Koa();
  app.use(koaRateLimit(options));
  app.use((ctx) => {
    ctx.body = "ok";
  });
  const server = createServer(app.callback());
  servers.push(server);
  return listen(server);
}

describeWiring("koaRateLimit", start);

describe("koaRateLimit on a real Koa 3 server", () => {
  test("the X-Forwarded-For warning says when the Koa app sets app.proxy, which is not inherited", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const lines = async (proxy: boolean) => {
        warn.mockClear();
        const app = new Koa();
        app.proxy = proxy;
        const limiter = new TokenBucket({ capacity: 10, refillPerSecond: 1 });
        app.use(koaRateLimit({ limiter }));
        app.use((ctx) => {
          ctx.body = ctx.ip; // Koa's own reading, which trusts the header under app.proxy
        });
        const server = createServer(app.callback());
        servers.push(server);
        const url = await listen(server);
        const response = await fetch(url, { headers: { "x-forwarded-for": "6.6.6.6" } });
        return { ip: await response.text(), lines: warn.mock.calls.map(([line]) => String(line)) };
      };
      const trusting = await lines(true);
      expect(trusting.ip).toBe("6.6.6.6");
      expect(trusting.lines).toHaveLength(1);
      expect(trusting.lines[0]).toContain(
        "This Koa app sets app.proxy, which tollgate does not inherit (it trusts X-Forwarded-For from every peer).",
      );
      const plain = await lines(false);
      expect(plain.lines).toHaveLength(1);
      expect(plain.lines[0]).not.toContain("Koa");
    } finally {
      warn.mockRestore();
    }
  });

  test("allowed requests carry the headers; the limit gives a 429 with Retry-After and a problem body", async () => {
    const clock = manualClock();
    const limiter = new RecordingLimiter(1, 1, clock);
    const url = await start({ limiter, windowSeconds: 1, wallClock: () => WALL_MS });
    const allowed = await fetch(url);
    expect([allowed.status, await allowed.text()]).toStrictEqual([200, "ok"]);
    expect(limitHeaders(allowed)).toStrictEqual({
      "ratelimit-policy": '"default";q=1;w=1',
      ratelimit: '"default";r=0;t=1',
    });
    const denied = await fetch(url);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("content-type")).toBe("application/problem+json");
    expect(limitHeaders(denied)).toStrictEqual({
      "ratelimit-policy": '"default";q=1;w=1',
      ratelimit: '"default";r=0;t=1',
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": RESET_AT_T1,
      "retry-after": "1",
    });
    expect((await denied.json()).type).toBe(QUOTA_EXCEEDED_TYPE);
    expect(limiter.calls).toStrictEqual([
      ["127.0.0.1", 1],
      ["127.0.0.1", 1],
    ]);
  });

  test("rateLimit with an unkeyed TokenBucket limits all requests as one global limit", async () => {
    const limiter = new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock: manualClock() });
    const url = await start({ limiter, trustProxy: ["127.0.0.1"] });
    expect((await fetch(url, { headers: { "x-forwarded-for": "192.0.2.1" } })).status).toBe(200);
    expect((await fetch(url, { headers: { "x-forwarded-for": "192.0.2.2" } })).status).toBe(429);
  });

  test.each([
    { failure: "closed" as const, status: 503 },
    { failure: "open" as const, status: 200 },
  ])("a rejecting limiter with failure $failure answers $status", async ({ failure, status }) => {
    const onError = vi.fn();
    const url = await start({
      limiter: { consume: () => Promise.reject(new Error("down")) },
      failure,
      onError,
    });
    expect((await fetch(url)).status).toBe(status);
    expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["outage"]);
  });

  test("a limiter that rejects with RangeError, and a bad key(), answer 500, not a pass", async () => {
    const onError = vi.fn();
    const ranged = await start({
      limiter: { consume: () => Promise.reject(new RangeError("bad cost")) },
      onError,
    });
    const keyed = await start({
      limiter: new RecordingLimiter(5, 1, manualClock()),
      key: () => 42 as unknown as string,
      onError,
    });
    expect((await fetch(ranged)).status).toBe(500);
    expect((await fetch(keyed)).status).toBe(500);
    expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual([
      "programming",
      "programming",
    ]);
  });

  test("onLimited sets the body of the 429; its throw is a 500", async () => {
    let broken = false;
    const url = await start({
      limiter: new RecordingLimiter(1, 0.001, manualClock()),
      onError: () => {},
      onLimited: (ctx) => {
        if (broken) throw new Error("onLimited bug");
        ctx.body = "slow down";
      },
    });
    await fetch(url);
    const limited = await fetch(url);
    expect([limited.status, await limited.text()]).toStrictEqual([429, "slow down"]);
    broken = true;
    expect((await fetch(url)).status).toBe(500);
  });

  test("refuses express-rate-limit's names at creation", () => {
    const limiter = { consume: () => ({}) as Decision };
    expect(() => koaRateLimit({ limiter, max: 5 } as KoaRateLimitOptions)).toThrow(
      'koaRateLimit: unknown option "max" (set the limit on the limiter',
    );
  });
});
