import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { type Context, Hono } from "hono";
import Koa from "koa";
import { expectTypeOf, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { allOf } from "../../src/composite/all-of.js";
import { KeyedConcurrencyLimiter } from "../../src/concurrency/keyed-concurrency-limiter.js";
import { koaConcurrencyLimit } from "../../src/http/concurrency-koa.js";
import type { FailureInfo, FailureKind, KeyedConsumer } from "../../src/http/core.js";
import { type FastifyRouteRateLimit, fastifyRateLimit } from "../../src/http/fastify.js";
import { withRateLimit } from "../../src/http/fetch.js";
import { honoRateLimit } from "../../src/http/hono.js";
import { koaRateLimit } from "../../src/http/koa.js";
import { rateLimit } from "../../src/http/node.js";

declare const limiter: KeyedConsumer;

test("a handler that always answers gives a wrapper that always answers (Bun.serve's fetch type)", () => {
  const wrapped = withRateLimit((_request: Request) => new Response("ok"), { limiter });
  expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<Response>>();
});

test("a handler that may return undefined (Bun after server.upgrade) keeps undefined", () => {
  const wrapped = withRateLimit((_request: Request): Response | undefined => undefined, {
    limiter,
  });
  expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<Response | undefined>>();
});

test("extra runtime arguments pass through in the type", () => {
  const wrapped = withRateLimit(
    async (_request: Request, info: { remoteAddr: { hostname: string } }) =>
      new Response(info.remoteAddr.hostname),
    { limiter },
  );
  expectTypeOf(wrapped).parameters.toEqualTypeOf<[Request, { remoteAddr: { hostname: string } }]>();
});

test("onError is told which kind of failure it was", () => {
  expectTypeOf<FailureInfo["kind"]>().toEqualTypeOf<"outage" | "programming">();
  expectTypeOf<FailureKind>().toEqualTypeOf<FailureInfo["kind"]>();
});

test("an async onLimited is accepted (its rejection is handled as a programming error)", () => {
  expectTypeOf(rateLimit).toBeCallableWith({
    limiter,
    onLimited: async () => {
      throw new Error("bug");
    },
  });
});

test("fastifyRateLimit registers on a real Fastify 5 instance, hooks typed with Fastify's request", () => {
  const app = Fastify();
  app.register(fastifyRateLimit, {
    limiter,
    key: (request: FastifyRequest, clientKey: string) => request.ip ?? clientKey,
    onLimited: (_request: FastifyRequest, reply: FastifyReply) => reply.send("slow down"),
  });
  app.get("/health", { config: { rateLimit: false } }, async () => "ok");
  const route: FastifyRouteRateLimit = { policy: "login", cost: () => 2 };
  app.get("/login", { config: { rateLimit: route } }, async () => "ok");
  // @ts-expect-error trustProxy is the plugin's alone, not a route's
  const bad: FastifyRouteRateLimit = { trustProxy: 1 };
  expectTypeOf(bad).toBeObject();
});

test("honoRateLimit is a Hono 4 middleware; hooks may take Hono's Context", () => {
  const app = new Hono();
  app.use(honoRateLimit({ limiter }));
  app.use(
    honoRateLimit({ limiter, key: (c: Context, clientKey) => c.req.header("x-key") ?? clientKey }),
  );
  app.use("/api/*", honoRateLimit({ limiter, onLimited: (c: Context) => c.text("slow", 429) }));
});

test("koaRateLimit is a Koa middleware", () => {
  const app = new Koa();
  app.use(koaRateLimit({ limiter, key: (ctx: Koa.Context, clientKey) => ctx.ip ?? clientKey }));
});

test("koaConcurrencyLimit is a Koa middleware, typed on Koa's context", () => {
  const app = new Koa();
  const perClient = new KeyedConcurrencyLimiter({ limit: 4 });
  app.use(
    koaConcurrencyLimit({
      limiter: perClient,
      maxHoldMs: 30_000,
      key: (ctx: Koa.Context, clientKey) => ctx.get("x-user") || clientKey,
    }),
  );
});

test("an unkeyed limiter is accepted as the limiter (one global limit)", () => {
  expectTypeOf(rateLimit).toBeCallableWith({
    limiter: new TokenBucket({ capacity: 10, refillPerSecond: 1 }),
  });
  expectTypeOf(withRateLimit).toBeCallableWith(() => new Response(), {
    limiter: allOf(new TokenBucket({ capacity: 10, refillPerSecond: 1 })),
  });
});

test("onNearLimit gets each adapter's own request, the decision and the key", () => {
  rateLimit({
    limiter,
    onNearLimit: (req, decision, key) => {
      expectTypeOf(req.headers).toHaveProperty("host");
      expectTypeOf(decision.remaining).toBeNumber();
      expectTypeOf(key).toBeString();
    },
  });
  withRateLimit(() => new Response("ok"), {
    limiter,
    onNearLimit: (request) => expectTypeOf(request).toEqualTypeOf<Request>(),
  });
  honoRateLimit<Context>({ limiter, onNearLimit: (c) => expectTypeOf(c).toEqualTypeOf<Context>() });
  koaRateLimit({
    limiter,
    nearLimitShare: 0.2,
    onNearLimit: (ctx) => expectTypeOf(ctx).toHaveProperty("req"),
  });
  const route: FastifyRouteRateLimit<FastifyRequest, FastifyReply> = {
    nearLimitShare: 1,
    onNearLimit: (request: FastifyRequest) => expectTypeOf(request).toEqualTypeOf<FastifyRequest>(),
  };
  expectTypeOf(route.nearLimitShare).toEqualTypeOf<number | undefined>();
  // @ts-expect-error: a string is not a share
  rateLimit({ limiter, nearLimitShare: "0.2" });
});

test("a LeasedTokenBucket is a middleware's limiter; its charge is a LeasedReceipt that settle takes", async () => {
  const { LeasedTokenBucket, MemoryLeaseStore } = await import("../../src/redis/index.js");
  const { settle } = await import("../../src/core/settle.js");
  const store = new MemoryLeaseStore({ capacity: 10, refillPerSecond: 1 });
  const leased = new LeasedTokenBucket({ capacity: 10, refillPerSecond: 1, store });
  expectTypeOf(rateLimit).toBeCallableWith({ limiter: leased, blockDurationMs: 60_000 });
  const receipt = leased.charge("k", 2);
  expectTypeOf(receipt.source).toEqualTypeOf<import("../../src/redis/index.js").LeasedSource>();
  expectTypeOf(receipt.units).toBeNumber();
  expectTypeOf(leased.refund(receipt)).toBeNumber();
  expectTypeOf(leased.refund("k", 1)).toBeNumber();
  expectTypeOf(leased.block("k", 1000)).toBeNumber();
  expectTypeOf(settle).toBeCallableWith(leased, receipt, 1);
});
