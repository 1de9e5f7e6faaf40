import vm from "node:vm";
import type { ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import { type FetchRateLimitOptions, withRateLimit } from "../../src/http/fetch.js";
import { QUOTA_EXCEEDED_TYPE } from "../../src/http/headers.js";
import { manualClock } from "../support/manual-clock.js";
import {
  closeServed,
  describeWiring,
  limitHeaders,
  outageInfo,
  RecordingLimiter,
  serveFetch,
} from "./support.js";

const servers: ServerType[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(closeServed));
});

/**
 * A fetch handler answering "ok" behind the middleware, served on a loopback port by
 * @hono/node-server (which passes `{ incoming, outgoing }` as the second argument).
 */
async function startFetch(options: FetchRateLimitOptions): Promise<string> {
  return serveFetch(withRateLimit(ok, options), servers);
}

describeWiring("withRateLimit", startFetch);

const ok = () => new Response("ok");
const get = (headers: Record<string, string> = {}) =>
  new Request("http://example.test/", { headers });
/** What Deno.serve passes as the second argument. */
const denoInfo = (hostname: string) => ({ remoteAddr: { hostname, port: 1234, transport: "tcp" } });
/** What Bun.serve passes as the second argument (only requestIP matters here). */
const bunServer = (address: string) => ({
  requestIP: () => ({ address, family: "IPv4", port: 1 }),
});

