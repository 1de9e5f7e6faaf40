// refundIf, refund/charge per request and blockDurationMs on real servers, for every adapter.
import { createServer, IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ServerType } from "@hono/node-server";
import express from "express";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { type Context, Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { ABORTED_STATUS, HandleSlot } from "../../src/http/after-response.js";
import type { CommonRateLimitOptions } from "../../src/http/core.js";
import {
  fastifyRateLimit,
  fastifyRateLimitCharges,
  honoRateLimit,
  koaRateLimit,
  type RequestCharges,
  rateLimit,
  withRateLimit,
} from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";
import { close, closeServed, listen, serveFetch } from "./support.js";

/** The options every adapter is given, `refundIf` typed loosely (each types its own request). */
type Options = CommonRateLimitOptions & {
  refundIf?: (status: number, request: never) => boolean;
  refundAborted?: boolean;
};

/**
 * The routes every adapter serves behind the middleware:
 * - `/ok` 200, `/fail` 401;
 * - `/hang`: never answers (the client aborts);
 * - `/charge/N`: charges N more units, then 200 with the decision's `allowed` as body;
 * - `/refund/N`: gives back N units, then 200.
 */
type Act = (handle: object, units: number) => unknown;

const nodeServers: Server[] = [];
const fetchServers: ServerType[] = [];
const fastifyApps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(nodeServers.splice(0).map(close));
  await Promise.all(fetchServers.splice(0).map(closeServed));
  await Promise.all(fastifyApps.splice(0).map((app) => app.close()));
});

/** What one route answers: a status and a body, or undefined to hang. */
function answer(
  path: string,
  handle: object,
  charges: RequestCharges<never>,
): [number, string] | undefined {
  const [, route, n] = path.split("/");
  const units = Number(n);
  if (route === "ok") return [200, "ok"];
  if (route === "fail") return [401, "no"];
  if (route === "charge") {
    const decision = (charges.charge as Act)(handle, units) as { allowed: boolean } | undefined;
    return [200, String(decision?.allowed)];
  }
  if (route === "refund") {
    (charges.refund as Act)(handle, units);
    return [200, "given back"];
  }
  if (route === "settle") {
    const decision = (charges.settle as Act)(handle, units) as { allowed: boolean } | undefined;
    return [200, String(decision?.allowed)];
  }
  return undefined;
}

function nodeHandler(charges: RequestCharges<never>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const a = answer(req.url ?? "/", req, charges);
    if (a === undefined) return; // hangs
    res.statusCode = a[0];
    res.end(a[1]);
  };
}

const ADAPTERS: readonly { name: string; start: (options: Options) => Promise<string> }[] = [
  {
    name: "node:http",
    start: (options) => {
      const limit = rateLimit(options as never);
      const handler = nodeHandler(limit as never);
      const server = createServer((req, res) => limit(req, res, () => handler(req, res)));
      nodeServers.push(server);
      return listen(server);
    },
  },
  {
    name: "Express 5",
    start: (options) => {
      const app = express();
      const limit = rateLimit(options as never);
      app.use(limit);
      app.use(nodeHandler(limit as never));
      const server = createServer(app);
      nodeServers.push(server);
      return listen(server);
    },
  },
  {
    name: "fetch (withRateLimit)",
    start: (options) => {
      const limited = withRateLimit(async (request: Request, _env: unknown) => {
        const a = answer(new URL(request.url).pathname, request, limited as never);
        if (a === undefined) {
          await new Promise<void>((resolve) =>
            request.signal.addEventListener("abort", () => resolve()),
          );
          return new Response("too late", { status: 200 });
        }
        return new Response(a[1], { status: a[0] });
      }, options as never);
      return serveFetch((request, env) => limited(request, env), fetchServers);
    },
  },
  {
    name: "Fastify 5",
    start: async (options) => {
      const app = Fastify();
      fastifyApps.push(app);
      await app.register(fastifyRateLimit, options as never);
      app.get("/*", async (request: FastifyRequest, reply) => {
        const a = answer(request.url, request, fastifyRateLimitCharges as never);
        if (a === undefined) return new Promise(() => {});
        reply.code(a[0]);
        return a[1];
      });
      return app.listen({ port: 0, host: "127.0.0.1" });
    },
  },
  {
    name: "Hono 4",
    start: (options) => {
      const app = new Hono();
      const limit = honoRateLimit(options as never);
      app.use(limit);
      app.get("/*", async (c: Context) => {
        const a = answer(c.req.path, c, limit as never);
        if (a === undefined) {
          await new Promise<void>((resolve) =>
            c.req.raw.signal.addEventListener("abort", () => resolve()),
          );
          return c.text("too late");
        }
        return c.text(a[1], a[0] as 200);
      });
      return serveFetch(app.fetch, fetchServers);
    },
  },
  {
    name: "Koa 3",
    start: (options) => {
      const app = new Koa();
      const limit = koaRateLimit(options as never);
      app.use(limit);
      app.use(async (ctx) => {
        const a = answer(ctx.path, ctx, limit as never);
        if (a === undefined) {
          await new Promise<void>((resolve) => ctx.req.on("close", () => resolve()));
          return;
        }
        ctx.status = a[0];
        ctx.body = a[1];
      });
      const server = createServer(app.callback());
      nodeServers.push(server);
      return listen(server);
    },
  },
];

