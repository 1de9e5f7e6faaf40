// Blocking a client after abuse: KeyedLimiter.block by hand, and blockDurationMs in the
// middleware (rate-limiter-flexible's blockDuration): a client that hits its limit is
// refused for a minute, with Retry-After the block. The demo sends requests to itself,
// prints the exchange and closes the server.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { FixedWindow, KeyedLimiter } from "tollgate";
import { rateLimit } from "tollgate/http";

let now = 0;
const clock = () => now; // omit `clock` to use performance.now()

// By hand: block a key for 30 s (a ban after a failed CAPTCHA, an abuse report).
const perUser = new KeyedLimiter(new FixedWindow({ limit: 100, windowMs: 60_000, clock }));
perUser.block("mallory", 30_000);
console.log(perUser.consume("mallory"));
//=> { allowed: false, limit: 100, remaining: 0, retryAfterMs: 30000, resetAfterMs: 30000 }
now = 10_000;
console.log(perUser.blockedMs("mallory")); //=> 20000
perUser.unblock("mallory"); // or reset("mallory"), which also forgets its usage
console.log(perUser.consume("mallory").allowed); //=> true

// In the middleware: 2 requests per 10 s; the client that asks for a third is blocked for 60 s.
now = 0;
const limiter = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 10_000, clock }));
const limit = rateLimit({ limiter, policy: "api", blockDurationMs: 60_000 });

const server = createServer((req, res) => {
  limit(req, res, () => res.end("ok\n"));
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  for (const at of [0, 0, 0, 10_000, 59_000, 60_000]) {
    now = at;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    await response.text();
    const retry = response.headers.get("retry-after");
    console.log(
      `at ${at / 1000} s: ${response.status}${retry === null ? "" : `, Retry-After: ${retry}`}`,
    );
  }
  server.close();
});
// at 0 s: 200, twice; at 0 s: 429, Retry-After: 60 (blocked)
// at 10 s: 429, Retry-After: 50 (a new window, but the block holds)
// at 59 s: 429, Retry-After: 1; at 60 s: 200