describe("withRateLimit (called directly under Node)", () => {
  test("step table: headers on allowed responses, then 429 with Retry-After and a problem body", async () => {
    const clock = manualClock();
    const limiter = new RecordingLimiter(2, 1, clock);
    const handler = withRateLimit<unknown[]>(ok, { limiter, windowSeconds: 2 });
    // atMs, status, RateLimit
    const steps = [
      [0, 200, '"default";r=1;t=1'],
      [0, 200, '"default";r=0;t=2'],
      [500, 429, '"default";r=0;t=1'],
      [1000, 200, '"default";r=0;t=2'],
    ] as const;
    for (const [i, [atMs, status, rateLimit]] of steps.entries()) {
      clock.set(atMs);
      const response = (await handler(get(), denoInfo("192.0.2.7")))!;
      expect(response.status, `step ${i}`).toBe(status);
      expect(response.headers.get("ratelimit"), `step ${i}`).toBe(rateLimit);
      expect(response.headers.get("ratelimit-policy"), `step ${i}`).toBe('"default";q=2;w=2');
      if (status === 429) {
        expect(response.headers.get("retry-after"), `step ${i}`).toBe("1");
        expect(response.headers.get("content-type")).toBe("application/problem+json");
        expect((await response.json()).type, `step ${i}`).toBe(QUOTA_EXCEEDED_TYPE);
      } else {
        expect(await response.text(), `step ${i}`).toBe("ok");
      }
    }
    expect(new Set(limiter.calls.map(([key]) => key))).toStrictEqual(new Set(["192.0.2.7"]));
  });

  test.each([
    { name: "Deno info.remoteAddr", args: [denoInfo("::ffff:192.0.2.8")], key: "192.0.2.8" },
    { name: "Bun server.requestIP", args: [bunServer("2001:db8::5")], key: "2001:db8::/56" },
    {
      name: "@hono/node-server env.incoming",
      args: [{ incoming: { socket: { remoteAddress: "192.0.2.9" } } }],
      key: "192.0.2.9",
    },
    { name: "nothing (a bare Request)", args: [], key: "unknown" },
    { name: "Bun requestIP answering null", args: [{ requestIP: () => null }], key: "unknown" },
  ])("finds the peer address from $name", async ({ args, key }) => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    const handler = withRateLimit<unknown[]>(ok, { limiter });
    await handler(get(), ...args);
    expect(limiter.calls).toStrictEqual([[key, 1]]);
  });

  test("remoteAddress overrides the runtime lookup (Workers: cf-connecting-ip)", async () => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    const handler = withRateLimit(ok, {
      limiter,
      remoteAddress: (request) => request.headers.get("cf-connecting-ip") ?? undefined,
    });
    await handler(get({ "cf-connecting-ip": "198.51.100.1" }));
    expect(limiter.calls).toStrictEqual([["198.51.100.1", 1]]);
  });

  test("trustProxy: a forged X-Forwarded-For is ignored when off, the right hop used when on", async () => {
    // The one warning this test sets off, captured and checked rather than printed.
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const off = new RecordingLimiter(5, 1, manualClock());
      const on = new RecordingLimiter(5, 1, manualClock());
      const forged = get({ "x-forwarded-for": "6.6.6.6, 203.0.113.9" });
      await withRateLimit<unknown[]>(ok, { limiter: off })(forged, denoInfo("10.0.0.2"));
      await withRateLimit<unknown[]>(ok, { limiter: on, trustProxy: ["10.0.0.0/8"] })(
        get({ "x-forwarded-for": "6.6.6.6, 203.0.113.9" }),
        denoInfo("10.0.0.2"),
      );
      expect(off.calls).toStrictEqual([["10.0.0.2", 1]]);
      expect(on.calls).toStrictEqual([["203.0.113.9", 1]]);
      expect(warn.mock.calls).toStrictEqual([
        [
          'withRateLimit: a request from 10.0.0.2 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy\'s addresses (trustProxy: ["10.0.0.2"]). This warning is written once.',
        ],
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  test("a cost that can never fit: 413 without Retry-After, body says it can never succeed", async () => {
    const limiter = new RecordingLimiter(2, 1, manualClock());
    const handler = withRateLimit(ok, { limiter, cost: () => 5 });
    const response = (await handler(get()))!;
    expect(response.status).toBe(413);
    expect(limitHeaders(response)).toStrictEqual({
      "ratelimit-policy": '"default";q=2',
      ratelimit: '"default";r=2;t=0',
    });
    const body = await response.json();
    expect(body.detail).toMatch(/can never succeed at this cost/);
    expect(body.status).toBe(413);
  });

  test("rejecting limiter: 503 with failure 'closed', handler called with 'open', onError told", async () => {
    const outage = new Error("store down");
    const limiter = { consume: () => Promise.reject(outage) };
    const onError = vi.fn();
    const handler = vi.fn(ok);
    const closed = (await withRateLimit(handler, { limiter, failure: "closed", onError })(get()))!;
    expect(closed.status).toBe(503);
    expect(handler).not.toHaveBeenCalled();
    const open = (await withRateLimit(handler, { limiter, onError })(get()))!;
    expect(open.status).toBe(200);
    expect(limitHeaders(open)).toStrictEqual({});
    expect(onError.mock.calls).toStrictEqual([
      [outage, { ...outageInfo(outage, "closed"), key: "unknown" }],
      [outage, { ...outageInfo(outage, "open"), key: "unknown" }],
    ]);
  });

  test.each([
    {
      name: "cost NaN",
      hooks: { cost: () => Number.NaN },
      message: "RangeError: withRateLimit: cost() must return a finite number >= 0, got NaN",
    },
    {
      name: "cost -1",
      hooks: { cost: () => -1 },
      message: "RangeError: withRateLimit: cost() must return a finite number >= 0, got -1",
    },
    {
      name: 'cost "5"',
      hooks: { cost: () => "5" as unknown as number },
      message:
        'TypeError: withRateLimit: cost() must return a finite number >= 0, got "5" (string)',
    },
    {
      name: "key a number",
      hooks: { key: () => 42 as unknown as string },
      message: "TypeError: withRateLimit: key() must return a string, got 42",
    },
    {
      name: "remoteAddress throws",
      hooks: {
        remoteAddress: () => {
          throw new Error("no socket");
        },
      },
      message: "Error: no socket",
    },
  ] as Array<{ name: string; hooks: Partial<FetchRateLimitOptions>; message: string }>)(
    "a bad cost() or key() result no longer turns rate limiting off ($name): 500, onError kind 'programming'",
    async ({ hooks, message }) => {
      const limiter = new RecordingLimiter(1, 0.001, manualClock());
      const onError = vi.fn();
      const handler = vi.fn(ok);
      for (const failure of ["open", "closed"] as const) {
        const wrapped = withRateLimit(handler, { limiter, failure, onError, ...hooks });
        for (let i = 0; i < 2; i++) {
          const response = (await wrapped(get()))!;
          expect(response.status, `${failure} ${i}`).toBe(500);
          expect((await response.json()).title).toBe("Internal Server Error");
        }
      }
      expect(handler).not.toHaveBeenCalled();
      expect(limiter.calls).toStrictEqual([]);
      expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual(
        Array.from({ length: 4 }, () => [message, "programming"]),
      );
    },
  );

  test("an onLimited that throws or rejects is a programming error: 500, not a rejected handler", async () => {
    const denial = async () =>
      ({ allowed: false, limit: 1, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000 }) as const;
    const onError = vi.fn();
    for (const onLimited of [
      () => {
        throw new Error("sync onLimited bug");
      },
      async () => {
        throw new Error("async onLimited bug");
      },
    ]) {
      const response = (await withRateLimit(ok, {
        limiter: { consume: denial },
        onError,
        onLimited,
      })(get()))!;
      expect(response.status).toBe(500);
      expect((await response.json()).title).toBe("Internal Server Error");
    }
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      ["Error: sync onLimited bug", "programming"],
      ["Error: async onLimited bug", "programming"],
    ]);
  });

  test("invalid limiter output (a denial with retryAfterMs -100) is a programming error: 500, handler not called", async () => {
    const onError = vi.fn();
    const handler = vi.fn(ok);
    const wrapped = withRateLimit(handler, {
      limiter: {
        consume: async () => ({
          allowed: false,
          limit: 1,
          remaining: 0,
          retryAfterMs: -100,
          resetAfterMs: 0,
        }),
      },
      onError,
    });
    expect((await wrapped(get()))!.status).toBe(500);
    expect(handler).not.toHaveBeenCalled();
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      [
        "RangeError: rateLimitHeaders: decision.retryAfterMs must be a number >= 0 or Infinity on a denial, got -100",
        "programming",
      ],
    ]);
  });

  test("a limiter thenable whose then() throws is an outage (open: handler, closed: 503)", async () => {
    const thenThrows = {
      // biome-ignore lint/suspicious/noThenProperty: a hand-made thenable is the point
      then() {
        throw new Error("then() broke");
      },
    } as unknown as PromiseLike<Decision>;
    const onError = vi.fn();
    const limiter = { consume: () => thenThrows };
    const open = (await withRateLimit(ok, { limiter, onError })(get()))!;
    const closed = (await withRateLimit(ok, { limiter, onError, failure: "closed" })(get()))!;
    expect([open.status, closed.status]).toStrictEqual([200, 503]);
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      ["Error: then() broke", "outage"],
      ["Error: then() broke", "outage"],
    ]);
  });

  test("a response with immutable headers (Response.redirect) is copied to add the headers", async () => {
    const limiter = new RecordingLimiter(2, 1, manualClock());
    const handler = withRateLimit(() => Response.redirect("http://example.test/next", 302), {
      limiter,
    });
    const response = (await handler(get()))!;
    expect(response.status).toBe(302);
    expect(response.headers.get("location")).toBe("http://example.test/next");
    expect(response.headers.get("ratelimit")).toBe('"default";r=1;t=1');
  });

  test("a handler that returns undefined (Bun after server.upgrade) passes it through", async () => {
    const limiter = new RecordingLimiter(2, 1, manualClock());
    expect(await withRateLimit(() => undefined, { limiter })(get())).toBeUndefined();
  });

  test("errors thrown by the handler propagate unchanged (they are not limiter failures)", async () => {
    const onError = vi.fn();
    const boom = new Error("handler bug");
    const handler = withRateLimit(
      () => {
        throw boom;
      },
      { limiter: new RecordingLimiter(2, 1, manualClock()), onError },
    );
    await expect(handler(get())).rejects.toBe(boom);
    expect(onError).not.toHaveBeenCalled();
  });

  test("onLimited answers, and still gets the headers; skip bypasses the limiter", async () => {
    const limiter = new RecordingLimiter(1, 1, manualClock());
    const handler = withRateLimit(ok, {
      limiter,
      skip: (request) => new URL(request.url).pathname === "/health",
      onLimited: (_request, decision) =>
        new Response(`wait ${decision.retryAfterMs} ms`, { status: 429 }),
    });
    await handler(get());
    const limited = (await handler(get()))!;
    expect(await limited.text()).toBe("wait 1000 ms");
    expect(limited.headers.get("retry-after")).toBe("1");
    const health = (await handler(new Request("http://example.test/health")))!;
    expect(health.status).toBe(200);
    expect(limitHeaders(health)).toStrictEqual({});
    expect(limiter.calls).toHaveLength(2);
  });

  test("two wrappers (two policies) append to the same List fields", async () => {
    const clock = manualClock();
    const inner = withRateLimit(ok, {
      limiter: new RecordingLimiter(100, 0, clock),
      policy: "daily",
    });
    const outer = withRateLimit(inner, {
      limiter: new RecordingLimiter(5, 1, clock),
      policy: "burst",
    });
    const response = (await outer(get()))!;
    expect(response.headers.get("ratelimit")).toBe('"daily";r=99, "burst";r=4;t=1');
  });

  test("wraps a Hono app's fetch (Hono on Deno passes Deno's info as env)", async () => {
    const app = new Hono();
    app.get("/", (c) => c.text("hono"));
    const limiter = new RecordingLimiter(1, 1, manualClock());
    const handler = withRateLimit(app.fetch, { limiter });
    const first = (await handler(get(), denoInfo("192.0.2.10")))!;
    expect([first.status, await first.text(), first.headers.get("ratelimit")]).toStrictEqual([
      200,
      "hono",
      '"default";r=0;t=1',
    ]);
    const second = (await handler(get(), denoInfo("192.0.2.10")))!;
    expect([second.status, second.headers.get("retry-after")]).toStrictEqual([429, "1"]);
    expect(limiter.calls).toStrictEqual([
      ["192.0.2.10", 1],
      ["192.0.2.10", 1],
    ]);
  });

  test.each([
    {
      name: "handler not a function",
      handler: "nope",
      options: { limiter: new RecordingLimiter(1, 1, manualClock()) },
      error: new TypeError('withRateLimit: handler must be a function, got "nope" (string)'),
    },
    {
      name: "no limiter",
      handler: ok,
      options: {},
      error: new TypeError(
        'withRateLimit: missing option "limiter"; for example: withRateLimit(handler, { limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })',
      ),
    },
    {
      name: "remoteAddress not a function",
      handler: ok,
      options: { limiter: new RecordingLimiter(1, 1, manualClock()), remoteAddress: "x" },
      error: new TypeError('withRateLimit: remoteAddress must be a function, got "x" (string)'),
    },
    {
      name: "windowMs (express-rate-limit's name)",
      handler: ok,
      options: { limiter: new RecordingLimiter(1, 1, manualClock()), windowMs: 1000, max: 5 },
      error: new TypeError(
        [
          "withRateLimit: 2 problems with the options:",
          '  - unknown option "windowMs" (set windowMs on the limiter (FixedWindow/SlidingWindow*) instead, or refillPerSecond on a bucket)',
          '  - unknown option "max" (set the limit on the limiter: capacity for TokenBucket/LeakyBucket, limit for FixedWindow/SlidingWindow*)',
          "  known options: limiter, policy, windowSeconds, headers, wallClock, failure, onError, trustProxy, proxyHeader, ipv6Prefix, blockDurationMs, nearLimitShare, key, cost, skip, onLimited, remoteAddress, refundIf, refundAborted, onNearLimit",
        ].join("\n"),
      ),
    },
    {
      name: "failure unknown",
      handler: ok,
      options: { limiter: new RecordingLimiter(1, 1, manualClock()), failure: "retry" },
      error: new RangeError(
        'withRateLimit: failure must be one of "open", "closed", got "retry" (string)',
      ),
    },
  ])("rejects $name", ({ handler, options, error }) => {
    const call = () =>
      withRateLimit(handler as typeof ok, options as unknown as FetchRateLimitOptions);
    expect(call).toThrow(error);
    expect(call).toThrow(error.constructor as typeof Error);
  });
});

