// tollgate/http on a plain node:http server: 2 requests per client address, then one more
// every 10 s. The demo at the bottom sends three requests to itself, prints the exchange
// (the third one is a 429) and closes the server; drop it to keep serving.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { KeyedLimiter, TokenBucket } from "tollgate";
import { rateLimit } from "tollgate/http";

const limiter = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0.1 }));
const limit = rateLimit({ limiter, policy: "demo", windowSeconds: 20 });

const server = createServer((req, res) => {
  limit(req, res, () => {
    res.setHeader("Content-Type", "text/plain");
    res.end("hello\n");
  });
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address() as AddressInfo;
  for (let i = 1; i <= 3; i++) {
    const response = await fetch(`http://127.0.0.1:${port}/`);
    console.log(`GET / -> ${response.status} ${response.statusText}`);
    response.headers.forEach((value, name) => {
      if (name !== "date" && name !== "connection" && name !== "keep-alive") {
        console.log(`${name}: ${value}`);
      }
    });
    console.log(`${(await response.text()).trim()}\n`);
  }
  server.close();
});
