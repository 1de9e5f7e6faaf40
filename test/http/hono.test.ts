import type { ServerType } from "@hono/node-server";
import { type Context, Hono } from "hono";
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import { type HonoRateLimitOptions, honoRateLimit } from "../../src/http/hono.js";
import { manualClock } from "../support/manual-clock.js";
import {
  closeServed,
  describeWiring,
  expectQuotaSteps,
  limitHeaders,
  outageInfo,
  RecordingLimiter,
  serveFetch,
} from "./support.js";

const servers: ServerType[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(closeServed));
  vi.restoreAllMocks();
});

/** A Hono 4 app behind the middleware, served by @hono/node-server on a loopback port. */
async function start(
  options: HonoRateLimitOptions<Context>,
  routes: (app: Hono) => void = (app) => {
    app.get("/", (c) => c.text("ok"));
  },
): Promise<string> {
  const app = new Hono();
  app.use(honoRateLimit(options));
  routes(app);
  return serveFetch(app.fetch, servers);
}

describeWiring("honoRateLimit", start);

describe("honoRateLimit on a real Hono 4 server (@hono/node-server)", () => {
  test("allowed requests carry the headers; the limit gives a 429 with Retry-After and a problem body", () =>
    // The peer comes from c.env.incoming.socket, as @hono/node-server hands it over.
    expectQuotaSteps((options) => start(options), "application/problem+json"));

  test("headers reach a handler's raw Response and an immutable one (Response.redirect)", async () => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    const url = await start({ limiter }, (app) => {
      app.get("/raw", () => new Response("raw"));
      app.get("/redirect", () => Response.redirect("http://127.0.0.1/elsewhere", 302));
    });
    const raw = await fetch(`${url}/raw`);
    expect([raw.status, await raw.text()]).toStrictEqual([200, "raw"]);
    expect(raw.headers.get("ratelimit")).toBe('"default";r=4;t=1');
    const redirect = await fetch(`${url}/redirect`, { redirect: "manual" });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toBe("http://127.0.0.1/elsewhere");
    expect(redirect.headers.get("ratelimit")).toBe('"default";r=3;t=2');
  });

  test("rateLimit with an unkeyed TokenBucket limits all requests as one global limit", async () => {
    const limiter = new TokenBucket({ capacity: 2, refillPerSecond: 0.001, clock: manualClock() });
    const url = await start({ limiter, trustProxy: ["127.0.0.1"] });
    const from = (ip: string) => fetch(url, { headers: { "x-forwarded-for": ip } });
    expect((await from("192.0.2.1")).status).toBe(200);
    expect((await from("192.0.2.2")).status).toBe(200);
    expect((await from("192.0.2.3")).status).toBe(429);
  });

  test("trustProxy: a forged X-Forwarded-For is ignored when off, the right hop used when on", async () => {
    // The one warning this test sets off, captured and checked rather than printed.
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const off = new RecordingLimiter(5, 1, manualClock());
      const on = new RecordingLimiter(5, 1, manualClock());
      const headers = { "x-forwarded-for": "6.6.6.6, 203.0.113.9" };
      await fetch(await start({ limiter: off }), { headers });
      await fetch(await start({ limiter: on, trustProxy: 1 }), { headers });
      expect(off.calls).toStrictEqual([["127.0.0.1", 1]]);
      expect(on.calls).toStrictEqual([["203.0.113.9", 1]]);
      expect(warn.mock.calls).toStrictEqual([
        [
          'honoRateLimit: a request from 127.0.0.1 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy\'s addresses (trustProxy: ["127.0.0.1"]). This warning is written once.',
        ],
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  test.each([
    { failure: "closed" as const, status: 503 },
    { failure: "open" as const, status: 200 },
  ])(
    "a rejecting limiter with failure $failure answers $status, never 429",
    async ({ failure, status }) => {
      const onError = vi.fn();
      const outage = new Error("store down");
      const url = await start({
        limiter: { consume: () => Promise.reject(outage) },
        failure,
        onError,
      });
      const response = await fetch(url);
      expect(response.status).toBe(status);
      expect(limitHeaders(response)).toStrictEqual({});
      expect(onError.mock.calls).toStrictEqual([
        [outage, { ...outageInfo(outage, failure), key: "127.0.0.1" }],
      ]);
    },
  );

  test("a limiter that throws TypeError answers 500, not a pass", async () => {
    const onError = vi.fn();
    const url = await start({
      limiter: {
        consume: () => {
          throw new TypeError("not a key");
        },
      },
      onError,
    });
    const response = await fetch(url);
    expect(response.status).toBe(500);
    expect((await response.json()).title).toBe("Internal Server Error");
    expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["programming"]);
  });

  test("key, cost and skip get Hono's context; onLimited answers and still gets the headers", async () => {
    const limiter = new RecordingLimiter(2, 0.001, manualClock());
    const url = await start(
      {
        limiter,
        key: (c, clientKey) => c.req.header("x-api-key") ?? clientKey,
        cost: (c) => (c.req.path === "/expensive" ? 2 : 1),
        skip: (c) => c.req.path === "/health",
        onLimited: (c, decision) => c.text(`slow down, ${decision.remaining} left`, 503),
      },
      (app) => {
        app.get("/", (c) => c.text("ok"));
        app.get("/expensive", (c) => c.text("done"));
        app.get("/health", (c) => c.text("up"));
      },
    );
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await fetch(`${url}/expensive`, { headers: { "x-api-key": "k1" } })).status).toBe(200);
    const limited = await fetch(url, { headers: { "x-api-key": "k1" } });
    expect([limited.status, await limited.text()]).toStrictEqual([503, "slow down, 0 left"]);
    expect(limited.headers.get("retry-after")).toBe("1000");
    expect(limiter.calls).toStrictEqual([
      ["k1", 2],
      ["k1", 1],
    ]);
  });
});