const KEY = "127.0.0.1";
/**
 * How long a check waits for the server to finish a response it already sent: a hang
 * guard, not a speed check (vi.waitFor's default second is what a loaded machine can take).
 */
const SETTLED = { timeout: 30_000, interval: 10 };

for (const { name, start } of ADAPTERS) {
  describe(`${name}: refunds and charges after the response`, () => {
    test("refundIf: (status) => status >= 400 counts only the requests that succeed", async () => {
      const clock = manualClock();
      const limiter = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }));
      const statuses: number[] = [];
      const url = await start({
        limiter,
        refundIf: (status: number) => {
          statuses.push(status);
          return status >= 400;
        },
      });
      for (let i = 0; i < 3; i++) expect((await fetch(`${url}/fail`)).status).toBe(401);
      await vi.waitFor(() => expect(statuses).toEqual([401, 401, 401]), SETTLED);
      // The failures were given back: the two successes still fit, the third does not.
      expect(limiter.peek(KEY, 0).remaining).toBe(2);
      const first = await fetch(`${url}/ok`);
      // Headers already sent stay as sent: they counted this request.
      expect(first.headers.get("ratelimit")).toContain("r=1");
      expect((await fetch(`${url}/ok`)).status).toBe(200);
      // Spent, and a rate of 0 never gives it back: 403, which no client retries.
      expect((await fetch(`${url}/ok`)).status).toBe(403);
      await vi.waitFor(() => expect(statuses).toEqual([401, 401, 401, 200, 200]), SETTLED);
      expect(limiter.peek(KEY, 0).remaining).toBe(0);
    });

    test("a request whose client hung up stays charged, whatever refundIf says; refundAborted asks with 499", async () => {
      for (const refundAborted of [false, true]) {
        const clock = manualClock();
        const limiter = new KeyedLimiter(
          new TokenBucket({ capacity: 3, refillPerSecond: 0, clock }),
        );
        const statuses: number[] = [];
        const url = await start({
          limiter,
          ...(refundAborted ? { refundAborted } : {}),
          refundIf: (status: number) => {
            statuses.push(status);
            return status < 400 || status === ABORTED_STATUS; // as skipFailedRequests would
          },
        });
        const where = `refundAborted: ${refundAborted}`;
        expect((await fetch(`${url}/ok`)).status).toBe(200);
        await vi.waitFor(() => expect(statuses).toEqual([200]), SETTLED);
        expect(limiter.peek(KEY, 0).remaining, where).toBe(3);
        const abort = new AbortController();
        const hanging = fetch(`${url}/hang`, { signal: abort.signal }).catch(() => "aborted");
        await vi.waitFor(() => expect(limiter.peek(KEY, 0).remaining).toBe(2), SETTLED);
        abort.abort();
        expect(await hanging).toBe("aborted");
        if (refundAborted) {
          await vi.waitFor(() => expect(statuses).toEqual([200, ABORTED_STATUS]), SETTLED);
          await vi.waitFor(() => expect(limiter.peek(KEY, 0).remaining, where).toBe(3), SETTLED);
        } else {
          expect((await fetch(`${url}/ok`)).status).toBe(200);
          await vi.waitFor(() => expect(statuses).toEqual([200, 200]), SETTLED);
          expect(limiter.peek(KEY, 0).remaining, where).toBe(2);
          expect(statuses, where).not.toContain(ABORTED_STATUS);
        }
      }
    });

    test("charge takes more units after the fact; refund gives back at most what the request took", async () => {
      const clock = manualClock();
      const limiter = new KeyedLimiter(
        new TokenBucket({ capacity: 10, refillPerSecond: 0, clock }),
      );
      const url = await start({ limiter });
      expect(await (await fetch(`${url}/charge/4`)).text()).toBe("true"); // 1 + 4 taken
      expect(limiter.peek(KEY, 0).remaining).toBe(5);
      expect(await (await fetch(`${url}/charge/9`)).text()).toBe("false"); // 1 taken, 9 do not fit
      expect(limiter.peek(KEY, 0).remaining).toBe(4);
      // A refund of 100 gives back only this request's own unit, not the others'.
      await fetch(`${url}/refund/100`);
      expect(limiter.peek(KEY, 0).remaining).toBe(4);
    });

    test("settle gives back what a request did not use, or takes what it cost beyond its charge", async () => {
      const clock = manualClock();
      const limiter = new KeyedLimiter(
        new TokenBucket({ capacity: 12, refillPerSecond: 0, clock }),
      );
      const url = await start({ limiter, cost: () => 4 } as Options);
      expect(await (await fetch(`${url}/settle/1`)).text()).toBe("undefined"); // 4 taken, 3 back
      expect(limiter.peek(KEY, 0).remaining).toBe(11);
      expect(await (await fetch(`${url}/settle/6`)).text()).toBe("true"); // 4 taken, 2 more
      expect(limiter.peek(KEY, 0).remaining).toBe(5);
      expect(await (await fetch(`${url}/settle/9`)).text()).toBe("false"); // 5 more do not fit
      expect(limiter.peek(KEY, 0).remaining).toBe(1);
    });

    test("blockDurationMs blocks a client once it hits its limit, with Retry-After the block", async () => {
      const clock = manualClock();
      const limiter = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }));
      const url = await start({ limiter, blockDurationMs: 60_000 });
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
    });
  });
}

