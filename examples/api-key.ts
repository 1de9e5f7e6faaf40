// A per-API-key limit with a burst: each known API key may send up to 20 requests at once,
// then 5 per second. Requests without a known key are counted per client address instead,
// so a client cannot get a fresh budget by sending made-up keys.
// The demo sends a burst of 22 requests to itself, prints the result and closes the server.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { rateLimit } from "tollgate/http";

const API_KEYS = new Set(["key-alice", "key-bob"]); // stands for your key store

const perApiKey = new KeyedLimiter(new TokenBucket({ capacity: 20, refillPerSecond: 5 }));
const limit = rateLimit({
  limiter: perApiKey,
  policy: "api",
  windowSeconds: 4, // a full burst of 20 refills in 4 s
  key: (req, clientKey) => {
    const apiKey = req.headers["x-api-key"];
    return typeof apiKey === "string" && API_KEYS.has(apiKey) ? `key:${apiKey}` : `ip:${clientKey}`;
  },
});

const server = createServer((req, res) => {
  limit(req, res, () => res.end("ok\n"));
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  const statuses: number[] = [];
  for (let i = 0; i < 22; i++) {
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      headers: { "X-API-Key": "key-alice" },
    });
    statuses.push(response.status);
    await response.arrayBuffer();
  }
  const bob = await fetch(`http://127.0.0.1:${port}/`, { headers: { "X-API-Key": "key-bob" } });
  console.log(`key-alice, burst of 22: ${statuses.filter((s) => s === 200).length} x 200, then`);
  console.log(`  ${statuses.filter((s) => s === 429).length} x 429; key-bob: ${bob.status}`);
  await bob.arrayBuffer();
  server.close();
});