describe("withRateLimit: an unkeyed limiter or a limiter's TypeError no longer fails open", () => {
  test("withRateLimit with an unkeyed TokenBucket limits all requests as one global limit", async () => {
    const limiter = new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock: manualClock() });
    const handler = withRateLimit<unknown[]>(ok, { limiter });
    expect((await handler(get(), denoInfo("192.0.2.1")))!.status).toBe(200);
    expect((await handler(get(), denoInfo("192.0.2.2")))!.status).toBe(429);
  });

  test.each([
    {
      shape: "throws",
      consume: () => {
        throw new TypeError("not a key");
      },
    },
    { shape: "rejects", consume: () => Promise.reject(new RangeError("bad cost")) },
  ])(
    "a limiter that $shape a TypeError/RangeError answers 500, not a pass",
    async ({ consume }) => {
      const onError = vi.fn();
      const handler = vi.fn(ok);
      const wrapped = withRateLimit(handler, { limiter: { consume }, failure: "open", onError });
      const response = await wrapped(get());
      expect(response.status).toBe(500);
      expect(handler).not.toHaveBeenCalled();
      expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["programming"]);
    },
  );
});

describe("withRateLimit: a limiter of another tollgate copy is recognised by its brand", () => {
  test("every unkeyed class and allOf carries the shared Symbol.for brand", async () => {
    const { FixedWindow, LeakyBucket, SlidingWindowCounter, SlidingWindowLog, allOf } =
      await import("../../src/index.js");
    const clock = manualClock();
    const limiters = [
      new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }),
      new LeakyBucket({ capacity: 1, leakPerSecond: 1, clock }),
      new FixedWindow({ limit: 1, windowMs: 1000, clock }),
      new SlidingWindowLog({ limit: 1, windowMs: 1000, clock }),
      new SlidingWindowCounter({ limit: 1, windowMs: 1000, clock }),
    ];
    const brand = Symbol.for("tollgate.unkeyedLimiter");
    for (const limiter of [...limiters, allOf(...limiters)]) {
      expect((limiter as unknown as Record<symbol, unknown>)[brand]).toBe(true);
      expect(Object.keys(limiter)).not.toContain(brand.toString());
    }
  });

  test("a branded limiter whose class is not this copy's is one global limit, called as consume(cost)", async () => {
    // What a TokenBucket from the other build looks like here: another class, same brand.
    const inner = new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock: manualClock() });
    class OtherCopyBucket {
      consume(...args: unknown[]): Decision {
        return inner.consume(...(args as [number?]));
      }
    }
    Object.defineProperty(OtherCopyBucket.prototype, Symbol.for("tollgate.unkeyedLimiter"), {
      value: true,
    });
    const onError = vi.fn();
    const handler = withRateLimit<unknown[]>(ok, {
      limiter: new OtherCopyBucket() as unknown as FetchRateLimitOptions["limiter"],
      onError,
    });
    expect((await handler(get(), denoInfo("192.0.2.1")))!.status).toBe(200);
    expect((await handler(get(), denoInfo("192.0.2.2")))!.status).toBe(429);
    expect(onError).not.toHaveBeenCalled();
  });
});

