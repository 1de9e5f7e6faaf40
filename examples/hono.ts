// tollgate/http as a Hono 4 middleware, served on Node by @hono/node-server (the client
// address comes from c.env.incoming; on Workers pass remoteAddress, see docs/http.md).
// A general limit on every route and a per-API-key one (known keys only) on /api. The
// demo listens on an ephemeral loopback port, sends requests to itself, prints what came
// back and closes.
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { honoRateLimit } from "tollgate/http";

const app = new Hono();

// 100 requests per client address, refilled at 100 per minute.
const general = new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 }));
app.use(honoRateLimit({ limiter: general, policy: "general", windowSeconds: 60 }));

const API_KEYS = new Set(["k-123", "k-456"]); // stands for your key store

// On /api only: 2 requests per known API key, then one every 30 s. A request without a
// known key is counted under its address, so a made-up key buys no fresh budget.
const perKey = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1 / 30 }));
app.use(
  "/api/*",
  honoRateLimit({
    limiter: perKey,
    policy: "api",
    key: (c, clientKey) => {
      const apiKey = c.req.raw.headers.get("x-api-key");
      return apiKey !== null && API_KEYS.has(apiKey) ? `key:${apiKey}` : `ip:${clientKey}`;
    },
  }),
);
app.get("/", (c) => c.text("hello\n"));
app.get("/api/items", (c) => c.json({ items: [1, 2, 3] }));

const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, async (info) => {
  const base = `http://127.0.0.1:${(info as AddressInfo).port}`;
  const home = await fetch(base);
  console.log(`GET / -> ${home.status}; RateLimit: ${home.headers.get("ratelimit")}`);
  for (let i = 1; i <= 3; i++) {
    const response = await fetch(`${base}/api/items`, { headers: { "x-api-key": "k-123" } });
    // Both policies answer: the List field carries one item per policy.
    console.log(
      `GET /api/items #${i} -> ${response.status}; RateLimit: ${response.headers.get("ratelimit")}`,
    );
    if (response.status === 429) console.log(await response.text());
  }
  server.close();
});