describe("option checks", () => {
  const keyed = () => new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 }));
  test("refundIf must be a function and needs a limiter with refund()", () => {
    expect(() => rateLimit({ limiter: keyed(), refundIf: 1 as never })).toThrow(
      /rateLimit: refundIf must be a function/,
    );
    const consumeOnly = {
      consume: () => ({ allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 }),
    };
    expect(() => rateLimit({ limiter: consumeOnly, refundIf: () => true })).toThrow(
      /rateLimit: refundIf needs a limiter with refund\(key, cost\)/,
    );
    expect(() =>
      rateLimit({ limiter: new FixedWindow({ limit: 1, windowMs: 1000 }), refundIf: () => true }),
    ).not.toThrow();
  });

  test("blockDurationMs must be a finite number > 0 and needs a keyed limiter with block()", () => {
    expect(() => rateLimit({ limiter: keyed(), blockDurationMs: 0 })).toThrow(
      /rateLimit: blockDurationMs must be a finite number > 0, got 0/,
    );
    expect(() => rateLimit({ limiter: keyed(), blockDurationMs: "1" as never })).toThrow(TypeError);
    expect(() =>
      rateLimit({ limiter: new FixedWindow({ limit: 1, windowMs: 1000 }), blockDurationMs: 1000 }),
    ).toThrow(/blockDurationMs needs a limiter that blocks one client/);
  });

  test("the peers' names point to refundIf and blockDurationMs", () => {
    expect(() => rateLimit({ limiter: keyed(), skipSuccessfulRequests: true } as never)).toThrow(
      /use refundIf: \(status\) => status < 400/,
    );
    expect(() => rateLimit({ limiter: keyed(), skipFailedRequests: true } as never)).toThrow(
      /use refundIf: \(status\) => status >= 400/,
    );
    expect(() => rateLimit({ limiter: keyed(), blockDuration: 60 } as never)).toThrow(
      /use blockDurationMs/,
    );
  });

  test("refund and charge check their units", () => {
    const limit = rateLimit({ limiter: keyed() });
    const req = {} as IncomingMessage;
    expect(() => limit.refund(req, -1)).toThrow(
      /rateLimit.refund: units must be a finite number >= 0/,
    );
    expect(() => limit.charge(req, Number.NaN)).toThrow(RangeError);
    expect(limit.charge(req, 1)).toBeUndefined(); // not a request it charged
    expect(() => fastifyRateLimitCharges.charge({} as never, -1)).toThrow(RangeError);
  });
});

