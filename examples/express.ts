// tollgate/http in an Express 5 app: a general limit for every route, and a stricter one
// (keyed by the account name, not the address) for POST /login. The app runs behind one
// reverse proxy here, so trustProxy: 1 takes the client from the last X-Forwarded-For hop.
// The demo sends requests to itself, prints what came back and closes the server.
import type { AddressInfo } from "node:net";
import express from "express";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { rateLimit } from "tollgate/http";

const app = express();
app.use(express.json());

// 100 requests per client, refilled at 100 per minute.
const general = new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 }));
app.use(rateLimit({ limiter: general, policy: "general", windowSeconds: 60, trustProxy: 1 }));

// 3 login attempts per account, then one per 20 s; legacy X-RateLimit-* too.
const logins = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1 / 20 }));
const loginLimit = rateLimit({
  limiter: logins,
  policy: "login",
  windowSeconds: 60,
  headers: "both",
  key: (req, clientKey) => `login:${(req as express.Request).body?.user ?? clientKey}`,
});
app.post("/login", loginLimit, (_req, res) => {
  res.status(401).json({ error: "wrong password" });
});
app.get("/", (_req, res) => {
  res.send("hello\n");
});

const server = app.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  const home = await fetch(base, { headers: { "X-Forwarded-For": "203.0.113.7" } });
  console.log(`GET / -> ${home.status}; RateLimit: ${home.headers.get("ratelimit")}`);
  for (let i = 1; i <= 4; i++) {
    const response = await fetch(`${base}/login`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Forwarded-For": "203.0.113.7" },
      body: JSON.stringify({ user: "alice", password: "guess" }),
    });
    console.log(`POST /login #${i} -> ${response.status} ${response.statusText}`);
    if (response.status === 429) {
      response.headers.forEach((value, name) => {
        if (/^(ratelimit|x-ratelimit|retry-after|content-type)/.test(name)) {
          console.log(`${name}: ${value}`);
        }
      });
      console.log(await response.text());
    }
  }
  server.close();
});