describe("honoRateLimit without a server", () => {
  test('no client address (app.request): the shared key "unknown", and one warning', async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const limiter = new RecordingLimiter(1, 0.001, manualClock());
    const app = new Hono();
    app.use(honoRateLimit({ limiter }));
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/")).status).toBe(429);
    expect(limiter.calls.map(([key]) => key)).toStrictEqual(["unknown", "unknown"]);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toContain(
      'share the key "unknown"; pass remoteAddress',
    );
  });

  test("remoteAddress names the client (Workers: cf-connecting-ip); a throwing one is a 500", async () => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    const app = new Hono();
    app.use(
      honoRateLimit({
        limiter,
        onError: () => {},
        remoteAddress: (c) => {
          const ip = c.req.raw.headers.get("cf-connecting-ip");
          if (ip === "broken") throw new Error("remoteAddress bug");
          return ip ?? undefined;
        },
      }),
    );
    app.get("/", (c) => c.text("ok"));
    await app.request("/", { headers: { "cf-connecting-ip": "198.51.100.1" } });
    expect(limiter.calls).toStrictEqual([["198.51.100.1", 1]]);
    expect((await app.request("/", { headers: { "cf-connecting-ip": "broken" } })).status).toBe(
      500,
    );
  });

  test.each([
    {
      name: "windowMs (express-rate-limit's name)",
      options: { windowMs: 60_000 },
      message:
        'honoRateLimit: unknown option "windowMs" (set windowMs on the limiter (FixedWindow/SlidingWindow*) instead',
    },
    {
      name: "limit",
      options: { limit: 5 },
      message: 'honoRateLimit: unknown option "limit" (set the limit on the limiter',
    },
    {
      name: "keyGenerator",
      options: { keyGenerator: () => "k" },
      message: 'honoRateLimit: unknown option "keyGenerator" (use key:',
    },
    {
      name: "remoteAddress not a function",
      options: { remoteAddress: "127.0.0.1" },
      message: 'honoRateLimit: remoteAddress must be a function, got "127.0.0.1" (string)',
    },
  ])("refuses $name at creation", ({ options, message }) => {
    const limiter = { consume: () => ({}) as Decision };
    const call = () => honoRateLimit({ limiter, ...options } as HonoRateLimitOptions);
    expect(call).toThrow(TypeError);
    expect(call).toThrow(message);
  });
});
