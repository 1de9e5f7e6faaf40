import { createServer, IncomingMessage, type Server, ServerResponse } from "node:http";
import { Socket } from "node:net";
import express from "express";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { allOf } from "../../src/composite/all-of.js";
import type { Decision } from "../../src/core/limiter.js";
import { OVERSIZED_KEY } from "../../src/http/client-key.js";
import { MAX_REMEMBERED_ERRORS } from "../../src/http/core.js";
import { QUOTA_EXCEEDED_TYPE } from "../../src/http/headers.js";
import { type RateLimitOptions, rateLimit } from "../../src/http/node.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";
import {
  close,
  describeWiring,
  limitHeaders,
  listen,
  outageInfo,
  RESET_AT_T1,
  RecordingLimiter,
  WALL_MS,
} from "./support.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(close));
  vi.restoreAllMocks();
});

/** A node:http server whose only handler answers "ok" behind the middleware. */
async function nodeServer(options: RateLimitOptions, host = "127.0.0.1"): Promise<string> {
  const limit = rateLimit(options);
  const server = createServer((req, res) => limit(req, res, () => res.end("ok")));
  servers.push(server);
  return listen(server, host);
}

/**
 * An Express 5 app with the middleware in front of GET /; `trustProxy`, when given, is
 * the app's own `trust proxy` setting (which tollgate does not inherit).
 */
async function expressServer(options: RateLimitOptions, trustProxy?: unknown): Promise<string> {
  const app = express();
  if (trustProxy !== undefined) app.set("trust proxy", trustProxy);
  app.use(rateLimit(options));
  app.get("/", (_req, res) => {
    res.send("ok");
  });
  const server = createServer(app);
  servers.push(server);
  return listen(server);
}

// at ms, expected status, expected rate-limit headers (exact), body check
type Step = [atMs: number, status: number, headers: Record<string, string>];

/** capacity 2, 1 token per second, window advertised as 2 s. */
const steps: Step[] = [
  [0, 200, { "ratelimit-policy": '"default";q=2;w=2', ratelimit: '"default";r=1;t=1' }],
  [0, 200, { "ratelimit-policy": '"default";q=2;w=2', ratelimit: '"default";r=0;t=2' }],
  [
    0,
    429,
    {
      "ratelimit-policy": '"default";q=2;w=2',
      ratelimit: '"default";r=0;t=1',
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": RESET_AT_T1, // the moment 1 s on, in its Unix second
      "retry-after": "1",
    },
  ],
  [
    300,
    429,
    {
      "ratelimit-policy": '"default";q=2;w=2',
      ratelimit: '"default";r=0;t=1',
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1767225600", // 0.7 s on: still the second of WALL_MS
      "retry-after": "1",
    },
  ],
  [1000, 200, { "ratelimit-policy": '"default";q=2;w=2', ratelimit: '"default";r=0;t=2' }],
];

