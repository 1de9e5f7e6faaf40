/**
 * Real HTTP clients with their own retry-on-429 against every adapter, over loopback, on
 * wall time (the clients sleep for real): ky, got, undici's RetryAgent, axios with
 * axios-retry, and Octokit with its throttling plugin. Each must wait what the headers ask
 * and then succeed, and must not hammer a refusal that can never pass.
 *
 * All 30 client/adapter pairs run at once in `beforeAll` (about 5 s, most of it the 3 s
 * watch after the never-passing refusals); the tests only read what was recorded. Waits
 * are measured between the server's own arrival times of the refused request and of its
 * retry, bounded below by the exact `retryAfterMs` of the refusal and above by what the
 * client was asked plus 1.2 s of the time this process's event loop turned: the periods in
 * which it did not (a loaded machine descheduled the process, or the other 29 pairs' work
 * held the loop, so neither the client's timer nor the server could act) are measured by a
 * 10 ms ticker and left out. Under load the wall-clock wait ran to 1.9 s of which the loop
 * turned for 70 ms: the timer fires once the loop turns again, so load cannot make them fail.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { serve } from "@hono/node-server";
import { Octokit } from "@octokit/core";
import { throttling } from "@octokit/plugin-throttling";
import axios from "axios";
import axiosRetry from "axios-retry";
import express from "express";
import Fastify from "fastify";
import got from "got";
import { Hono } from "hono";
import Koa from "koa";
import ky from "ky";
import { Agent, RetryAgent, request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import {
  type FastifyRequestLike,
  fastifyRateLimit,
  honoRateLimit,
  koaRateLimit,
  rateLimit,
  withRateLimit,
} from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";

/** One request the limiter decided: when it arrived (monotonic and wall ms) and the answer. */
interface Arrival {
  readonly atMs: number;
  readonly wallMs: number;
  readonly decision: Decision;
}

/**
 * The limiter behind every adapter: one key per path (`/<client>/<scenario>`), each a
 * TokenBucket of capacity 1: `wait` refills 1 per second, `spent` never refills, `large`
 * is asked for a cost of 2. Every decision is recorded with its arrival time. A `wait`
 * key's unit is taken when its first request arrives, just before deciding it, so that
 * request is refused for a second however late a loaded machine sends it.
 */
class RecordingLimiter {
  readonly arrivals = new Map<string, Arrival[]>();
  private readonly keyed = new KeyedLimiter(
    (key) => new TokenBucket({ capacity: 1, refillPerSecond: key.endsWith("/spent") ? 0 : 1 }),
  );

  consume(key: string, cost?: number): Decision {
    const atMs = performance.now();
    const list = this.arrivals.get(key) ?? [];
    if (list.length === 0 && key.endsWith("/wait")) this.keyed.consume(key, 1);
    const decision = this.keyed.consume(key, cost);
    list.push({ atMs, wallMs: Date.now(), decision });
    this.arrivals.set(key, list);
    return decision;
  }
}

const keyOf = (path: string) => path.split("?")[0]!;
const costOf = (path: string) => (keyOf(path).endsWith("/large") ? 2 : 1);

interface Started {
  readonly url: string;
  readonly limiter: RecordingLimiter;
  close(): Promise<void>;
}

