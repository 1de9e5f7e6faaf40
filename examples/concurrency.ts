// The recipe of docs/concurrency.md: at most N at once, in process (a ConcurrencyLimiter
// with a queue), per client (KeyedConcurrencyLimiter), and per HTTP request
// (concurrencyLimit on node:http: the permit is held until the handler ends the response).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ConcurrencyLimiter, KeyedConcurrencyLimiter, RateLimitError } from "tollgate";
import { concurrencyLimit } from "tollgate/http";

// Two jobs at once, up to 10 waiting; each waits at most 1 s.
const jobs = new ConcurrencyLimiter({ limit: 2, maxQueue: 10 });
let running = 0;
let most = 0;
async function job(id: number): Promise<number> {
  const permit = await jobs.acquire({ maxWaitMs: 1000 });
  try {
    running++;
    most = Math.max(most, running);
    await new Promise((resolve) => setTimeout(resolve, 10));
    return id;
  } finally {
    running--;
    permit.release(); // always: a permit never released is lost for good
  }
}
console.log(await Promise.all([1, 2, 3, 4, 5].map(job)), "at most", most, "at once"); // [ 1, 2, 3, 4, 5 ] at most 2 at once

// No queue: tryAcquire answers at once; acquire past a full queue rejects with a RateLimitError.
const one = new ConcurrencyLimiter({ limit: 1 });
const held = one.tryAcquire();
console.log(one.tryAcquire()); // null
console.log(await one.acquire().catch((e: unknown) => e instanceof RateLimitError)); // true
held?.release();

// Per client: two requests in flight per key; a key is forgotten once it holds nothing.
const perClient = new KeyedConcurrencyLimiter({ limit: 2, maxKeys: 10_000 });
const a = perClient.tryAcquire("client-a");
console.log(perClient.size, perClient.inUseOf("client-a")); // 1 1
a?.release();
console.log(perClient.size); // 0

// HTTP: at most one request in flight; the second gets 429 while the first runs.
let finish: () => void = () => {};
const gate = concurrencyLimit({ limiter: one });
const server = createServer((req, res) =>
  gate(req, res, () => {
    finish = () => res.end("done");
  }),
);
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
const first = fetch(url);
while (one.inUse === 0) await new Promise((resolve) => setTimeout(resolve, 1));
const second = await fetch(url);
console.log(second.status, second.headers.get("ratelimit-policy")); // 429 "default";q=1;qu="concurrent-requests"
finish();
const body = await (await first).text();
while (one.inUse !== 0) await new Promise((resolve) => setTimeout(resolve, 1));
console.log(body, one.inUse); // done 0 (released once the response finished)
server.close();
