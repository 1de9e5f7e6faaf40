import Fastify from "fastify";
import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { ConcurrencyLimiter } from "../../src/concurrency/concurrency-limiter.js";
import { fastifyConcurrencyLimit } from "../../src/http/concurrency-fastify.js";
import { fastifyRateLimit } from "../../src/http/fastify.js";

describe("fastifyConcurrencyLimit on a real Fastify 5 app", () => {
  test("keeps the RateLimit and RateLimit-Policy headers fastifyRateLimit set before it", async () => {
    const app = Fastify();
    try {
      await app.register(fastifyRateLimit, {
        limiter: new TokenBucket({ capacity: 10, refillPerSecond: 1 }),
        policy: "api",
      });
      app.addHook(
        "onRequest",
        fastifyConcurrencyLimit({
          limiter: new ConcurrencyLimiter({ limit: 5 }),
          policy: "inflight",
        }),
      );
      app.get("/ok", async () => "ok");
      const response = await app.inject("/ok");
      expect(response.statusCode).toBe(200);
      expect(response.headers["ratelimit-policy"]).toEqual([
        '"api";q=10',
        '"inflight";q=5;qu="concurrent-requests"',
      ]);
      expect(response.headers.ratelimit).toEqual(['"api";r=9;t=1', '"inflight";r=4']);
    } finally {
      await app.close();
    }
  });

  test("alone, it sets its headers once", async () => {
    const app = Fastify();
    try {
      app.addHook(
        "onRequest",
        fastifyConcurrencyLimit({
          limiter: new ConcurrencyLimiter({ limit: 5 }),
          policy: "inflight",
        }),
      );
      app.get("/ok", async () => "ok");
      const response = await app.inject("/ok");
      expect(response.headers.ratelimit).toBe('"inflight";r=4');
    } finally {
      await app.close();
    }
  });

  test("a permit taken before a later hook answers is released; one answered before takes none", async () => {
    const limiter = new ConcurrencyLimiter({ limit: 2 });
    const app = Fastify();
    try {
      app.addHook("onRequest", async (request, reply) => {
        if (request.url === "/early") return reply.code(403).send("no");
      });
      app.addHook("onRequest", fastifyConcurrencyLimit({ limiter, policy: "inflight" }));
      app.addHook("onRequest", async (request, reply) => {
        if (request.url === "/late") return reply.code(401).send("who");
      });
      app.get("/early", async () => "unreached");
      app.get("/late", async () => "unreached");
      app.get("/ok", async () => "ok");
      for (let i = 0; i < 5; i++) {
        const early = await app.inject("/early");
        expect(early.statusCode).toBe(403);
        expect(early.headers.ratelimit).toBeUndefined();
        const late = await app.inject("/late");
        expect(late.statusCode).toBe(401);
        expect(late.headers.ratelimit).toBe('"inflight";r=1');
        expect(limiter.inUse).toBe(0);
      }
      expect((await app.inject("/ok")).statusCode).toBe(200);
      expect(limiter.inUse).toBe(0);
    } finally {
      await app.close();
    }
  });
});
