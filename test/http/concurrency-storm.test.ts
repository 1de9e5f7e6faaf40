// Concurrency limits count handlers, not connections, on real node:http, Express, Fastify,
// Koa, Hono and fetch servers on loopback: under a storm of clients that hang up once their
// handler started, no more than the limit of handlers run at once; and `maxHoldMs` bounds
// how long a handler that never ends keeps its permit after its client left.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ServerType } from "@hono/node-server";
import express from "express";
import Fastify, { type FastifyInstance } from "fastify";
import { type Context, Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, test } from "vitest";
import { ConcurrencyLimiter } from "../../src/concurrency/concurrency-limiter.js";
import * as http from "../../src/http/index.js";
import { close, closeServed, listen, serveFetch } from "./support.js";

/** The handlers of one server: how many run now, the most at once, and the release. */
class Running {
  now = 0;
  most = 0;
  readonly started = new Set<string>();
  private waiting: (() => void)[] = [];
  /** Set to let every handler (present and future) end at once. */
  open = false;

  async run(id: string): Promise<void> {
    this.started.add(id);
    this.now++;
    if (this.now > this.most) this.most = this.now;
    if (!this.open) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.now--;
  }

  /** Lets every waiting handler end, and the ones to come end at once. */
  release(): void {
    this.open = true;
    for (const go of this.waiting.splice(0)) go();
  }

  /** Keeps every handler, present and future, running (the test releases them). */
  hold(): void {
    this.open = false;
  }
}

type Limiter = ConcurrencyLimiter;
type Start = (limiter: Limiter, running: Running, maxHoldMs?: number) => Promise<string>;

const nodeServers: Server[] = [];
const fetchServers: ServerType[] = [];
const fastifyApps: FastifyInstance[] = [];
let running: Running | undefined;
afterEach(async () => {
  running?.release();
  await Promise.all(nodeServers.splice(0).map(close));
  await Promise.all(fetchServers.splice(0).map(closeServed));
  await Promise.all(fastifyApps.splice(0).map((app) => app.close()));
});

/** The id of a request: its path. */
const idOf = (url: string | undefined) => url ?? "/";

function nodeHandler(run: Running) {
  return (req: IncomingMessage, res: ServerResponse) => {
    run.run(idOf(req.url)).then(() => res.end("done"));
  };
}

function maybe(maxHoldMs: number | undefined) {
  return maxHoldMs === undefined ? {} : { maxHoldMs };
}

const SERVERS: readonly [string, Start][] = [
  [
    "node:http",
    (limiter, run, maxHoldMs) => {
      const gate = http.concurrencyLimit({ limiter, ...maybe(maxHoldMs) });
      const handler = nodeHandler(run);
      const server = createServer((req, res) => gate(req, res, () => handler(req, res)));
      nodeServers.push(server);
      return listen(server);
    },
  ],
  [
    "Express",
    (limiter, run, maxHoldMs) => {
      const app = express();
      app.use(http.concurrencyLimit({ limiter, ...maybe(maxHoldMs) }));
      app.use(nodeHandler(run));
      const server = createServer(app);
      nodeServers.push(server);
      return listen(server);
    },
  ],
  [
    "Fastify",
    async (limiter, run, maxHoldMs) => {
      const app = Fastify({ forceCloseConnections: true });
      fastifyApps.push(app);
      app.addHook("onRequest", http.fastifyConcurrencyLimit({ limiter, ...maybe(maxHoldMs) }));
      app.get("/*", async (request) => {
        await run.run(idOf(request.url));
        return "done";
      });
      await app.listen({ port: 0, host: "127.0.0.1" });
      const { port } = app.server.address() as { port: number };
      return `http://127.0.0.1:${port}`;
    },
  ],
  [
    "Koa",
    (limiter, run, maxHoldMs) => {
      const koa = (http as { koaConcurrencyLimit?: typeof http.koaConcurrencyLimit })
        .koaConcurrencyLimit;
      const app = new Koa();
      // The recipe docs/concurrency.md gave before Koa had a middleware: release on close.
      app.use(
        koa === undefined
          ? async (ctx, next) => {
              const permit = limiter.tryAcquire();
              if (permit === null) {
                ctx.status = 429;
                return;
              }
              ctx.res.once("close", () => permit.release());
              await next();
            }
          : koa({ limiter, ...maybe(maxHoldMs) }),
      );
      app.use(async (ctx) => {
        await run.run(idOf(ctx.path));
        ctx.body = "done";
      });
      const server = createServer(app.callback());
      nodeServers.push(server);
      return listen(server);
    },
  ],
  [
    "Hono (withConcurrencyLimit)",
    (limiter, run, maxHoldMs) => {
      const app = new Hono();
      app.get("/*", async (c: Context) => {
        await run.run(idOf(new URL(c.req.url).pathname));
        return c.text("done");
      });
      const gated = http.withConcurrencyLimit(app.fetch, { limiter, ...maybe(maxHoldMs) });
      return serveFetch(gated, fetchServers);
    },
  ],
];

/** Polls `condition` on the event loop (real sockets close on their own time). */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2500; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

let seq = 0;

/**
 * One client of the storm: sends a request and hangs up as soon as its handler started
 * (or it was answered, a 429). Resolves with the status it got (0 when it hung up).
 */
async function hangUp(url: string, run: Running): Promise<number> {
  const id = `/c${++seq}`;
  const abort = new AbortController();
  let status: number | undefined;
  const response = fetch(`${url}${id}`, { signal: abort.signal }).then(
    async (r) => {
      await r.text();
      status = r.status;
      return r.status;
    },
    () => 0,
  );
  await until(() => run.started.has(id) || status !== undefined, `${id} started or answered`);
  abort.abort();
  return response;
}

describe.each(SERVERS)("%s", (_name, start) => {
  test("under a storm of clients that hang up once their handler started, at most 4 handlers run at once", async () => {
    const limiter = new ConcurrencyLimiter({ limit: 4 });
    running = new Running();
    const run = running;
    const url = await start(limiter, run);
    // Ten waves of eight clients at once, each hanging up as its handler starts.
    for (let wave = 0; wave < 10; wave++) {
      await Promise.all(Array.from({ length: 8 }, () => hangUp(url, run)));
    }
    expect(run.most).toBe(4);
    run.release();
    await until(() => run.now === 0 && limiter.inUse === 0, "every handler done");
    // Once the handlers are done, their permits are back.
    const ok = await fetch(`${url}/after`);
    expect([ok.status, await ok.text()]).toEqual([200, "done"]);
  });

  test("a handler that never ends keeps its permit at most maxHoldMs after its client left", async () => {
    const limiter = new ConcurrencyLimiter({ limit: 1 });
    running = new Running();
    const run = running;
    const url = await start(limiter, run, 20);
    expect(await hangUp(url, run)).toBe(0);
    expect(run.now).toBe(1);
    // The handler still runs; its permit comes back by itself once maxHoldMs has passed.
    await until(() => limiter.inUse === 0, "the permit back after maxHoldMs");
    expect(run.now).toBe(1);
    run.release();
  });
});
