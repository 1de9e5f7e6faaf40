// The concurrency middlewares' options, checked at creation, and the decision they hand the
// pipeline: a permit inside an allowed Decision, the configured retry hint on a denial.
import { createServer } from "node:http";
import { describe, expect, it } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { ConcurrencyLimiter } from "../../src/concurrency/concurrency-limiter.js";
import { withConcurrencyLimit } from "../../src/http/concurrency-fetch.js";
import { concurrencyLimit } from "../../src/http/concurrency-node.js";
import { close, listen } from "./support.js";

describe("concurrency middleware options", () => {
  const limiter = new ConcurrencyLimiter({ limit: 1 });

  it.each([
    [
      { limiter: new TokenBucket({ capacity: 1, refillPerSecond: 1 }) },
      /limiter must be a ConcurrencyLimiter or a KeyedConcurrencyLimiter/,
    ],
    [{ limiter, windowSeconds: 60 }, /a concurrency limit has no window/],
    [{ limiter, cost: () => 2 }, /cost/],
    [{ limiter, key: "ip" }, /key must be a function/],
  ])("%o throws a TypeError", (options, message) => {
    expect(() => concurrencyLimit(options as never)).toThrow(TypeError);
    expect(() => concurrencyLimit(options as never)).toThrow(message);
  });

  it("a denial sends the limiter's retry hint as Retry-After and t", async () => {
    const slow = new ConcurrencyLimiter({ limit: 1, retryAfterMs: 2500 });
    let finish: () => void = () => {};
    const handler = withConcurrencyLimit(
      () => new Promise<Response>((resolve) => (finish = () => resolve(new Response("ok")))),
      { limiter: slow, remoteAddress: () => "192.0.2.1", policy: "conc" },
    );
    const first = handler(new Request("http://x/"));
    const denied = await handler(new Request("http://x/"));
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("3");
    expect(denied.headers.get("ratelimit")).toBe('"conc";r=0;t=3');
    expect(denied.headers.get("ratelimit-policy")).toBe('"conc";q=1;qu="concurrent-requests"');
    finish();
    const ok = await first;
    expect(slow.inUse).toBe(1); // held until the body is read
    expect(await ok.text()).toBe("ok");
    expect(slow.inUse).toBe(0);
  });

  it("a handler that throws releases its permit", async () => {
    const one = new ConcurrencyLimiter({ limit: 1 });
    const handler = withConcurrencyLimit(
      () => {
        throw new Error("boom");
      },
      { limiter: one, remoteAddress: () => "192.0.2.1" },
    );
    await expect(handler(new Request("http://x/"))).rejects.toThrow("boom");
    expect(one.inUse).toBe(0);
  });
});

describe("concurrency middleware wallClock", () => {
  it("X-RateLimit-Reset of a denial is counted on the wallClock given", async () => {
    const one = new ConcurrencyLimiter({ limit: 1, retryAfterMs: 2500 });
    let finish: () => void = () => {};
    const handler = withConcurrencyLimit(
      () => new Promise<Response>((resolve) => (finish = () => resolve(new Response("ok")))),
      { limiter: one, remoteAddress: () => "192.0.2.1", wallClock: () => 1_000_000 },
    );
    const first = handler(new Request("http://x/"));
    const denied = await handler(new Request("http://x/"));
    expect(denied.status).toBe(429);
    // floor((1_000_000 + 2500) / 1000): the given clock, not Date.now.
    expect(denied.headers.get("x-ratelimit-reset")).toBe("1002");
    finish();
    await (await first).text();
  });
});

describe("concurrencyLimit behind a middleware that already sent the headers", () => {
  it("regression: setting its headers threw ERR_HTTP_HEADERS_SENT out of the server", async () => {
    const one = new ConcurrencyLimiter({ limit: 1 });
    const gate = concurrencyLimit({ limiter: one });
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered: () => void = () => {};
    const inHandler = new Promise<void>((resolve) => (entered = resolve));
    const server = createServer((req, res) => {
      res.writeHead(200, { "Content-Type": "text/plain" }); // an earlier middleware's head
      res.write("early ");
      gate(req, res, () => {
        if (req.url !== "/hold") res.end("handler");
        else {
          entered();
          void held.then(() => res.end("handler"));
        }
      });
    });
    const url = await listen(server);
    try {
      // Allowed: the handler runs and holds its permit until it ends the response.
      expect(await (await fetch(`${url}/`)).text()).toBe("early handler");
      expect(one.inUse).toBe(0);
      const first = fetch(`${url}/hold`);
      await inHandler;
      expect(one.inUse).toBe(1);
      // Denied: it cannot become a 429 any more, so it is cut off, never let through.
      const denied = await fetch(`${url}/`).then(
        (r) => r.text(),
        (error: unknown) => error,
      );
      expect(denied).not.toBe("early handler");
      release();
      expect(await (await first).text()).toBe("early handler");
      expect(one.inUse).toBe(0);
    } finally {
      await close(server);
    }
  });
});
