// tollgate/http as a Fastify 5 plugin: one limit for every route, a stricter one instead
// of it on POST /login (per-route options in config.rateLimit replace the plugin's), both
// on GET /export (the plugin registered twice), and none on /health.
// An ES module (top-level await); in CommonJS, wrap the setup in an async function.
// The demo listens on an ephemeral loopback port, sends requests to itself, prints what
// came back and closes the server.
import Fastify from "fastify";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { fastifyRateLimit } from "tollgate/http";

const app = Fastify();

// 100 requests per client, refilled at 100 per minute.
const general = new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 }));
await app.register(fastifyRateLimit, { limiter: general, policy: "general", windowSeconds: 60 });

// 3 login attempts per client, then one per 20 s. config.rateLimit REPLACES the plugin's
// limit on this route: a login spends only this budget, not the general one.
const logins = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1 / 20 }));
app.post("/login", { config: { rateLimit: { limiter: logins, policy: "login" } } }, (_r, reply) =>
  reply.code(401).send({ error: "wrong password" }),
);
app.get("/health", { config: { rateLimit: false } }, async () => "up\n");
app.get("/", async () => "hello\n");

// Both limits on a route: register the plugin again in an encapsulated context that holds
// the route. The outer plugin's hook runs first, then this one; each adds its policy.
const exportLimiter = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 / 60 }));
await app.register(async (scope) => {
  await scope.register(fastifyRateLimit, { limiter: exportLimiter, policy: "export" });
  scope.get("/export", async () => "a large file\n");
});

// Port 0 takes a free port; a service listens on its own.
const base = await app.listen({ port: 0, host: "127.0.0.1" });
console.log(`listening on ${base}`);
const home = await fetch(base);
console.log(`GET / -> ${home.status}; RateLimit: ${home.headers.get("ratelimit")}`);
const health = await fetch(`${base}/health`);
console.log(`GET /health -> ${health.status}; RateLimit: ${health.headers.get("ratelimit")}`);
for (let i = 1; i <= 4; i++) {
  const response = await fetch(`${base}/login`, { method: "POST" });
  console.log(
    `POST /login #${i} -> ${response.status}; RateLimit: ${response.headers.get("ratelimit")}`,
  );
  if (response.status === 429) {
    console.log(`Retry-After: ${response.headers.get("retry-after")}`);
    console.log(await response.text());
  }
}
for (let i = 1; i <= 2; i++) {
  const response = await fetch(`${base}/export`);
  await response.text();
  console.log(
    `GET /export #${i} -> ${response.status}; RateLimit: ${response.headers.get("ratelimit")}`,
  );
}
await app.close();
