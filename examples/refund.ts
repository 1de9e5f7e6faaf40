// Refunds: give units back when a request turned out cheaper, or should not count.
// 1. An LLM token budget: charge the most a completion can cost up front, settle what it did
//    not use through the receipt (so the real cost always counts, a budget is never
//    overdrawn, and nothing comes back once the bucket has refilled past it).
// 2. Count only failed logins over HTTP: refundIf gives a successful login's unit back.
// The demo sends requests to itself, prints the exchange and closes the server.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { KeyedLimiter, SlidingWindowLog, settle, TokenBucket } from "tollgate";
import { rateLimit } from "tollgate/http";

const now = 0;
const clock = () => now; // omit `clock` to use performance.now()

// 10,000 tokens per user, refilled at 10,000 per minute.
const budget = new KeyedLimiter(
  new TokenBucket({ capacity: 10_000, refillPerSecond: 10_000 / 60, clock }),
);
const MAX_TOKENS = 4000; // the most one completion may use

function complete(user: string, tokensUsed: number): string {
  const receipt = budget.charge(user, MAX_TOKENS); // the most it can cost, up front
  if (!receipt.allowed) return "429: token budget spent";
  settle(budget, receipt, tokensUsed); // it cost less: give back the rest
  return `ok, ${tokensUsed} tokens`;
}

console.log(complete("ada", 1200)); //=> ok, 1200 tokens
console.log(complete("ada", 3900)); //=> ok, 3900 tokens
console.log(budget.peek("ada", 0).remaining); //=> 4900
console.log(complete("ada", 3900)); //=> ok, 3900 tokens
console.log(complete("ada", 100)); //=> 429: token budget spent (1000 left, 4000 asked)

// Logins: 3 failed attempts per client per 15 minutes; successful ones do not count.
const attempts = new KeyedLimiter(new SlidingWindowLog({ limit: 3, windowMs: 15 * 60_000 }));
const limit = rateLimit({
  limiter: attempts,
  policy: "login",
  refundIf: (status) => status < 400, // express-rate-limit's skipSuccessfulRequests
});

const server = createServer((req, res) => {
  limit(req, res, () => {
    const ok = new URL(req.url ?? "/", "http://x").searchParams.get("password") === "right";
    res.statusCode = ok ? 200 : 401;
    res.end(ok ? "welcome\n" : "wrong password\n");
  });
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  for (const password of ["right", "right", "right", "wrong", "wrong", "right", "wrong", "wrong"]) {
    const response = await fetch(`http://127.0.0.1:${port}/login?password=${password}`);
    await response.text();
    console.log(`login (${password}) -> ${response.status}`);
  }
  server.close();
});
// login (right) -> 200, three times: nothing counted
// login (wrong) -> 401, twice; login (right) -> 200; login (wrong) -> 401 (the third failure)
// login (wrong) -> 429