describe("withRateLimit: a TypeError or RangeError from another realm is a programming error", () => {
  test.each([
    ["a vm context's TypeError", () => vm.runInNewContext("new TypeError('bad key')")],
    ["a vm context's RangeError", () => vm.runInNewContext("new RangeError('bad cost')")],
    ["an object named TypeError", () => ({ name: "TypeError", message: "bad key" })],
    [
      "an object whose name getter throws",
      () => ({
        get name(): string {
          throw new Error("hostile");
        },
      }),
    ],
  ])("%s thrown by the limiter answers 500 under failure 'open', not a pass", async (_, make) => {
    const onError = vi.fn();
    const handler = vi.fn(ok);
    const wrapped = withRateLimit(handler, {
      limiter: {
        consume: () => {
          throw make();
        },
      },
      failure: "open",
      onError,
    });
    expect((await wrapped(get())).status).toBe(500);
    expect(handler).not.toHaveBeenCalled();
    expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["programming"]);
  });

  test("a vm context's plain Error is still an outage (passed under 'open')", async () => {
    const onError = vi.fn();
    const wrapped = withRateLimit(ok, {
      limiter: {
        consume: () => Promise.reject(vm.runInNewContext("new Error('down')")),
      },
      failure: "open",
      onError,
    });
    expect((await wrapped(get())).status).toBe(200);
    expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual(["outage"]);
  });
});
