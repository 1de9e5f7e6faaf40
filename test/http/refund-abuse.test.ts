// Refunds that a client cannot game, on real node:http, Express, Fastify, Hono and Koa
// servers on loopback: a client that hangs up once its handler started stays charged, and
// a slow request that fails after its window ended gives nothing back to the next window.
// The same code runs against a build without receipts or `refundAborted`: that is how the
// old middleware was shown to run 12 handlers at limit 3, and 10 in one window at limit 5.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ServerType } from "@hono/node-server";
import express from "express";
import fc from "fast-check";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { type Context, Hono } from "hono";
import Koa from "koa";
import { afterAll, describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import type { CommonRateLimitOptions } from "../../src/http/core.js";
import { fastifyRateLimit, honoRateLimit, koaRateLimit, rateLimit } from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { close, closeServed, listen, serveFetch } from "./support.js";

/** What the handlers do: each request registers here, and ends when the test says so. */
class Handlers {
  /** Handlers started, by key. */
  readonly started = new Map<string, number>();
  /** Requests whose connection the server saw close before the answer, by key. */
  readonly closed = new Map<string, number>();
  /** How each pending request will be answered: its status, given by `finish`. */
  private readonly pending = new Map<string, (status: number) => void>();

  /** A handler starts for request `id` of `key`; resolves with the status to answer. */
  start(key: string, id: string): Promise<number> {
    this.started.set(key, (this.started.get(key) ?? 0) + 1);
    return new Promise((resolve) => this.pending.set(id, resolve));
  }

  /** The connection of a request of `key` closed before its answer. */
  close(key: string): void {
    this.closed.set(key, (this.closed.get(key) ?? 0) + 1);
  }

  /** Lets request `id` answer `status` (its client may be gone). */
  finish(id: string, status: number): void {
    this.pending.get(id)?.(status);
    this.pending.delete(id);
  }

  /** Lets every pending request answer 200. */
  finishAll(): void {
    for (const id of [...this.pending.keys()]) this.finish(id, 200);
  }
}

type Options = CommonRateLimitOptions & {
  refundIf?: (status: number, request: never) => boolean;
};

/** The key of a request: its `x-key` header (so that runs do not share keys). */
const keyOf = (header: string | string[] | null | undefined) => String(header ?? "none");

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

/** Each adapter, started with `options` and the handlers; resolves with its URL. */
const ADAPTERS: readonly {
  name: string;
  start: (options: Options, handlers: Handlers) => Promise<string>;
}[] = [
  {
    name: "node:http",
    start: (options, handlers) => {
      const limit = rateLimit({
        ...options,
        key: (req: IncomingMessage) => keyOf(req.headers["x-key"]),
      } as never);
      const server = createServer((req, res) =>
        limit(req, res, () => nodeHandler(req, res, handlers)),
      );
      return serve(server);
    },
  },
  {
    name: "Express",
    start: (options, handlers) => {
      const app = express();
      app.use(
        rateLimit({
          ...options,
          key: (req: IncomingMessage) => keyOf(req.headers["x-key"]),
        } as never),
      );
      app.use((req: IncomingMessage, res: ServerResponse) => nodeHandler(req, res, handlers));
      return serve(createServer(app));
    },
  },
  {
    name: "Fastify",
    start: async (options, handlers) => {
      const app: FastifyInstance = Fastify({ forceCloseConnections: true });
      stops.push(() => app.close());
      await app.register(fastifyRateLimit, {
        ...options,
        key: (request: FastifyRequest) => keyOf(request.headers["x-key"]),
      } as never);
      app.get("/*", async (request: FastifyRequest, reply) => {
        const key = keyOf(request.headers["x-key"]);
        request.raw.once("close", () => {
          if (!reply.raw.writableFinished) handlers.close(key);
        });
        reply.code(await handlers.start(key, request.url));
        return "done";
      });
      return app.listen({ port: 0, host: "127.0.0.1" });
    },
  },
  {
    name: "Hono",
    start: (options, handlers) => {
      const app = new Hono();
      app.use(honoRateLimit({ ...options, key: (c: Context) => keyOf(c.req.header("x-key")) }));
      app.get("/*", async (c: Context) => {
        const key = keyOf(c.req.header("x-key"));
        c.req.raw.signal.addEventListener("abort", () => handlers.close(key));
        const status = await handlers.start(key, new URL(c.req.url).pathname);
        return c.text("done", status as 200);
      });
      const servers: ServerType[] = [];
      stops.push(() => closeServed(servers[0]!));
      return serveFetch(app.fetch, servers);
    },
  },
  {
    name: "Koa",
    start: (options, handlers) => {
      const app = new Koa();
      app.use(
        koaRateLimit({
          ...(options as CommonRateLimitOptions),
          key: (ctx: Koa.Context) => keyOf(ctx.req.headers["x-key"]),
        } as never),
      );
      app.use(async (ctx) => {
        const key = keyOf(ctx.req.headers["x-key"]);
        ctx.res.once("close", () => {
          if (!ctx.res.writableFinished) handlers.close(key);
        });
        ctx.status = await handlers.start(key, ctx.path);
        ctx.body = "done";
      });
      return serve(createServer(app.callback()));
    },
  },
];

function serve(server: Server): Promise<string> {
  stops.push(() => close(server));
  return listen(server);
}

/** A node handler: registers, then answers when the test says (its client may be gone). */
function nodeHandler(req: IncomingMessage, res: ServerResponse, handlers: Handlers): void {
  const key = keyOf(req.headers["x-key"]);
  res.once("close", () => {
    if (!res.writableFinished) handlers.close(key);
  });
  handlers.start(key, req.url ?? "/").then((status) => {
    res.statusCode = status;
    res.end("done");
  });
}

/** Polls `condition` on the event loop (real sockets close on their own time). */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Sends a request of `key` to `path` and, once its handler started, either lets it answer
 * `status` or (status `"abort"`) hangs up and waits until the server saw it go. Resolves
 * with the status the client got (0 when it hung up), and whether a handler started.
 */
async function request(
  url: string,
  handlers: Handlers,
  key: string,
  path: string,
  status: number | "abort",
): Promise<{ got: number; started: boolean }> {
  const before = handlers.started.get(key) ?? 0;
  const closedBefore = handlers.closed.get(key) ?? 0;
  const abort = new AbortController();
  const response = fetch(`${url}${path}`, {
    headers: { "x-key": key },
    signal: abort.signal,
  }).then(
    async (r) => {
      await r.text();
      return r.status;
    },
    () => 0,
  );
  // Either the handler starts, or the middleware answers (429) without one.
  let answered: number | undefined;
  response.then((s) => {
    answered = s;
  });
  await until(() => (handlers.started.get(key) ?? 0) > before || answered !== undefined, path);
  if (answered !== undefined) return { got: answered, started: false };
  if (status === "abort") {
    abort.abort();
    await until(() => (handlers.closed.get(key) ?? 0) > closedBefore, `${path} closed`);
    // The handler runs to its end, answering a client that is gone.
    handlers.finish(path, 200);
    const got = await response;
    // The middleware settles on the close (node) or once the handler returned (fetch).
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    return { got, started: true };
  }
  handlers.finish(path, status);
  return { got: await response, started: true };
}

let seq = 0;
const nextPath = () => `/r${++seq}`;

for (const { name, start } of ADAPTERS) {
  describe(name, () => {
    test("a client that hangs up once its handler started is not refunded: at limit 3, 3 handlers run", async () => {
      // The finding: refundIf: (status) => status >= 400 (express-rate-limit's
      // skipFailedRequests) saw an abort as 499 and gave the units back, so every request
      // whose client hung up was free while its handler ran to its end.
      const clock = manualClock();
      const handlers = new Handlers();
      const url = await start(
        {
          limiter: new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 60_000, clock })),
          refundIf: (status: number) => status >= 400,
        },
        handlers,
      );
      let started = 0;
      for (let i = 0; i < 12; i++) {
        if ((await request(url, handlers, "mallory", nextPath(), "abort")).started) started++;
      }
      expect(started).toBe(3);
      let passed = 0;
      for (let i = 0; i < 4; i++) {
        if ((await request(url, handlers, "mallory", nextPath(), 200)).got === 200) passed++;
      }
      expect(passed, "ordinary requests afterwards").toBe(0);
      handlers.finishAll();
    });

    test("a slow request that fails after its window ended gives nothing back to the next window", async () => {
      // Limit 5 per 1 s window, failures refunded (skipFailedRequests): 5 slow requests start
      // in [0, 1000); at 1000 ms five more pass, then the slow ones fail (401) and are
      // refunded. Before receipts the refunds came off the new window's count and 5 more
      // passed in it: 10 in one window.
      const clock = manualClock();
      const handlers = new Handlers();
      const url = await start(
        {
          limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 1000, clock })),
          refundIf: (status: number) => status >= 400, // skipFailedRequests
        },
        handlers,
      );
      const slow = [0, 1, 2, 3, 4].map(() => nextPath());
      const pending = slow.map(async (path) => {
        const response = fetch(`${url}${path}`, { headers: { "x-key": "slow" } });
        return response.then((r) => r.text().then(() => r.status));
      });
      await until(() => handlers.started.get("slow") === 5, "five slow handlers");
      clock.set(1000);
      let admitted = 0;
      for (let i = 0; i < 5; i++) {
        if ((await request(url, handlers, "slow", nextPath(), 200)).started) admitted++;
      }
      for (const path of slow) handlers.finish(path, 401);
      expect(await Promise.all(pending)).toEqual([401, 401, 401, 401, 401]);
      await new Promise((resolve) => setImmediate(resolve));
      for (let i = 0; i < 5; i++) {
        if ((await request(url, handlers, "slow", nextPath(), 200)).started) admitted++;
      }
      expect(admitted, "requests admitted in [1000, 2000)").toBe(5);
    });

    test("property: with any refundIf, handlers started for one key within a window never exceed the limit plus the requests that completed and were refunded", async () => {
      const clock = manualClock();
      const handlers = new Handlers();
      /** Each run's refundIf, by key; and what it said yes to, for completed requests. */
      const rules = new Map<string, (status: number) => boolean>();
      const refunded = new Map<string, number>();
      const url = await start(
        {
          limiter: new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 60_000, clock })),
          refundIf: (status: number, req: never) => {
            const key = keyFromHandle(req);
            const yes = rules.get(key)!(status);
            // Only a request that completed counts: a client that hung up (499) never does.
            if (yes && status !== 499) refunded.set(key, (refunded.get(key) ?? 0) + 1);
            return yes;
          },
        },
        handlers,
      );
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom<[string, (status: number) => boolean]>(
            ["always", () => true],
            ["failures", (s) => s >= 400],
            ["successes", (s) => s < 400],
            ["never", () => false],
          ),
          fc.array(fc.constantFrom<number | "abort">(200, 401, "abort", "abort"), {
            minLength: 3,
            maxLength: 9,
          }),
          async ([, rule], actions) => {
            const key = `run-${++run}`;
            rules.set(key, rule);
            for (const [i, action] of actions.entries()) {
              await request(url, handlers, key, nextPath(), action);
              const started = handlers.started.get(key) ?? 0;
              const back = refunded.get(key) ?? 0;
              expect(started, `${key} step ${i}`).toBeLessThanOrEqual(3 + back);
            }
            handlers.finishAll();
          },
        ),
        { numRuns: 12, seed: 23 },
      );
    });
  });
}

/** The `x-key` of whatever request or context a `refundIf` got. */
function keyFromHandle(handle: unknown): string {
  const h = handle as {
    headers?: Record<string, string | string[] | undefined>;
    req?: {
      headers?: Record<string, string | string[] | undefined>;
      header?: (n: string) => string;
    };
  };
  if (typeof h.req?.header === "function") return keyOf(h.req.header("x-key"));
  return keyOf(h.headers?.["x-key"] ?? h.req?.headers?.["x-key"]);
}

/** For the type checker: the clock type the tests use. */
export type { ManualClock };