describe.each([
  { name: "node:http", start: nodeServer },
  { name: "Express 5", start: expressServer },
])("$name end to end", ({ start }) => {
  test("allowed requests carry the headers; the limit gives a 429 with Retry-After and a problem body", async () => {
    const clock = manualClock();
    const limiter = new RecordingLimiter(2, 1, clock);
    const url = await start({ limiter, windowSeconds: 2, wallClock: () => WALL_MS });
    for (const [i, [atMs, status, headers]] of steps.entries()) {
      clock.set(atMs);
      const response = await fetch(url);
      const body = await response.text();
      expect(response.status, `step ${i}`).toBe(status);
      expect(limitHeaders(response), `step ${i}`).toStrictEqual(headers);
      if (status === 200) {
        expect(body, `step ${i}`).toBe("ok");
      } else {
        expect(response.headers.get("content-type"), `step ${i}`).toBe("application/problem+json");
        expect(JSON.parse(body), `step ${i}`).toStrictEqual({
          type: QUOTA_EXCEEDED_TYPE,
          title: "Request cannot be satisfied as assigned quota has been exceeded",
          status: 429,
          detail: "Quota exceeded; retry after 1 second.",
          "violated-policies": ["default"],
        });
      }
    }
    expect(limiter.calls.map(([key]) => key)).toStrictEqual(steps.map(() => "127.0.0.1"));
  });

  test("headers 'both' adds X-RateLimit-*; a cost that can never fit has no Retry-After and says so", async () => {
    const clock = manualClock();
    const limiter = new RecordingLimiter(2, 1, clock);
    const url = await start({
      limiter,
      headers: "both",
      policy: "api",
      wallClock: () => WALL_MS,
      cost: (req) => Number(req.headers["x-cost"] ?? 1),
    });
    let response = await fetch(url);
    expect(limitHeaders(response)).toStrictEqual({
      "ratelimit-policy": '"api";q=2',
      ratelimit: '"api";r=1;t=1',
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "1",
      "x-ratelimit-reset": RESET_AT_T1,
    });
    response = await fetch(url, { headers: { "x-cost": "3" } });
    expect(response.status).toBe(413); // above the limit: retrying cannot help
    // No X-RateLimit-Remaining nor -Reset: GitHub-style clients would wait for it and retry.
    expect(limitHeaders(response)).toStrictEqual({
      "ratelimit-policy": '"api";q=2',
      ratelimit: '"api";r=1;t=1',
      "x-ratelimit-limit": "2",
    });
    expect((await response.json()).detail).toBe(
      'This request (cost 3) can never succeed at this cost: policy "api" will never have 3 units available (quota 2). Retrying will not help.',
    );
    expect(limiter.calls).toStrictEqual([
      ["127.0.0.1", 1],
      ["127.0.0.1", 3],
    ]);
  });

  test("trustProxy off ignores a forged X-Forwarded-For; 1 hop uses the last entry", async () => {
    // The one warning this test sets off, captured and checked rather than printed.
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const clock = manualClock();
      const off = new RecordingLimiter(1, 1, clock);
      const on = new RecordingLimiter(1, 1, clock);
      const urlOff = await start({ limiter: off });
      const urlOn = await start({ limiter: on, trustProxy: 1 });
      // Two "different" clients behind a forged header are one client when nothing is trusted.
      expect((await fetch(urlOff, { headers: { "x-forwarded-for": "6.6.6.6" } })).status).toBe(200);
      expect((await fetch(urlOff, { headers: { "x-forwarded-for": "7.7.7.7" } })).status).toBe(429);
      expect(off.calls.map(([key]) => key)).toStrictEqual(["127.0.0.1", "127.0.0.1"]);
      // Behind one trusted proxy, the entry it appended is the client; a forged prefix is ignored.
      const hop = (xff: string) => fetch(urlOn, { headers: { "x-forwarded-for": xff } });
      expect((await hop("1.1.1.1, 203.0.113.9")).status).toBe(200);
      expect((await hop("2.2.2.2, 203.0.113.9")).status).toBe(429);
      expect((await hop("203.0.113.10")).status).toBe(200);
      expect(on.calls.map(([key]) => key)).toStrictEqual([
        "203.0.113.9",
        "203.0.113.9",
        "203.0.113.10",
      ]);
      expect(warn.mock.calls).toStrictEqual([
        [
          'rateLimit: a request from 127.0.0.1 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy\'s addresses (trustProxy: ["127.0.0.1"]). This warning is written once.',
        ],
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  test("IPv6 clients in one /56 share a key; another /56 does not", async () => {
    const limiter = new RecordingLimiter(1, 1, manualClock());
    const url = await start({ limiter, trustProxy: ["127.0.0.1"] });
    const from = (xff: string) => fetch(url, { headers: { "x-forwarded-for": xff } });
    expect((await from("2001:db8:1:2::a")).status).toBe(200);
    expect((await from("2001:db8:1:ff:ffff::b")).status).toBe(429);
    expect((await from("2001:db8:1:100::a")).status).toBe(200);
    expect(limiter.calls.map(([key]) => key)).toStrictEqual([
      "2001:db8:1::/56",
      "2001:db8:1::/56",
      "2001:db8:1:100::/56",
    ]);
  });

  test("a rejecting limiter gives 503 with failure 'closed' and passes with 'open'; never 429", async () => {
    const outage = new Error("store down");
    const limiter = { consume: () => Promise.reject(outage) };
    const onError = vi.fn();
    const closed = await start({ limiter, failure: "closed", onError });
    const open = await start({ limiter, failure: "open", onError });
    const refused = await fetch(closed);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("content-type")).toBe("application/problem+json");
    expect((await refused.json()).title).toBe("Service Unavailable");
    const passed = await fetch(open);
    expect(passed.status).toBe(200);
    expect(await passed.text()).toBe("ok");
    expect(limitHeaders(passed)).toStrictEqual({});
    expect(onError.mock.calls).toStrictEqual([
      [outage, { ...outageInfo(outage, "closed"), key: "127.0.0.1" }],
      [outage, { ...outageInfo(outage, "open"), key: "127.0.0.1" }],
    ]);
  });
});

describe.each([
  { name: "node:http", start: nodeServer },
  { name: "Express 5", start: expressServer },
])("$name: a bad cost() or key() result no longer turns rate limiting off", ({ start }) => {
  // Before: the limiter threw on the bad value, the middleware took it for a store outage
  // and the default failure 'open' let every request through with a 200.
  const bad: Array<{
    name: string;
    hooks: Pick<RateLimitOptions, "key" | "cost" | "skip">;
    error: Error;
  }> = [
    {
      name: "cost NaN",
      hooks: { cost: () => Number.NaN },
      error: new RangeError("rateLimit: cost() must return a finite number >= 0, got NaN"),
    },
    {
      name: "cost -1",
      hooks: { cost: () => -1 },
      error: new RangeError("rateLimit: cost() must return a finite number >= 0, got -1"),
    },
    {
      name: "cost Infinity",
      hooks: { cost: () => Number.POSITIVE_INFINITY },
      error: new RangeError("rateLimit: cost() must return a finite number >= 0, got Infinity"),
    },
    {
      name: 'cost "5"',
      hooks: { cost: () => "5" as unknown as number },
      error: new TypeError('rateLimit: cost() must return a finite number >= 0, got "5" (string)'),
    },
    {
      name: "cost undefined",
      hooks: { cost: () => undefined as unknown as number },
      error: new TypeError("rateLimit: cost() must return a finite number >= 0, got undefined"),
    },
    {
      name: "key a number",
      hooks: { key: () => 42 as unknown as string },
      error: new TypeError("rateLimit: key() must return a string, got 42"),
    },
    {
      name: "key undefined",
      hooks: { key: () => undefined as unknown as string },
      error: new TypeError("rateLimit: key() must return a string, got undefined"),
    },
    {
      name: "key throws (a missing body)",
      hooks: {
        key: (req) => (req as unknown as { body: { user: string } }).body.user,
      },
      error: new TypeError("Cannot read properties of undefined (reading 'user')"),
    },
    {
      name: "skip throws",
      hooks: {
        skip: () => {
          throw new Error("skip bug");
        },
      },
      error: new Error("skip bug"),
    },
  ];
  test.each(bad)(
    "$name: 500 with failure 'open' and 'closed', onError kind 'programming'",
    async ({ hooks, error }) => {
      const limiter = new RecordingLimiter(1, 0.001, manualClock());
      const onError = vi.fn();
      for (const failure of ["open", "closed"] as const) {
        const url = await start({ limiter, failure, onError, ...hooks });
        for (let i = 0; i < 2; i++) {
          const response = await fetch(url);
          expect(response.status, `${failure} ${i}`).toBe(500);
          expect(response.headers.get("content-type")).toBe("application/problem+json");
          expect(await response.json()).toStrictEqual({
            type: "about:blank",
            title: "Internal Server Error",
            status: 500,
            detail: "The request could not be checked against its rate limit, so it was refused.",
          });
        }
      }
      expect(limiter.calls).toStrictEqual([]);
      expect(onError).toHaveBeenCalledTimes(4);
      for (const [i, [reported, info]] of onError.mock.calls.entries()) {
        expect(reported, `call ${i}`).toBeInstanceOf(error.constructor);
        expect((reported as Error).message, `call ${i}`).toBe(error.message);
        expect(info, `call ${i}`).toMatchObject({ kind: "programming" });
      }
    },
  );

  test("the QA repro: cost () => NaN on a bucket of 1 answers 500, not 200", async () => {
    const limiter = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0.001 }));
    const url = await start({ limiter, cost: () => Number.NaN, onError: () => {} });
    for (let i = 0; i < 3; i++) expect((await fetch(url)).status, `request ${i}`).toBe(500);
  });
});