describe("what a charged request keeps", () => {
  // Every charged request used to be a WeakMap entry (its ticket, by its request): an
  // ephemeron per request for the garbage collector, about 1 µs of server CPU a request,
  // and in some processes node:http on a slower path for good. The ticket now rides on
  // the request; a WeakMap is only for a handle that refuses a property.
  test("a charged request costs no WeakMap entry", async () => {
    const limiter = new KeyedLimiter(new TokenBucket({ capacity: 1e6, refillPerSecond: 1 }));
    const limit = rateLimit({ limiter, refundIf: (status) => status >= 400 });
    const server = createServer((req, res) =>
      limit(req, res, () => {
        res.statusCode = req.url === "/fail" ? 500 : 200;
        res.end("done");
      }),
    );
    nodeServers.push(server);
    const url = await listen(server);
    await fetch(`${url}/warm`); // sockets, first-use paths
    const set = vi.spyOn(WeakMap.prototype, "set");
    try {
      for (let i = 0; i < 20; i++) expect((await fetch(`${url}/ok`)).status).toBe(200);
      // undici (the client, in this process) keeps WeakMaps of its own: only entries keyed by
      // the server's requests count.
      const byRequest = set.mock.calls.filter(([key]) => key instanceof IncomingMessage);
      expect(byRequest).toEqual([]);
    } finally {
      set.mockRestore();
    }
    // The tickets still work: a failed request is given back.
    const before = limiter.peek("127.0.0.1").remaining;
    expect((await fetch(`${url}/fail`)).status).toBe(500);
    expect(limiter.peek("127.0.0.1").remaining).toBe(before);
  });

  test("a handle that refuses a property keeps its ticket aside", () => {
    const slot = new HandleSlot<string>("test");
    const open = {};
    const frozen = Object.freeze({});
    const refusing = new Proxy(
      {},
      {
        set: () => false,
        defineProperty: () => false,
      },
    );
    const handles = [open, frozen, refusing];
    for (const [i, handle] of handles.entries()) slot.set(handle, `ticket ${i}`);
    expect(handles.map((h) => slot.get(h))).toEqual(["ticket 0", "ticket 1", "ticket 2"]);
    expect(Object.getOwnPropertyNames(open)).toEqual([]); // not enumerable by name
    expect(slot.get({})).toBeUndefined();
    slot.set(frozen, "again");
    expect(slot.get(frozen)).toBe("again");
  });
});

describe("whose ticket a handle reads", () => {
  test("an object made from a charged request (Object.create) has no ticket of its own", async () => {
    const clock = manualClock();
    const limiter = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 0, clock }));
    const limit = rateLimit({ limiter });
    const results: unknown[] = [];
    const server = createServer((req, res) =>
      limit(req, res, () => {
        const derived = Object.create(req) as IncomingMessage;
        results.push(limit.charge(derived, 5), limit.settle(derived, 9));
        limit.refund(derived);
        res.end("done");
      }),
    );
    nodeServers.push(server);
    const url = await listen(server);
    expect((await fetch(url)).status).toBe(200);
    // Not the request the middleware charged: nothing taken, nothing given back.
    expect(results).toEqual([undefined, undefined]);
    expect(limiter.peek(KEY, 0).remaining).toBe(9);
  });

  test("refund, charge and settle of no request at all do nothing", () => {
    const limit = rateLimit({
      limiter: new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 })),
    });
    for (const none of [undefined, null]) {
      expect(() => limit.refund(none as never)).not.toThrow();
      expect(limit.charge(none as never, 1)).toBeUndefined();
      expect(limit.settle(none as never, 1)).toBeUndefined();
      expect(() => fastifyRateLimitCharges.refund(none as never)).not.toThrow();
      expect(fastifyRateLimitCharges.charge(none as never, 1)).toBeUndefined();
    }
  });

  test("a handle frozen after its first ticket keeps its next one", () => {
    const slot = new HandleSlot<string>("test");
    for (const close of [Object.freeze, Object.seal, Object.preventExtensions]) {
      const handle = {};
      slot.set(handle, "first");
      close(handle);
      slot.set(handle, "second");
      expect(slot.get(handle), close.name).toBe("second");
    }
  });

  test("a proxy that drops the property or reads back something else keeps its ticket aside", () => {
    const slot = new HandleSlot<string>("test");
    const drops = new Proxy({}, { set: () => true });
    const answersAnything = new Proxy({}, { set: () => true, get: () => null });
    const throwsOnUnknown = new Proxy(
      {},
      {
        set: () => false,
        get: (target, name) => {
          if (!(name in target)) throw new Error(`no ${String(name)}`);
          return Reflect.get(target, name);
        },
      },
    );
    expect(slot.get(throwsOnUnknown)).toBeUndefined();
    const handles = [drops, answersAnything, throwsOnUnknown];
    for (const [i, handle] of handles.entries()) slot.set(handle, `ticket ${i}`);
    expect(handles.map((h) => slot.get(h))).toEqual(["ticket 0", "ticket 1", "ticket 2"]);
  });

  test("a symbol on Object.prototype is no ticket", () => {
    const slot = new HandleSlot<string>("test");
    const open = {};
    slot.set(open, "mine");
    const [name] = Object.getOwnPropertySymbols(open);
    const proto = Object.prototype as Record<symbol, unknown>;
    proto[name!] = "forged";
    try {
      expect(slot.get({})).toBeUndefined();
      expect(slot.get(open)).toBe("mine");
    } finally {
      delete proto[name!];
    }
  });
});