function closeNode(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

async function listenNode(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function serveFetch(
  fetch: (request: Request, env: unknown) => Promise<Response | undefined> | Response,
): Promise<{ url: string; close(): Promise<void> }> {
  let server: ReturnType<typeof serve> | undefined;
  const info = await new Promise<AddressInfo>((resolve) => {
    server = serve(
      { fetch: fetch as Parameters<typeof serve>[0]["fetch"], port: 0, hostname: "127.0.0.1" },
      resolve,
    );
  });
  return {
    url: `http://127.0.0.1:${info.port}`,
    close: () => closeNode(server as unknown as Server),
  };
}

const ok = (res: ServerResponse) => {
  res.setHeader("content-type", "text/plain");
  res.end("ok");
};

/** Each adapter serving "ok" behind the middleware, on an ephemeral loopback port. */
const ADAPTERS: ReadonlyArray<{ name: string; start(): Promise<Started> }> = [
  {
    name: "node:http",
    async start() {
      const limiter = new RecordingLimiter();
      const limit = rateLimit({
        limiter,
        key: (req) => keyOf(req.url!),
        cost: (req) => costOf(req.url!),
      });
      const server = createServer((req, res) => limit(req, res, () => ok(res)));
      return { url: await listenNode(server), limiter, close: () => closeNode(server) };
    },
  },
  {
    name: "Express",
    async start() {
      const limiter = new RecordingLimiter();
      const app = express();
      app.use(
        rateLimit({ limiter, key: (req) => keyOf(req.url!), cost: (req) => costOf(req.url!) }),
      );
      app.use((_req, res) => {
        res.type("text/plain").send("ok");
      });
      const server = createServer(app);
      return { url: await listenNode(server), limiter, close: () => closeNode(server) };
    },
  },
  {
    name: "Fastify",
    async start() {
      const limiter = new RecordingLimiter();
      const app = Fastify();
      await app.register(fastifyRateLimit, {
        limiter,
        key: (request: FastifyRequestLike) => keyOf(request.raw.url!),
        cost: (request: FastifyRequestLike) => costOf(request.raw.url!),
      });
      app.get("/*", async () => "ok");
      const url = await app.listen({ port: 0, host: "127.0.0.1" });
      return { url, limiter, close: () => app.close() };
    },
  },
  {
    name: "Hono",
    async start() {
      const limiter = new RecordingLimiter();
      const app = new Hono();
      app.use(
        honoRateLimit({
          limiter,
          key: (c) => keyOf(new URL(c.req.raw.url).pathname),
          cost: (c) => costOf(new URL(c.req.raw.url).pathname),
        }),
      );
      app.get("/*", (c) => c.text("ok"));
      const served = await serveFetch(app.fetch);
      return { ...served, limiter };
    },
  },
  {
    name: "Koa",
    async start() {
      const limiter = new RecordingLimiter();
      const app = new Koa();
      app.use(
        koaRateLimit({
          limiter,
          key: (ctx) => keyOf(ctx.req.url!),
          cost: (ctx) => costOf(ctx.req.url!),
        }),
      );
      app.use((ctx) => {
        ctx.body = "ok";
      });
      const server = createServer(app.callback());
      return { url: await listenNode(server), limiter, close: () => closeNode(server) };
    },
  },
  {
    name: "fetch (withRateLimit on @hono/node-server)",
    async start() {
      const limiter = new RecordingLimiter();
      const pathOf = (request: Request) => new URL(request.url).pathname;
      const handler = withRateLimit(() => new Response("ok"), {
        limiter,
        key: (request) => keyOf(pathOf(request)),
        cost: (request) => costOf(pathOf(request)),
      });
      const served = await serveFetch(handler);
      return { ...served, limiter };
    },
  },
];

/**
 * What a client call ended with: the final status it saw, or -1 when it ended without one
 * (an abort: still retrying after {@link CALL_LIMIT_MS}).
 */
type Fetcher = (url: string, signal: AbortSignal) => Promise<number>;

/**
 * Every call is aborted after this long, so that a server inviting endless retries fails
 * the tests with what was recorded instead of hanging them (the calls here take 2 s).
 */
const CALL_LIMIT_MS = 15_000;

const ThrottledOctokit = Octokit.plugin(throttling);

/**
 * Each client, set up to retry as eagerly as its options allow (up to 10 times), so that a
 * refusal inviting a retry would show as hammering.
 */
const CLIENTS: ReadonlyArray<{ name: string; make(adapter: string): Fetcher }> = [
  {
    name: "ky",
    make: () => async (url, signal) => {
      try {
        return (await ky.get(url, { retry: { limit: 10 }, timeout: false, signal })).status;
      } catch (error) {
        return (error as { response?: { status: number } }).response?.status ?? -1;
      }
    },
  },
  {
    name: "got",
    make: () => async (url, signal) => {
      try {
        return (await got(url, { retry: { limit: 10 }, signal })).statusCode;
      } catch (error) {
        return (error as { response?: { statusCode: number } }).response?.statusCode ?? -1;
      }
    },
  },
  {
    name: "undici RetryAgent",
    make: () => {
      const dispatcher = new RetryAgent(new Agent(), { maxRetries: 10 });
      return async (url, signal) => {
        try {
          const response = await request(url, { dispatcher, signal });
          await response.body.text();
          return response.statusCode;
        } catch {
          return -1;
        }
      };
    },
  },
  {
    name: "axios-retry",
    make: () => {
      const client = axios.create({ validateStatus: (status) => status < 400 });
      axiosRetry(client, { retries: 10 });
      return async (url, signal) => {
        try {
          return (await client.get(url, { signal })).status;
        } catch (error) {
          return (error as { response?: { status: number } }).response?.status ?? -1;
        }
      };
    },
  },
  {
    name: "Octokit",
    make: (adapter) => async (url, signal) => {
      const { origin, pathname } = new URL(url);
      const octokit = new ThrottledOctokit({
        baseUrl: origin,
        throttle: {
          id: `${adapter}${pathname}`, // its own Bottleneck groups
          onRateLimit: () => true, // always retry: the headers alone decide when
          onSecondaryRateLimit: () => true,
        },
      });
      try {
        return (await octokit.request(`GET ${pathname}`, { request: { signal } })).status;
      } catch (error) {
        return (error as { status?: number }).status ?? -1;
      }
    },
  },
];

const SCENARIOS = ["wait", "spent", "large"] as const;
/** How long after a never-passing refusal requests are counted. */
const WATCH_MS = 3000;

interface Result {
  readonly status: number;
  readonly arrivals: readonly Arrival[];
}

const results = new Map<string, Result>();
const started: Started[] = [];

/** The ticker's period: a gap of twice that between two of its turns is time the loop did not turn. */
const TICK_MS = 10;
/** The periods `[fromMs, toMs]` (monotonic) in which the event loop did not turn while the clients waited. */
const stalls: [number, number][] = [];

/** How long, within `[fromMs, toMs]`, the event loop did not turn. */
function stalledMs(fromMs: number, toMs: number): number {
  let ms = 0;
  for (const [a, b] of stalls) ms += Math.max(0, Math.min(b, toMs) - Math.max(a, fromMs));
  return ms;
}

beforeAll(async () => {
  let lastTickMs = performance.now();
  const ticker = setInterval(() => {
    const nowMs = performance.now();
    if (nowMs - lastTickMs > TICK_MS * 2) stalls.push([lastTickMs + TICK_MS, nowMs]);
    lastTickMs = nowMs;
  }, TICK_MS);
  started.push(...(await Promise.all(ADAPTERS.map((adapter) => adapter.start()))));
  const flows: Promise<void>[] = [];
  ADAPTERS.forEach((adapter, a) => {
    const server = started[a]!;
    for (const client of CLIENTS) {
      const call = client.make(adapter.name);
      for (const scenario of SCENARIOS) {
        const path = `/${client.name.replace(/\W+/g, "-")}/${scenario}`;
        flows.push(
          (async () => {
            // wait: refused for 1 s at once. spent: the unit, then a refusal for good.
            // large: refused for good at once.
            const signal = AbortSignal.timeout(CALL_LIMIT_MS);
            if (scenario === "spent") await call(server.url + path, signal);
            const status = await call(server.url + path, signal);
            if (scenario !== "wait") {
              const list = server.limiter.arrivals.get(path) ?? [];
              const refusedAt = list[scenario === "large" ? 0 : 1]?.atMs ?? performance.now();
              const left = refusedAt + WATCH_MS - performance.now();
              if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
            }
            results.set(`${adapter.name}|${client.name}|${scenario}`, {
              status,
              arrivals: [...(server.limiter.arrivals.get(path) ?? [])],
            });
          })(),
        );
      }
    }
  });
  await Promise.all(flows).finally(() => clearInterval(ticker));
}, 4 * CALL_LIMIT_MS);

afterAll(async () => {
  await Promise.all(started.map((s) => s.close()));
});

/** Octokit's throttling plugin's wait for a refusal with `X-RateLimit-Reset: reset`, read at `nowMs`. */
const octokitWaitMs = (reset: number, nowMs: number) =>
  Math.max(Math.ceil((reset * 1000 - nowMs) / 1000) + 1, 0) * 1000;

/** The measured waits, for the record (`TOLLGATE_PRINT_WAITS=1`). */
const waits: string[] = [];
afterAll(() => {
  if (process.env.TOLLGATE_PRINT_WAITS === "1") console.log(waits.join("\n"));
});

describe.each(ADAPTERS.map((a) => a.name))("%s", (adapter) => {
  test.each(CLIENTS.map((c) => c.name))(
    "%s waits the time asked after a 429, then succeeds",
    (client) => {
      const { status, arrivals } = results.get(`${adapter}|${client}|wait`)!;
      expect(status).toBe(200);
      expect(arrivals.map((a) => a.decision.allowed)).toStrictEqual([false, true]);
      const refused = arrivals[0]!;
      const waitedMs = arrivals[1]!.atMs - refused.atMs;
      const exactMs = refused.decision.retryAfterMs;
      const retryAfterMs = Math.ceil(exactMs / 1000) * 1000; // the Retry-After sent, in ms
      // Asked: Retry-After, or for Octokit X-RateLimit-Reset by GitHub's rule (+1 s), which
      // is never more than a second past Retry-After.
      let askedMs = retryAfterMs;
      if (client === "Octokit") {
        const reset = Math.floor((refused.wallMs + exactMs) / 1000);
        askedMs = octokitWaitMs(reset, refused.wallMs);
        expect(askedMs).toBeLessThanOrEqual(retryAfterMs + 1000);
      }
      // The time the client had to act: the part of the wait in which the event loop turned.
      // A loaded machine that held the loop made the wall-clock wait longer than was asked.
      const ranMs = waitedMs - stalledMs(refused.atMs, arrivals[1]!.atMs);
      waits.push(
        `${adapter}\t${client}\tasked ${askedMs} ms\twaited ${Math.round(waitedMs)} ms, ran ${Math.round(ranMs)} ms`,
      );
      expect(waitedMs).toBeGreaterThanOrEqual(exactMs);
      expect(ranMs).toBeLessThanOrEqual(askedMs + 1200);
    },
  );

  test.each(CLIENTS.map((c) => c.name))(
    "%s makes at most 3 requests in the 3 s after a refusal that can never pass",
    (client) => {
      for (const [scenario, expected] of [
        ["spent", 403],
        ["large", 413],
      ] as const) {
        const { status, arrivals } = results.get(`${adapter}|${client}|${scenario}`)!;
        const refusal = scenario === "large" ? 0 : 1;
        const refusedAt = arrivals[refusal]!.atMs;
        const after = arrivals.filter((a, i) => i > refusal && a.atMs - refusedAt <= WATCH_MS);
        waits.push(`${adapter}\t${client}\t${scenario}: ${status}, ${after.length} more requests`);
        expect(after.length, scenario).toBeLessThanOrEqual(3);
        expect(status, scenario).toBe(expected);
      }
    },
  );
});