/**
 * A server with the middleware in front of a handler answering "ok", recording every call
 * of `next` (node:http: the handler gets next's argument; Express: an error handler
 * records next(err) and answers 599), so a test can check that each request ended in
 * exactly one way.
 */
type Recorded = { url: string; nexts: unknown[] };
async function recordingNode(options: RateLimitOptions): Promise<Recorded> {
  const nexts: unknown[] = [];
  const limit = rateLimit(options);
  const server = createServer((req, res) =>
    limit(req, res, (error) => {
      nexts.push(error);
      res.end("ok");
    }),
  );
  servers.push(server);
  return { url: await listen(server), nexts };
}
async function recordingExpress(options: RateLimitOptions): Promise<Recorded> {
  const nexts: unknown[] = [];
  const app = express();
  app.use(rateLimit(options));
  app.get("/", (_req, res) => {
    nexts.push(undefined);
    res.send("ok");
  });
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: unknown) => {
    nexts.push(error);
    res.status(599).end();
  });
  const server = createServer(app);
  servers.push(server);
  return { url: await listen(server), nexts };
}

const denial: Decision = {
  allowed: false,
  limit: 1,
  remaining: 0,
  retryAfterMs: 1000,
  resetAfterMs: 1000,
};
/** The same denial from a sync limiter, an async one, and a bare thenable. */
const denying = [
  { shape: "sync", limiter: { consume: () => denial } },
  { shape: "async", limiter: { consume: async () => denial } },
  {
    shape: "thenable",
    limiter: {
      consume: () =>
        // biome-ignore lint/suspicious/noThenProperty: a hand-made thenable is the point
        ({ then: (resolve: (d: Decision) => void) => resolve(denial) }) as PromiseLike<Decision>,
    },
  },
];

