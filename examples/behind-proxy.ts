// tollgate/http behind a reverse proxy that writes `Forwarded` (RFC 7239). Only the listed
// proxy may name the client; a request whose `Forwarded` field is broken is keyed
// MALFORMED_FORWARDED_KEY, which gets a tighter budget of its own here. IPv6 clients are
// keyed by their /56 (the default `ipv6Prefix`).
// The demo stands in for the proxy (it connects from 127.0.0.1), sends requests to itself,
// prints what came back and closes the server.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { FixedWindow, KeyedLimiter } from "tollgate";
import { MALFORMED_FORWARDED_KEY, rateLimit } from "tollgate/http";

const limiter = new KeyedLimiter({
  plans: {
    malformed: new FixedWindow({ limit: 2, windowMs: 60_000 }),
    client: new FixedWindow({ limit: 100, windowMs: 60_000 }),
  },
  plan: (key) => (key === MALFORMED_FORWARDED_KEY ? "malformed" : "client"),
});

const limit = rateLimit({
  limiter,
  windowSeconds: 60, // a KeyedLimiter built from plans states no window: say it
  trustProxy: ["127.0.0.1", "10.0.0.0/8"], // the proxies' addresses, not a hop count
  proxyHeader: "forwarded",
});
const server = createServer((req, res) => limit(req, res, () => res.end("ok\n")));

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  const send = async (forwarded: string) => {
    const response = await fetch(`http://127.0.0.1:${port}/`, { headers: { forwarded } });
    await response.text();
    console.log(
      `Forwarded: ${forwarded} -> ${response.status} ${response.headers.get("ratelimit")}`,
    );
  };
  await send("for=203.0.113.7");
  await send('for="[2001:db8:1:2aa::1]"');
  for (let i = 0; i < 3; i++) await send('for="203.0.113.7'); // an unterminated quote
  server.close();
});
