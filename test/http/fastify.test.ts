import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import { type FastifyRateLimitOptions, fastifyRateLimit } from "../../src/http/fastify.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";
import {
  describeWiring,
  expectQuotaSteps,
  limitHeaders,
  outageInfo,
  RecordingLimiter,
} from "./support.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

/** A Fastify 5 app on an ephemeral loopback port; `routes` adds routes after the plugin. */
async function start(
  options: FastifyRateLimitOptions,
  routes: (app: FastifyInstance) => void = (app) => {
    app.get("/", async () => "ok");
  },
): Promise<string> {
  const app = Fastify();
  apps.push(app);
  await app.register(fastifyRateLimit, options);
  routes(app);
  return app.listen({ port: 0, host: "127.0.0.1" });
}

describeWiring("fastifyRateLimit", (options) => start(options));

describe("fastifyRateLimit on a real Fastify 5 server", () => {
  test("allowed requests carry the headers; the limit gives a 429 with Retry-After and a problem body", () =>
    // Fastify adds the charset to a string payload's type.
    expectQuotaSteps((options) => start(options), "application/problem+json; charset=utf-8"));

  test("a route registered right after register() (before the plugin loaded) is limited too", async () => {
    const limiter = new RecordingLimiter(1, 0.001, manualClock());
    const app = Fastify();
    apps.push(app);
    app.register(fastifyRateLimit, { limiter }); // not awaited: the route below comes first
    app.get("/", async () => "ok");
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    expect((await fetch(url)).status).toBe(200);
    expect((await fetch(url)).status).toBe(429);
  });

  test("config.rateLimit false turns it off for that route; the 404 handler is limited", async () => {
    const limiter = new RecordingLimiter(1, 0.001, manualClock());
    const url = await start({ limiter }, (app) => {
      app.get("/health", { config: { rateLimit: false } }, async () => "up");
    });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${url}/health`);
      expect(response.status).toBe(200);
      expect(limitHeaders(response)).toStrictEqual({});
    }
    expect((await fetch(`${url}/nowhere`)).status).toBe(404);
    expect((await fetch(`${url}/nowhere`)).status).toBe(429);
    expect(limiter.calls.length).toBe(2);
  });

  test("a route's own limiter and policy give it a separate budget; a cost-only override shares the plugin's", async () => {
    const clock = manualClock();
    const general = new RecordingLimiter(3, 0.001, clock);
    const logins = new RecordingLimiter(1, 0.001, clock);
    const url = await start({ limiter: general }, (app) => {
      app.get("/", async () => "ok");
      app.post(
        "/login",
        { config: { rateLimit: { limiter: logins, policy: "login", headers: "legacy" } } },
        async () => "welcome",
      );
      app.get("/report", { config: { rateLimit: { cost: () => 2 } } }, async () => "report");
    });
    const login = await fetch(`${url}/login`, { method: "POST" });
    expect(login.status).toBe(200);
    // headers "legacy" for this route only: no RateLimit fields, X-RateLimit-* instead.
    expect(login.headers.get("ratelimit")).toBeNull();
    expect(login.headers.get("x-ratelimit-limit")).toBe("1");
    expect(login.headers.get("x-ratelimit-remaining")).toBe("0");
    expect((await fetch(`${url}/login`, { method: "POST" })).status).toBe(429);
    expect((await fetch(url)).status).toBe(200); // the general budget is untouched by logins
    const report = await fetch(`${url}/report`);
    expect(report.status).toBe(200);
    expect(report.headers.get("ratelimit")).toBe('"default";r=0;t=3000');
    expect((await fetch(url)).status).toBe(429);
    expect(general.calls).toStrictEqual([
      ["127.0.0.1", 1],
      ["127.0.0.1", 2],
      ["127.0.0.1", 1],
    ]);
  });

  test("rateLimit with an unkeyed TokenBucket limits all requests as one global limit", async () => {
    const limiter = new TokenBucket({ capacity: 2, refillPerSecond: 0.001, clock: manualClock() });
    const url = await start({ limiter, trustProxy: ["127.0.0.1"] });
    const from = (ip: string) => fetch(url, { headers: { "x-forwarded-for": ip } });
    expect((await from("192.0.2.1")).status).toBe(200);
    expect((await from("192.0.2.2")).status).toBe(200);
    const third = await from("192.0.2.3");
    expect(third.status).toBe(429);
    expect(third.headers.get("ratelimit-policy")).toBe('"default";q=2');
  });

  test.each([
    { failure: "closed" as const, status: 503, title: "Service Unavailable" },
    { failure: "open" as const, status: 200, title: undefined },
  ])(
    "a rejecting limiter with failure $failure answers $status, never 429",
    async ({ failure, status, title }) => {
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
      if (title === undefined) expect(await response.text()).toBe("ok");
      else expect((await response.json()).title).toBe(title);
      expect(onError.mock.calls).toStrictEqual([
        [outage, { ...outageInfo(outage, failure), key: "127.0.0.1" }],
      ]);
    },
  );

  test.each([
    { shape: "throws", consume: () => Promise.reject(new TypeError("not a key")) },
    {
      shape: "rejects",
      consume: () => {
        throw new RangeError("bad cost");
      },
    },
  ])(
    "a limiter that $shape a TypeError/RangeError answers 500, not a pass",
    async ({ consume }) => {
      const onError = vi.fn();
      const url = await start({ limiter: { consume }, failure: "open", onError });
      const response = await fetch(url);
      expect(response.status).toBe(500);
      expect((await response.json()).title).toBe("Internal Server Error");
      expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["programming"]);
    },
  );

  test("a bad cost() answers 500 with failure 'open'", async () => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    const url = await start({ limiter, cost: () => Number.NaN, onError: () => {} });
    expect((await fetch(url)).status).toBe(500);
    expect(limiter.calls).toStrictEqual([]);
  });

  test("an async limiter works like a sync one", async () => {
    const keyed = new RecordingLimiter(1, 1, manualClock());
    const url = await start({
      limiter: { consume: async (key, cost) => keyed.consume(key, cost) },
    });
    expect((await fetch(url)).status).toBe(200);
    const denied = await fetch(url);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("1");
  });

  test("key and skip get Fastify's request; onLimited's return value is sent, its throw is a 500", async () => {
    const limiter = new RecordingLimiter(1, 0.001, manualClock());
    const onError = vi.fn();
    let broken = false;
    const url = await start({
      limiter,
      onError,
      key: (request, clientKey) => String(request.headers["x-api-key"] ?? clientKey),
      skip: (request) => request.headers["x-internal"] === "yes",
      onLimited: (_request, reply, decision) => {
        if (broken) throw new Error("onLimited bug");
        reply.header("content-type", "text/plain");
        return `slow down, ${decision.remaining} left`;
      },
    });
    await fetch(url, { headers: { "x-api-key": "k1" } });
    const limited = await fetch(url, { headers: { "x-api-key": "k1" } });
    expect([limited.status, await limited.text()]).toStrictEqual([429, "slow down, 0 left"]);
    expect(limited.headers.get("retry-after")).toBe("1000");
    broken = true;
    expect((await fetch(url, { headers: { "x-api-key": "k1" } })).status).toBe(500);
    expect((await fetch(url, { headers: { "x-internal": "yes" } })).status).toBe(200);
    expect(limiter.calls.map(([key]) => key)).toStrictEqual(["k1", "k1", "k1"]);
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      ["Error: onLimited bug", "programming"],
    ]);
  });
});

describe("fastifyRateLimit options", () => {
  const limiter = { consume: () => ({}) as Decision };

  test.each([
    {
      name: "max (@fastify/rate-limit's name)",
      options: { limiter, max: 5 },
      message:
        'fastifyRateLimit: unknown option "max" (set the limit on the limiter: capacity for TokenBucket/LeakyBucket, limit for FixedWindow/SlidingWindow*)',
    },
    {
      name: "timeWindow",
      options: { limiter, timeWindow: 60_000 },
      message: 'fastifyRateLimit: unknown option "timeWindow" (set windowMs on the limiter',
    },
    {
      name: "allowList",
      options: { limiter, allowList: ["127.0.0.1"] },
      message: 'fastifyRateLimit: unknown option "allowList" (use skip: (request) => boolean)',
    },
    {
      name: "no limiter",
      options: {},
      message:
        'fastifyRateLimit: missing option "limiter"; for example: app.register(fastifyRateLimit, { limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })',
    },
  ])("refuses $name when the plugin loads", async ({ options, message }) => {
    const app = Fastify();
    apps.push(app);
    const loading = app.register(fastifyRateLimit, options as unknown as FastifyRateLimitOptions);
    await expect(loading).rejects.toThrow(TypeError);
    await expect(app.ready()).rejects.toThrow(message);
  });

  test.each([
    {
      name: "trustProxy (the plugin's alone)",
      rateLimit: { trustProxy: 1 },
      message:
        'fastifyRateLimit (route GET /x): unknown option "trustProxy" (set it in the plugin\'s options',
    },
    {
      name: "keyGenerator",
      rateLimit: { keyGenerator: () => "k" },
      message:
        'fastifyRateLimit (route GET /x): unknown option "keyGenerator" (use key: (request, clientKey) => string)',
    },
    {
      name: "a bad policy",
      rateLimit: { policy: "" },
      message: "fastifyRateLimit (route GET /x): policy must be a non-empty string",
    },
    {
      name: "true",
      rateLimit: true,
      message:
        "fastifyRateLimit (route GET /x): config.rateLimit must be false or an object of options, got true (boolean)",
    },
  ])(
    "refuses a route's config.rateLimit of $name when the route is registered",
    async ({ rateLimit, message }) => {
      const app = Fastify();
      apps.push(app);
      await app.register(fastifyRateLimit, { limiter });
      expect(() =>
        app.get("/x", { config: { rateLimit } as Record<string, unknown> }, async () => "x"),
      ).toThrow(message);
    },
  );

  test("a bad config.rateLimit on a route registered before the plugin loaded answers 500, reported", async () => {
    const onError = vi.fn();
    const app = Fastify();
    apps.push(app);
    app.register(fastifyRateLimit, { limiter, onError });
    app.get(
      "/x",
      { config: { rateLimit: { max: 5 } } as Record<string, unknown> },
      async () => "x",
    );
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    expect((await fetch(`${url}/x`)).status).toBe(500);
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      [
        expect.stringContaining('TypeError: fastifyRateLimit (route GET /x): unknown option "max"'),
        "programming",
      ],
    ]);
  });

  test("a route's own limiter gets its own w=, not the plugin's windowSeconds; a disagreeing one is refused", async () => {
    const minute = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
    const halfMinute = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 30_000 }));
    const bucket = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1 }));
    const url = await start({ limiter: minute, windowSeconds: 60 }, (app) => {
      app.get("/", async () => "ok");
      app.get("/own", { config: { rateLimit: { limiter: halfMinute } } }, async () => "ok");
      app.get("/bucket", { config: { rateLimit: { limiter: bucket } } }, async () => "ok");
      app.get(
        "/stated",
        { config: { rateLimit: { limiter: bucket, windowSeconds: 3 } } },
        async () => "ok",
      );
      app.get("/policy", { config: { rateLimit: { policy: "p" } } }, async () => "ok");
    });
    const policyOf = async (path: string) =>
      (await fetch(`${url}${path}`)).headers.get("ratelimit-policy");
    expect(await policyOf("/")).toBe('"default";q=5;w=60');
    expect(await policyOf("/own")).toBe('"default";q=2;w=30');
    expect(await policyOf("/bucket")).toBe('"default";q=3');
    expect(await policyOf("/stated")).toBe('"default";q=3;w=3');
    expect(await policyOf("/policy")).toBe('"p";q=5;w=60');

    const app = Fastify();
    apps.push(app);
    await app.register(fastifyRateLimit, { limiter: minute });
    expect(() =>
      app.get("/x", { config: { rateLimit: { windowSeconds: 30 } } }, async () => "x"),
    ).toThrow(
      new RangeError(
        "fastifyRateLimit (route GET /x): windowSeconds is 30 but the limiter's window is 60 s (windowMs 60000); leave windowSeconds out to send the limiter's own",
      ),
    );
    expect(() =>
      app.get(
        "/y",
        { config: { rateLimit: { limiter: halfMinute, windowSeconds: 60 } } },
        async () => "y",
      ),
    ).toThrow(/route GET \/y\): windowSeconds is 60 but the limiter's window is 30 s/);
  });

  test("wallClock is the plugin's alone; the forwarding-header warning is one line for all routes", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const limiter = new RecordingLimiter(99, 1, manualClock());
      const url = await start({ limiter }, (app) => {
        app.get("/", async () => "ok");
        app.get("/other", { config: { rateLimit: { policy: "other" } } }, async () => "ok");
      });
      const forwarded = { headers: { "x-forwarded-for": "203.0.113.7" } };
      for (const path of ["/", "/other", "/", "/other"]) {
        expect((await fetch(`${url}${path}`, forwarded)).status).toBe(200);
      }
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(
        /^fastifyRateLimit: a request from 127\.0\.0\.1 carried X-Forwarded-For but trustProxy is not set/,
      );
    } finally {
      warn.mockRestore();
    }
    const app = Fastify();
    apps.push(app);
    await app.register(fastifyRateLimit, { limiter: { consume: () => ({}) as Decision } });
    expect(() =>
      app.get(
        "/z",
        { config: { rateLimit: { wallClock: Date.now } } as Record<string, unknown> },
        async () => "z",
      ),
    ).toThrow(
      'fastifyRateLimit (route GET /z): unknown option "wallClock" (set it in the plugin\'s options: one wall clock for every route)',
    );
  });

  test("names itself and opts out of encapsulation", () => {
    const plugin = fastifyRateLimit as unknown as Record<symbol, unknown>;
    expect(plugin[Symbol.for("skip-override")]).toBe(true);
    expect(plugin[Symbol.for("fastify.display-name")]).toBe("tollgate-rate-limit");
  });
});
