// tollgate/http in an Express 5 app: a general limit for every route, and a stricter one
// (keyed by the account name, not the address) for POST /login. Clients connect directly
// here, so each is keyed by its socket's address and no forwarding header is trusted.
// The demo sends requests to itself, prints what came back and closes the server.
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import express from "express";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { rateLimit } from "tollgate/http";

const app = express();

// 100 requests per client, refilled at 100 per minute. First, before any body is parsed.
const general = new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 }));
app.use(rateLimit({ limiter: general, policy: "general", windowSeconds: 60 }));
// Behind a reverse proxy, name it on every limiter, so only it can say who the client is:
//   rateLimit({ ..., trustProxy: ["10.0.0.0/8"] }) // your proxy's addresses

// 3 login attempts per account, then one per 20 s; legacy X-RateLimit-* too.
const logins = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1 / 20 }));
const loginLimit = rateLimit({
  limiter: logins,
  policy: "login",
  windowSeconds: 60,
  headers: "both",
  key: (req, clientKey) => {
    const user: unknown = (req as express.Request).body?.user;
    // A name the client makes up is a key it chooses: accept only plausible ones.
    return typeof user === "string" && user.length <= 64 ? `user:${user}` : `ip:${clientKey}`;
  },
});
// express.json() before loginLimit only: the login key is in the body.
app.post("/login", express.json(), loginLimit, (_req, res) => {
  res.status(401).json({ error: "wrong password" });
});
app.get("/", (_req, res) => {
  res.send("hello\n");
});

// Port 0 takes a free port; a service listens on its own.
const server = app.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});

// The demo: requests to itself, what came back, then the server closed.
await once(server, "listening");
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const home = await fetch(base);
console.log(`GET / -> ${home.status}; RateLimit: ${home.headers.get("ratelimit")}`);
for (let i = 1; i <= 4; i++) {
  const response = await fetch(`${base}/login`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ user: "alice", password: "guess" }),
  });
  console.log(`POST /login #${i} -> ${response.status} ${response.statusText}`);
  if (response.status === 429) {
    console.log(`date: ${response.headers.get("date")}`);
    response.headers.forEach((value, name) => {
      if (/^(ratelimit|x-ratelimit|retry-after|content-type)/.test(name)) {
        console.log(`${name}: ${value}`);
      }
    });
    console.log(await response.text());
  }
}
server.close();
