// The HTTP concurrency middlewares against real servers on loopback (node:http, Express,
// Fastify, Hono and a plain fetch handler on @hono/node-server): requests aborted
// mid-flight, while the handler waits or mid-body, give their permits back once their
// handler is done, so the in-use count is 0 again; one past the limit gets 429 with
// qu="concurrent-requests".
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { ServerType } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { ConcurrencyLimiter } from "../../src/concurrency/concurrency-limiter.js";
import { KeyedConcurrencyLimiter } from "../../src/concurrency/keyed-concurrency-limiter.js";
import { fastifyConcurrencyLimit } from "../../src/http/concurrency-fastify.js";
import { withConcurrencyLimit } from "../../src/http/concurrency-fetch.js";
import { concurrencyLimit } from "../../src/http/concurrency-node.js";
import { close, closeServed, listen, serveFetch } from "./support.js";

/** What the handler does: answer at once, wait for the test, or send one chunk and wait. */
type Mode = "ok" | "hang" | "stream";
const modeOf = (url: string | undefined): Mode =>
  url?.includes("hang") ? "hang" : url?.includes("stream") ? "stream" : "ok";

/** Handlers left waiting, ended when the test ends. */
let pending: (() => void)[] = [];
const later = () => new Promise<void>((resolve) => pending.push(resolve));
const cleanups: (() => Promise<void>)[] = [];
const served: ServerType[] = [];

afterEach(async () => {
  for (const end of pending.splice(0)) end();
  for (const c of cleanups.splice(0)) await c();
  for (const s of served.splice(0)) await closeServed(s);
  pending = [];
});

/** Polls `condition` on the event loop (real sockets close on their own time), up to 5 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A node handler for the three modes. */
function nodeHandler(req: IncomingMessage, res: ServerResponse): void {
  const mode = modeOf(req.url);
  if (mode === "ok") res.end("ok");
  else if (mode === "hang") later().then(() => res.end("late"));
  else {
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.write("first chunk");
    later().then(() => res.end());
  }
}

/** A fetch handler for the three modes. */
function fetchHandler(request: Request): Response | Promise<Response> {
  const mode = modeOf(request.url);
  if (mode === "ok") return new Response("ok");
  if (mode === "hang") return later().then(() => new Response("late"));
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("first chunk"));
      later().then(() => {
        try {
          controller.close();
        } catch {
          // cancelled meanwhile
        }
      });
    },
  });
  return new Response(body);
}

type Limiter = ConcurrencyLimiter | KeyedConcurrencyLimiter;
/**
 * Name, start, and whether a streaming handler that has not ended its response keeps its
 * permit after an abort: node servers hold it until the handler ends the response (the
 * handler still runs); a fetch handler is done once it returned its `Response`, so the
 * abort that cancels the body releases it.
 */
const SERVERS: [string, (limiter: Limiter) => Promise<string>, boolean][] = [
  [
    "node:http",
    async (limiter) => {
      const gate = concurrencyLimit({ limiter });
      const server = createServer((req, res) => gate(req, res, () => nodeHandler(req, res)));
      cleanups.push(() => close(server));
      return listen(server);
    },
    true,
  ],
  [
    "Express",
    async (limiter) => {
      const app = express();
      app.use(concurrencyLimit({ limiter }));
      app.get("/{*path}", (req, res) => nodeHandler(req, res));
      const server = createServer(app);
      cleanups.push(() => close(server));
      return listen(server);
    },
    true,
  ],
  [
    "Fastify",
    async (limiter) => {
      const app = Fastify({ forceCloseConnections: true });
      app.addHook("onRequest", fastifyConcurrencyLimit({ limiter }));
      app.get("/*", async (request, reply) => {
        const mode = modeOf(request.url);
        if (mode === "ok") return "ok";
        if (mode === "hang") {
          await later();
          return "late";
        }
        reply.hijack();
        nodeHandler(request.raw, reply.raw);
        return reply;
      });
      await app.listen({ port: 0, host: "127.0.0.1" });
      cleanups.push(() => app.close());
      const { port } = app.server.address() as { port: number };
      return `http://127.0.0.1:${port}`;
    },
    true,
  ],
  [
    "Hono",
    async (limiter) => {
      const app = new Hono();
      app.get("/*", (c) => fetchHandler(c.req.raw));
      return serveFetch(withConcurrencyLimit(app.fetch, { limiter }), served);
    },
    false,
  ],
  [
    "fetch handler",
    async (limiter) => serveFetch(withConcurrencyLimit(fetchHandler, { limiter }), served),
    false,
  ],
];

describe.each(SERVERS)("%s", (_name, start, streamHeld) => {
  it("aborted requests, waiting or mid-body, give their permits back; 429 when full", async () => {
    const limiter = new ConcurrencyLimiter({ limit: 2 });
    const url = await start(limiter);
    const ok = await fetch(`${url}/ok`);
    expect([ok.status, await ok.text()]).toEqual([200, "ok"]);
    expect(ok.headers.get("ratelimit-policy")).toBe('"default";q=2;qu="concurrent-requests"');
    expect(ok.headers.get("ratelimit")).toBe('"default";r=1');
    await until(() => limiter.inUse === 0, "the finished request's permit");

    const waiting = new AbortController();
    const streaming = new AbortController();
    const hung = fetch(`${url}/hang`, { signal: waiting.signal }).catch((e: unknown) => e);
    const stream = await fetch(`${url}/stream`, { signal: streaming.signal });
    const reader = stream.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("first chunk");
    await until(() => limiter.inUse === 2, "two requests in flight");

    const full = await fetch(`${url}/ok`);
    expect(full.status).toBe(429);
    expect(full.headers.get("ratelimit-policy")).toBe('"default";q=2;qu="concurrent-requests"');
    expect(full.headers.get("retry-after")).toBe("1");
    expect(await full.json()).toMatchObject({ status: 429 });

    waiting.abort();
    streaming.abort();
    await hung;
    await reader.cancel().catch(() => {});
    // Handlers still running keep their permits, their clients gone or not.
    await until(() => limiter.inUse === (streamHeld ? 2 : 1), "the aborted stream's permit");
    for (const end of pending.splice(0)) end();
    await until(() => limiter.inUse === 0, "the permits of the handlers that ran on");
    expect(limiter.inUse).toBe(0);

    const again = await fetch(`${url}/ok`);
    expect(again.status).toBe(200);
    await again.text();
    await until(() => limiter.inUse === 0, "the last permit");
  });

  it("a keyed limiter forgets the client once its requests are gone", async () => {
    const limiter = new KeyedConcurrencyLimiter({ limit: 1 });
    const url = await start(limiter);
    const controller = new AbortController();
    const hung = fetch(`${url}/hang`, { signal: controller.signal }).catch((e: unknown) => e);
    await until(() => limiter.inUse === 1, "one request in flight");
    expect(limiter.inUseOf("127.0.0.1")).toBe(1);
    expect((await fetch(`${url}/ok`)).status).toBe(429);
    controller.abort();
    await hung;
    for (const end of pending.splice(0)) end(); // the handler ends: its permit comes back
    await until(() => limiter.size === 0, "the client forgotten");
    expect(limiter.inUse).toBe(0);
  });
});