describe.each([
  { server: "node:http", start: recordingNode },
  { server: "Express 5", start: recordingExpress },
])(
  "$server: an onLimited that throws, or an odd thenable, no longer crashes the server or hangs the request",
  ({ start }) => {
    const escaped: unknown[] = [];
    const record = (error: unknown) => escaped.push(error);
    beforeEach(() => {
      escaped.length = 0;
      process.on("unhandledRejection", record);
      process.on("uncaughtException", record);
    });
    afterEach(() => {
      process.off("unhandledRejection", record);
      process.off("uncaughtException", record);
      expect(escaped, "nothing escaped the middleware").toStrictEqual([]);
    });

    test.each(denying)(
      "$shape limiter, onLimited throws: 500, onError kind 'programming', next never called",
      async ({ limiter }) => {
        const onError = vi.fn();
        const bug = new Error("onLimited bug");
        const { url, nexts } = await start({
          limiter,
          onError,
          onLimited: () => {
            throw bug;
          },
        });
        const response = await fetch(url);
        expect(response.status).toBe(500);
        expect((await response.json()).title).toBe("Internal Server Error");
        expect(response.headers.get("retry-after")).toBe("1");
        expect(nexts).toStrictEqual([]);
        expect(onError.mock.calls).toStrictEqual([
          [
            bug,
            {
              error: bug,
              operation: "consume",
              outcome: "error",
              kind: "programming",
              failure: "open",
              key: "127.0.0.1",
            },
          ],
        ]);
      },
    );

    test.each(denying)(
      "$shape limiter, async onLimited rejects: 500, not an unhandled rejection",
      async ({ limiter }) => {
        const onError = vi.fn();
        const { url, nexts } = await start({
          limiter,
          onError,
          onLimited: async () => {
            throw new Error("async onLimited bug");
          },
        });
        expect((await fetch(url)).status).toBe(500);
        expect(nexts).toStrictEqual([]);
        expect(onError).toHaveBeenCalledTimes(1);
      },
    );

    test.each(denying)(
      "$shape limiter, onLimited calls next() then throws: passed once, only reported",
      async ({ limiter }) => {
        const onError = vi.fn();
        const { url, nexts } = await start({
          limiter,
          onError,
          onLimited: (_req, _res, next) => {
            next();
            throw new Error("after next");
          },
        });
        const response = await fetch(url);
        expect([response.status, await response.text()]).toStrictEqual([200, "ok"]);
        expect(nexts).toStrictEqual([undefined]);
        expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual(
          [["Error: after next", "programming"]],
        );
      },
    );

    test.each(denying)(
      "$shape limiter, onLimited starts a response then throws: the response is cut off, not left hanging",
      async ({ limiter }) => {
        const { url, nexts } = await start({
          limiter,
          onError: () => {},
          onLimited: (_req, res) => {
            res.writeHead(429, { "content-type": "text/plain" });
            res.write("partial");
            throw new Error("mid-response");
          },
        });
        // Destroyed before the buffered head went out: the client sees the connection close.
        await expect(fetch(url).then((response) => response.text())).rejects.toThrow();
        expect(nexts).toStrictEqual([]);
      },
    );

    test.each([
      { failure: "open" as const, status: 200, nexts: [undefined] },
      { failure: "closed" as const, status: 503, nexts: [] },
    ])(
      "a thenable whose then() throws is an outage (failure $failure: $status), not an uncaught exception",
      async ({ failure, status, nexts: expected }) => {
        const onError = vi.fn();
        const thenThrows = {
          // biome-ignore lint/suspicious/noThenProperty: a hand-made thenable is the point
          then() {
            throw new Error("then() broke");
          },
        } as unknown as PromiseLike<Decision>;
        const { url, nexts } = await start({
          limiter: { consume: () => thenThrows },
          failure,
          onError,
        });
        expect((await fetch(url)).status).toBe(status);
        expect(nexts).toStrictEqual(expected);
        expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual(
          [["Error: then() broke", "outage"]],
        );
      },
    );

    test("a thenable that settles twice answers once", async () => {
      const twice = {
        // biome-ignore lint/suspicious/noThenProperty: a hand-made thenable is the point
        then(resolve: (d: Decision) => void, reject: (e: unknown) => void) {
          resolve(denial);
          reject(new Error("late"));
          resolve({ ...denial, allowed: true });
        },
      } as PromiseLike<Decision>;
      const { url, nexts } = await start({ limiter: { consume: () => twice } });
      const response = await fetch(url);
      expect(response.status).toBe(429);
      expect(nexts).toStrictEqual([]);
    });
  },
);

