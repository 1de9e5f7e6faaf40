// What docs/http.md and the README say about Fastify per-route limits, checked on a real
// Fastify 5 app (app.inject, no network): a route's config.rateLimit replaces the plugin's
// limit there; registering the plugin again around a route stacks two limits.
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { fastifyRateLimit } from "../../src/http/fastify.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { manualClock } from "../support/manual-clock.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

const clock = manualClock();
const bucket = (capacity: number) =>
  new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond: 1 / 60, clock }));

/** `GET path` from one client: its status and RateLimit field (its lines joined, as sent). */
async function get(app: FastifyInstance, path: string) {
  const response = await app.inject({ method: "GET", url: path, remoteAddress: "203.0.113.7" });
  const field = response.headers["ratelimit"];
  return { status: response.statusCode, ratelimit: [field].flat().join(", ") };
}

describe("Fastify per-route limits, as documented", () => {
  test("a route's config.rateLimit replaces the plugin's limit: only its own budget is spent", async () => {
    const general = bucket(100);
    const logins = bucket(3);
    const app = Fastify();
    apps.push(app);
    await app.register(fastifyRateLimit, { limiter: general, policy: "general" });
    app.get("/login", { config: { rateLimit: { limiter: logins, policy: "login" } } }, () => "no");
    app.get("/", () => "hello");

    expect(await get(app, "/login")).toEqual({ status: 200, ratelimit: '"login";r=2;t=60' });
    // The general budget is untouched by the login: still 99 left after one request here.
    expect(await get(app, "/")).toEqual({ status: 200, ratelimit: '"general";r=99;t=60' });
  });

  test("the plugin registered again around a route stacks both limits, outer first", async () => {
    const general = bucket(100);
    const exportLimiter = bucket(1);
    const app = Fastify();
    apps.push(app);
    await app.register(fastifyRateLimit, { limiter: general, policy: "general" });
    await app.register(async (scope) => {
      await scope.register(fastifyRateLimit, { limiter: exportLimiter, policy: "export" });
      scope.get("/export", () => "a large file");
    });
    app.get("/", () => "hello");

    expect(await get(app, "/export")).toEqual({
      status: 200,
      ratelimit: '"general";r=99;t=60, "export";r=0;t=60',
    });
    // The inner limit refuses; the outer one has already spent its unit (as any stacking).
    expect(await get(app, "/export")).toEqual({
      status: 429,
      ratelimit: '"general";r=98;t=60, "export";r=0;t=60',
    });
    // The inner plugin is encapsulated: other routes see only the general limit. t is the
    // time to the bucket's next unit (one a minute here), not until it is full.
    expect(await get(app, "/")).toEqual({ status: 200, ratelimit: '"general";r=97;t=60' });
  });

  test("with the plugin registered twice, a route's config.rateLimit object is charged twice", async () => {
    const general = bucket(100);
    const inner = bucket(100);
    const own = bucket(10);
    const app = Fastify();
    apps.push(app);
    await app.register(fastifyRateLimit, { limiter: general, policy: "general" });
    await app.register(async (scope) => {
      await scope.register(fastifyRateLimit, { limiter: inner, policy: "inner" });
      scope.get("/r", { config: { rateLimit: { limiter: own, policy: "own" } } }, () => "r");
    });

    expect(await get(app, "/r")).toEqual({
      status: 200,
      ratelimit: '"own";r=9;t=60, "own";r=8;t=60',
    });
    expect(general.size + inner.size).toBe(0);
  });
});