describe("rateLimit on node:http", () => {
  test("regression: a client's header length decided the registry's memory (keys over maxKeyLength share one)", async () => {
    const clock = manualClock();
    const limiter = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }), {
      maxKeyLength: 64,
    });
    const url = await nodeServer({
      limiter,
      key: (req) => String(req.headers["x-api-key"]),
    });
    const send = (key: string) => fetch(url, { headers: { "x-api-key": key } });
    // Three different 8 KB keys: one budget of 2, one key kept, 64 code units at most.
    expect((await send("a".repeat(8000))).status).toBe(200);
    expect((await send("b".repeat(8000))).status).toBe(200);
    expect((await send("c".repeat(8000))).status, "the third shares the budget").toBe(429);
    expect(limiter.size).toBe(1);
    expect(limiter.peek(OVERSIZED_KEY).remaining).toBe(0);
    expect((await send("short")).status, "a key within the bound has its own").toBe(200);
    expect(limiter.size).toBe(2);
  });

  test("a limiter that throws synchronously is a failure, not a crash", async () => {
    const onError = vi.fn(() => {
      throw new Error("the hook itself fails");
    });
    const url = await nodeServer({
      limiter: {
        consume: () => {
          throw new Error("sync");
        },
      },
      failure: "closed",
      onError,
    });
    expect((await fetch(url)).status).toBe(503);
    expect((await fetch(url)).status).toBe(503);
    expect(onError).toHaveBeenCalledTimes(2);
  });

  test.each([
    {
      name: "remaining NaN",
      decision: { allowed: true, limit: 10, remaining: Number.NaN } as Decision,
      message: "RangeError: rateLimitHeaders: decision.remaining must be a number, got NaN",
    },
    {
      name: "an allowed decision with limit -1 (was sent as q=0)",
      decision: { ...denial, allowed: true, limit: -1 },
      message:
        "RangeError: rateLimitHeaders: decision.limit must be a number >= 0 or Infinity, got -1",
    },
    {
      name: "an allowed decision with resetAfterMs -5 (was sent as t=0)",
      decision: { ...denial, allowed: true, resetAfterMs: -5 },
      message:
        "RangeError: rateLimitHeaders: decision.resetAfterMs must be a number >= 0 or Infinity, got -5",
    },
    {
      name: "a denial with retryAfterMs -100 (was sent as Retry-After: 1)",
      decision: { ...denial, retryAfterMs: -100 },
      message:
        "RangeError: rateLimitHeaders: decision.retryAfterMs must be a number >= 0 or Infinity on a denial, got -100",
    },
    {
      name: "a denial with retryAfterMs NaN",
      decision: { ...denial, retryAfterMs: Number.NaN },
      message: "RangeError: rateLimitHeaders: decision.retryAfterMs must be a number, got NaN",
    },
    {
      name: "not an object",
      decision: null as unknown as Decision,
      message:
        "TypeError: rateLimitHeaders: decision must be an object with a boolean allowed, got null",
    },
  ])(
    "invalid limiter output ($name) is a programming error: 500 even with failure 'open'",
    async ({ decision, message }) => {
      const onError = vi.fn();
      for (const consume of [() => decision, async () => decision]) {
        const url = await nodeServer({ limiter: { consume }, onError });
        const response = await fetch(url);
        expect(response.status).toBe(500);
        expect(limitHeaders(response)).toStrictEqual({});
      }
      expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
        [message, "programming"],
        [message, "programming"],
      ]);
    },
  );

  test("a denial with limit Infinity is capped as documented: 429, not 500", async () => {
    const onError = vi.fn();
    const url = await nodeServer({
      limiter: { consume: () => ({ ...denial, limit: Number.POSITIVE_INFINITY }) },
      onError,
    });
    const response = await fetch(url);
    expect(response.status).toBe(429);
    expect(response.headers.get("ratelimit-policy")).toBe('"default";q=999999999999999');
    expect(onError).not.toHaveBeenCalled();
  });

  test('headers: "none" still needs a whole Decision: { allowed: true } alone is a 500', async () => {
    // The contract is the Decision; a denial needs retryAfterMs for Retry-After in every
    // mode, and onLimited gets the decision, so no field is optional in one mode only.
    const onError = vi.fn();
    const url = await nodeServer({
      limiter: { consume: () => ({ allowed: true }) as Decision },
      headers: "none",
      onError,
    });
    expect((await fetch(url)).status).toBe(500);
    expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
      [
        "TypeError: rateLimitHeaders: decision.limit must be a number, got undefined",
        "programming",
      ],
    ]);
  });

  test("remaining above the limit from a custom limiter is sent clamped (r=5 of q=5, not r=50)", async () => {
    const url = await nodeServer({
      limiter: {
        consume: () => ({
          allowed: true,
          limit: 5,
          remaining: 50,
          retryAfterMs: 0,
          resetAfterMs: 1000,
        }),
      },
    });
    expect(limitHeaders(await fetch(url))).toStrictEqual({
      "ratelimit-policy": '"default";q=5',
      ratelimit: '"default";r=5;t=1',
    });
  });

  test("the default onError logs at most one line per 10 s during an outage", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const url = await nodeServer({ limiter: { consume: () => Promise.reject(new Error("down")) } });
    for (let i = 0; i < 3; i++) expect((await fetch(url)).status).toBe(200);
    expect(log).toHaveBeenCalledTimes(1);
    expect(log.mock.calls[0]?.[0]).toBe("rateLimit: the limiter failed, let the request through:");
  });

  test("the default onError logs programming errors on their own budget, so an outage cannot hide them", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    let broken = true;
    const url = await nodeServer({
      limiter: { consume: () => Promise.reject(new Error("down")) },
      cost: () => (broken ? Number.NaN : 1),
    });
    expect((await fetch(url)).status).toBe(500);
    expect((await fetch(url)).status).toBe(500); // within 10 s: not logged again
    broken = false;
    expect((await fetch(url)).status).toBe(200); // the outage's first line
    expect(log.mock.calls.map(([line]) => line)).toStrictEqual([
      "rateLimit: programming error, answered 500:",
      "rateLimit: the limiter failed, let the request through:",
    ]);
  });

  test("an async limiter (a promise per decision) works like a sync one", async () => {
    const clock = manualClock();
    const keyed = new RecordingLimiter(1, 1, clock);
    const url = await nodeServer({
      limiter: { consume: async (key, cost) => keyed.consume(key, cost) },
    });
    expect((await fetch(url)).status).toBe(200);
    const denied = await fetch(url);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("1");
  });

  test("skip lets a request through unchecked and without headers", async () => {
    const limiter = new RecordingLimiter(1, 1, manualClock());
    const url = await nodeServer({ limiter, skip: (req) => req.url === "/health" });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${url}/health`);
      expect(response.status).toBe(200);
      expect(limitHeaders(response)).toStrictEqual({});
    }
    expect(limiter.calls).toStrictEqual([]);
  });

  test("key gets the client key and can replace it; onLimited answers instead of the 429", async () => {
    const limiter = new RecordingLimiter(1, 1, manualClock());
    const url = await nodeServer({
      limiter,
      key: (req, client) => String(req.headers["x-api-key"] ?? client),
      onLimited: (_req, res, _next, decision) => {
        res.statusCode = 503;
        res.end(`slow down, ${decision.remaining} left`);
      },
    });
    await fetch(url, { headers: { "x-api-key": "k1" } });
    const limited = await fetch(url, { headers: { "x-api-key": "k1" } });
    expect(limited.status).toBe(503);
    expect(await limited.text()).toBe("slow down, 0 left");
    expect(limited.headers.get("retry-after")).toBe("1");
    await fetch(url);
    expect(limiter.calls.map(([key]) => key)).toStrictEqual(["k1", "k1", "127.0.0.1"]);
  });

  test("headers 'none' sends no RateLimit fields, but a 429 still has Retry-After", async () => {
    const url = await nodeServer({
      limiter: new RecordingLimiter(1, 1, manualClock()),
      headers: "none",
    });
    expect(limitHeaders(await fetch(url))).toStrictEqual({});
    expect(limitHeaders(await fetch(url))).toStrictEqual({ "retry-after": "1" });
  });

  test("two policies stacked: both RateLimit items are sent, as one List", async () => {
    const clock = manualClock();
    const burst = rateLimit({ limiter: new RecordingLimiter(5, 1, clock), policy: "burst" });
    const daily = rateLimit({ limiter: new RecordingLimiter(100, 0, clock), policy: "daily" });
    const server = createServer((req: IncomingMessage, res: ServerResponse) =>
      burst(req, res, () => daily(req, res, () => res.end("ok"))),
    );
    servers.push(server);
    const response = await fetch(await listen(server));
    expect(limitHeaders(response)).toStrictEqual({
      "ratelimit-policy": '"burst";q=5, "daily";q=100',
      ratelimit: '"burst";r=4;t=1, "daily";r=99',
    });
  });

  test("a HEAD request that is limited gets the 429 and headers without a body", async () => {
    const url = await nodeServer({ limiter: new RecordingLimiter(1, 1, manualClock()) });
    await fetch(url, { method: "HEAD" });
    const response = await fetch(url, { method: "HEAD" });
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(await response.text()).toBe("");
  });

  test("keys an IPv6 client by its /56 when the server listens on ::1", async (context) => {
    const limiter = new RecordingLimiter(5, 1, manualClock());
    let url: string;
    try {
      url = await nodeServer({ limiter }, "::1");
    } catch {
      context.skip(); // no IPv6 loopback here; the /56 rule is covered through trustProxy above
      return;
    }
    expect((await fetch(url)).status).toBe(200);
    expect(limiter.calls).toStrictEqual([["::/56", 1]]);
  });
});

describe("rateLimit options", () => {
  const limiter = { consume: () => ({}) as Decision };
  test.each([
    {
      name: "no options",
      options: undefined,
      error: new TypeError(
        "rateLimit: options must be an object, got undefined; for example: rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })",
      ),
    },
    {
      name: "no limiter",
      options: {},
      error: new TypeError(
        'rateLimit: missing option "limiter"; for example: rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })',
      ),
    },
    {
      name: "limiter without consume",
      options: { limiter: { allow: () => true } },
      error: new TypeError(
        "rateLimit: limiter must be a KeyedLimiter (one limit per client), a tollgate limiter such as a TokenBucket (one global limit for all requests) or an object with a consume(key, cost) method, got an object",
      ),
    },
    {
      name: "policy empty",
      options: { limiter, policy: "" },
      error: new RangeError(
        'rateLimit: policy must be a non-empty string of printable ASCII (0x20-0x7E), got "" (string)',
      ),
    },
    {
      name: "windowSeconds negative",
      options: { limiter, windowSeconds: -1 },
      error: new RangeError(
        "rateLimit: windowSeconds must be an integer from 1 to 999999999999999, got -1",
      ),
    },
    {
      name: "headers unknown",
      options: { limiter, headers: "draft-8" },
      error: new RangeError(
        'rateLimit: headers must be one of "draft-10", "legacy", "both", "none", got "draft-8" (string)',
      ),
    },
    {
      name: "failure not a string",
      options: { limiter, failure: true },
      error: new TypeError(
        'rateLimit: failure must be one of "open", "closed", got true (boolean)',
      ),
    },
    {
      name: "onError not a function",
      options: { limiter, onError: "log" },
      error: new TypeError('rateLimit: onError must be a function, got "log" (string)'),
    },
    {
      name: "trustProxy true",
      options: { limiter, trustProxy: true },
      error: new RangeError(
        'rateLimit: trustProxy must not be true (trust every hop): every client could pick its key; list your proxies\' addresses or CIDR ranges instead (trustProxy: ["10.0.0.5", "10.1.0.0/16"])',
      ),
    },
    {
      name: "key not a function",
      options: { limiter, key: "ip" },
      error: new TypeError('rateLimit: key must be a function, got "ip" (string)'),
    },
    {
      name: "cost not a function",
      options: { limiter, cost: 1 },
      error: new TypeError("rateLimit: cost must be a function, got 1"),
    },
    {
      name: "skip not a function",
      options: { limiter, skip: false },
      error: new TypeError("rateLimit: skip must be a function, got false (boolean)"),
    },
    {
      name: "onLimited not a function",
      options: { limiter, onLimited: {} },
      error: new TypeError("rateLimit: onLimited must be a function, got an object"),
    },
  ])("rejects $name", ({ options, error }) => {
    const call = () => rateLimit(options as unknown as RateLimitOptions);
    expect(call).toThrow(error);
    expect(call).toThrow(error.constructor as typeof Error);
  });
});

describe.each([
  { name: "node:http", start: nodeServer },
  { name: "Express 5", start: expressServer },
])("$name: an unkeyed limiter or a limiter's TypeError no longer fails open", ({ start }) => {
  // Before: consume(key, cost) on a TokenBucket threw a TypeError on every request, the
  // middleware took it for a store outage, and failure 'open' answered 200 with no headers.
  test("rateLimit with an unkeyed TokenBucket limits all requests as one global limit", async () => {
    const limiter = new TokenBucket({ capacity: 2, refillPerSecond: 0.001, clock: manualClock() });
    const url = await start({ limiter, trustProxy: ["127.0.0.1"] });
    const from = (ip: string) => fetch(url, { headers: { "x-forwarded-for": ip } });
    const first = await from("192.0.2.1");
    expect(first.status).toBe(200);
    expect(limitHeaders(first)).toStrictEqual({
      "ratelimit-policy": '"default";q=2',
      ratelimit: '"default";r=1;t=1000',
    });
    expect((await from("192.0.2.2")).status).toBe(200);
    expect((await from("192.0.2.3")).status).toBe(429); // a third client: the same budget
  });

  test("rateLimit with an allOf of unkeyed limiters is one global limit too", async () => {
    const clock = manualClock();
    const limiter = allOf(
      new TokenBucket({ capacity: 5, refillPerSecond: 0.001, clock }),
      new FixedWindow({ limit: 1, windowMs: 60_000, clock }),
    );
    const url = await start({ limiter });
    expect((await fetch(url)).status).toBe(200);
    expect((await fetch(url)).status).toBe(429);
  });

  test.each([
    {
      shape: "throws TypeError",
      consume: () => {
        throw new TypeError("KeyedLimiter: key must be a string");
      },
    },
    {
      shape: "throws RangeError",
      consume: () => {
        throw new RangeError("cost out of range");
      },
    },
    { shape: "rejects with TypeError", consume: async () => Promise.reject(new TypeError("x")) },
    { shape: "rejects with RangeError", consume: async () => Promise.reject(new RangeError("y")) },
  ])(
    "a limiter that $shape answers 500, not a pass (failure 'open' and 'closed')",
    async ({ consume }) => {
      const onError = vi.fn();
      for (const failure of ["open", "closed"] as const) {
        const url = await start({ limiter: { consume }, failure, onError });
        const response = await fetch(url);
        expect(response.status, failure).toBe(500);
        expect((await response.json()).title).toBe("Internal Server Error");
      }
      expect(onError.mock.calls.map(([, info]) => info.kind)).toStrictEqual([
        "programming",
        "programming",
      ]);
    },
  );
});

describe("rateLimit's default onError", () => {
  test("logs each distinct programming error once, however often it recurs", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    let cost = Number.NaN;
    const url = await nodeServer({
      limiter: new RecordingLimiter(100, 1, manualClock()),
      cost: () => cost,
    });
    for (let i = 0; i < 3; i++) expect((await fetch(url)).status).toBe(500);
    cost = -1; // a second, different bug is not hidden behind the first
    for (let i = 0; i < 3; i++) expect((await fetch(url)).status).toBe(500);
    expect(log.mock.calls.map(([line, error]) => [line, String(error)])).toStrictEqual([
      [
        "rateLimit: programming error, answered 500:",
        "RangeError: rateLimit: cost() must return a finite number >= 0, got NaN",
      ],
      [
        "rateLimit: programming error, answered 500:",
        "RangeError: rateLimit: cost() must return a finite number >= 0, got -1",
      ],
    ]);
  });

  test(`remembers at most ${MAX_REMEMBERED_ERRORS} distinct errors, then logs at most one line per 10 s`, async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    let n = 0;
    const url = await nodeServer({
      limiter: {
        consume: () => {
          throw new TypeError(`bug ${n++}`);
        },
      },
    });
    for (let i = 0; i < MAX_REMEMBERED_ERRORS + 5; i++) expect((await fetch(url)).status).toBe(500);
    // The first 64 distinct ones, then one more from the fallback budget of one line per 10 s.
    expect(log).toHaveBeenCalledTimes(MAX_REMEMBERED_ERRORS + 1);
  });
});

describe("rateLimit refuses options it does not have, naming what to use", () => {
  const limiter = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
  test.each([
    [
      "max",
      5,
      "set the limit on the limiter: capacity for TokenBucket/LeakyBucket, limit for FixedWindow/SlidingWindow*",
    ],
    ["limit", 5, "set the limit on the limiter"],
    ["windowMs", 60_000, "set windowMs on the limiter (FixedWindow/SlidingWindow*) instead"],
    ["standardHeaders", "draft-8", 'use headers: "draft-10", "legacy", "both" or "none"'],
    ["legacyHeaders", true, 'use headers: "legacy" or "both" for X-RateLimit-*'],
    ["keyGenerator", () => "k", "use key: (request, clientKey) => string"],
    ["skipSuccessfulRequests", true, "use refundIf: (status) => status < 400"],
    ["skipFailedRequests", true, "use refundIf: (status) => status >= 400"],
    ["requestWasSuccessful", () => true, "use refundIf: (status, request) => boolean"],
    ["blockDuration", 60, "use blockDurationMs (milliseconds, not seconds)"],
    ["message", "slow down", "use onLimited to answer a limited request with your own body"],
    ["statusCode", 503, "use onLimited to answer a limited request with another status"],
    ["handler", () => {}, "use onLimited to answer a limited request yourself"],
    ["polcy", "api", 'did you mean "policy"?'],
    // express-rate-limit 8 and @fastify/rate-limit names that had no hint.
    ["ipv6Subnet", 56, "use ipv6Prefix (the leading bits an IPv6 client is keyed by"],
    ["passOnStoreError", true, 'use failure: "open" (the default'],
    ["skipOnError", true, 'use failure: "open" (the default'],
    ["errorResponseBuilder", () => ({}), "use onLimited to answer a limited request"],
    ["onExceeded", () => {}, "use onLimited, called for every limited request"],
    ["identifier", "api", "use policy (the policy name"],
    ["nameSpace", "rl:", "set the key prefix on the store: prefix of a tollgate/redis limiter"],
    ["enableDraftSpec", true, 'use headers: "draft-10", "legacy", "both" or "none"'],
    ["addHeaders", {}, 'use headers: "draft-10", "legacy", "both" or "none"'],
    ["global", false, "there is no global: false: the middleware covers what it is mounted on"],
    ["ban", 3, "use blockDurationMs: a client that hits its limit is blocked"],
  ])("%s", (name, value, hint) => {
    const call = () => rateLimit({ limiter, [name]: value } as unknown as RateLimitOptions);
    expect(call).toThrow(TypeError);
    expect(call).toThrow(`rateLimit: unknown option ${JSON.stringify(name)} (${hint}`);
  });

  test("an option set to undefined is checked by name too", () => {
    expect(() => rateLimit({ limiter, max: undefined } as unknown as RateLimitOptions)).toThrow(
      'rateLimit: unknown option "max"',
    );
  });
});

describe("rateLimit with a synchronous limiter", () => {
  /** A request from 10.0.0.1 and its response, without a server. */
  function exchange(): [IncomingMessage, ServerResponse] {
    const socket = new Socket();
    Object.defineProperty(socket, "remoteAddress", { value: "10.0.0.1" });
    const req = new IncomingMessage(socket);
    req.method = "GET";
    return [req, new ServerResponse(req)];
  }

  test("answers before the middleware returns: no promise, no microtask", () => {
    const limit = rateLimit({ limiter: new RecordingLimiter(1, 0.001, manualClock()) });
    const [req, res] = exchange();
    let passed = 0;
    limit(req, res, () => passed++);
    expect(passed).toBe(1);
    expect(res.getHeader("RateLimit")).toBe('"default";r=0;t=1000');
    const [req2, res2] = exchange();
    limit(req2, res2, () => passed++);
    expect([passed, res2.statusCode, res2.getHeader("Retry-After")]).toStrictEqual([
      1,
      429,
      "1000",
    ]);
    expect(res2.writableEnded).toBe(true); // checked with no await in between: no microtask ran
  });
});

describeWiring("rateLimit", nodeServer, "node:http");
describeWiring("rateLimit", expressServer, "Express 5");

test("rateLimit refuses a windowSeconds that disagrees with the limiter when it is created", () => {
  const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 30_000 }));
  expect(() => rateLimit({ limiter, windowSeconds: 60 })).toThrow(
    new RangeError(
      "rateLimit: windowSeconds is 60 but the limiter's window is 30 s (windowMs 30000); leave windowSeconds out to send the limiter's own",
    ),
  );
  // An unkeyed one is read before it is wrapped as one global limit.
  const global = new FixedWindow({ limit: 5, windowMs: 30_000 });
  expect(() => rateLimit({ limiter: global, windowSeconds: 60 })).toThrow(
    /windowSeconds is 60 but the limiter's window is 30 s/,
  );
});

describe("the forwarding-header warning on node:http and Express", () => {
  const line = (where: string, express: boolean) =>
    `${where}: a request from 127.0.0.1 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy's addresses (trustProxy: ["127.0.0.1"])${express ? `. This Express app sets "trust proxy", which tollgate does not inherit (it may trust every client)` : ""}. This warning is written once.`;
  const forwarded = { headers: { "x-forwarded-for": "203.0.113.7" } };

  test("behind Express with trust proxy set and no trustProxy, one console.warn line", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const url = await expressServer({ limiter: new RecordingLimiter(9, 1, manualClock()) }, true);
    for (let i = 0; i < 4; i++) expect((await fetch(url, forwarded)).status).toBe(200);
    expect(warn.mock.calls).toStrictEqual([[line("rateLimit", true)]]);
  });

  test("Express without trust proxy, and plain node:http: one line each, no Express sentence", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const limiter = new RecordingLimiter(9, 1, manualClock());
    const plain = await expressServer({ limiter }, false);
    const node = await nodeServer({ limiter });
    await fetch(plain); // no forwarding header: nothing to say
    expect(warn).not.toHaveBeenCalled();
    for (let i = 0; i < 3; i++) await fetch(plain, forwarded);
    for (let i = 0; i < 3; i++) await fetch(node, forwarded);
    // One line per middleware: two middlewares, two lines.
    expect(warn.mock.calls).toStrictEqual([[line("rateLimit", false)], [line("rateLimit", false)]]);
  });

  test("no line when a proxy is trusted, nor when the request is skipped", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const limiter = new RecordingLimiter(9, 1, manualClock());
    const trusted = await expressServer({ limiter, trustProxy: ["127.0.0.1"] }, true);
    const skipped = await nodeServer({ limiter, skip: () => true });
    for (let i = 0; i < 3; i++) await fetch(trusted, forwarded);
    for (let i = 0; i < 3; i++) await fetch(skipped, forwarded);
    expect(warn).not.toHaveBeenCalled();
    expect(limiter.calls.map(([key]) => key)).toStrictEqual([
      "203.0.113.7",
      "203.0.113.7",
      "203.0.113.7",
    ]);
  });
});
