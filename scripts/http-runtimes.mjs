// Runs tollgate/http's fetch wrapper inside a real Bun.serve or Deno.serve server on an
// ephemeral loopback port and checks the answers, against the BUILT package (dist/).
//
//   npm run build
//   npx bun scripts/http-runtimes.mjs [distDir]
//   npx deno run --allow-net --allow-read scripts/http-runtimes.mjs [distDir]
//
// distDir defaults to ../dist next to this script. Exits 1 on the first failed check.
// Every decision uses an injected clock, so the expected headers are exact.

const runtime = globalThis.Bun ? "bun" : globalThis.Deno ? "deno" : "node";
const args = globalThis.Deno ? globalThis.Deno.args : process.argv.slice(2);
const exit = (code) => (globalThis.Deno ? globalThis.Deno.exit(code) : process.exit(code));
const distDir = args[0]
  ? new URL(`file://${args[0].replace(/\/?$/, "/")}`)
  : new URL("../dist/", import.meta.url);

const { KeyedLimiter, TokenBucket } = await import(new URL("index.js", distDir).href);
const { rateLimit, withRateLimit } = await import(new URL("http.js", distDir).href);
/** The problem type of a 429 body (RFC 9457; the IANA registry's quota-exceeded). */
const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const { createServer } = await import("node:http");

let checks = 0;
function check(what, actual, expected) {
  checks++;
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) {
    console.error(`http-runtimes (${runtime}): ${what}: expected ${e}, got ${a}`);
    exit(1);
  }
}

/** Starts `handler` on 127.0.0.1:0 with the runtime's own server; returns its URL and a stop. */
function serve(handler) {
  if (globalThis.Bun) {
    const server = globalThis.Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler });
    return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
  }
  if (globalThis.Deno) {
    const server = globalThis.Deno.serve(
      { port: 0, hostname: "127.0.0.1", onListen() {} },
      handler,
    );
    return { url: `http://127.0.0.1:${server.addr.port}`, stop: () => server.shutdown() };
  }
  throw new Error("run this under Bun or Deno (Node is covered by test/http/*.test.ts)");
}

let now = 0;
const clock = () => now;
/** A KeyedLimiter (capacity 2, 1 per second, manual clock) that records the keys it sees. */
function recording(capacity = 2) {
  const keyed = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond: 1, clock }));
  const keys = [];
  return {
    keys,
    consume(key, cost) {
      keys.push(key);
      return keyed.consume(key, cost);
    },
  };
}
const ok = () => new Response("ok");
const pick = (response, names) => names.map((name) => response.headers.get(name));

const servers = [];
try {
  // 1. Allowed requests carry the draft-10 fields; the third is a 429 with Retry-After.
  const limiter = recording();
  const plain = serve(withRateLimit(ok, { limiter, windowSeconds: 2 }));
  servers.push(plain);
  const names = ["ratelimit-policy", "ratelimit", "retry-after"];
  const steps = [
    [0, 200, ['"default";q=2;w=2', '"default";r=1;t=1', null]],
    [0, 200, ['"default";q=2;w=2', '"default";r=0;t=2', null]],
    [0, 429, ['"default";q=2;w=2', '"default";r=0;t=1', "1"]],
    [1000, 200, ['"default";q=2;w=2', '"default";r=0;t=2', null]],
  ];
  for (const [i, [atMs, status, headers]] of steps.entries()) {
    now = atMs;
    const response = await fetch(plain.url);
    const body = await response.text();
    check(`step ${i} status`, response.status, status);
    check(`step ${i} headers`, pick(response, names), headers);
    if (status === 429) {
      check(
        `step ${i} content-type`,
        response.headers.get("content-type"),
        "application/problem+json",
      );
      check(`step ${i} problem type`, JSON.parse(body).type, QUOTA_EXCEEDED_TYPE);
    }
  }
  // 2. The key is the peer address the runtime reports (Bun: server.requestIP, Deno: info).
  check("keys from the runtime's peer address", [...new Set(limiter.keys)], ["127.0.0.1"]);

  // 3. trustProxy: a forged X-Forwarded-For is ignored when off, used when the peer is trusted.
  const off = recording(5);
  const on = recording(5);
  const untrusting = serve(withRateLimit(ok, { limiter: off }));
  const trusting = serve(withRateLimit(ok, { limiter: on, trustProxy: ["127.0.0.1"] }));
  servers.push(untrusting, trusting);
  const forged = { headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.9" } };
  await (await fetch(untrusting.url, forged)).text();
  await (await fetch(trusting.url, forged)).text();
  await (await fetch(trusting.url, { headers: { "x-forwarded-for": "2001:db8:1:2::7" } })).text();
  check("trustProxy off", off.keys, ["127.0.0.1"]);
  check("trustProxy on (IPv6 by /56)", on.keys, ["203.0.113.9", "2001:db8:1::/56"]);

  // 4. A rejecting limiter: 503 when closed, passes when open; never a 429.
  const failing = { consume: () => Promise.reject(new Error("store down")) };
  const quiet = () => {};
  const closed = serve(withRateLimit(ok, { limiter: failing, failure: "closed", onError: quiet }));
  const open = serve(withRateLimit(ok, { limiter: failing, failure: "open", onError: quiet }));
  servers.push(closed, open);
  const refused = await fetch(closed.url);
  await refused.text();
  check("failure closed", refused.status, 503);
  const passed = await fetch(open.url);
  check("failure open", [passed.status, await passed.text()], [200, "ok"]);

  // 4b. A cost() that returns NaN is a programming error: 500 even with failure 'open'
  // (it used to be taken for an outage and let through).
  const errors = [];
  const buggy = serve(
    withRateLimit(ok, {
      limiter: recording(),
      cost: () => Number.NaN,
      onError: (_error, info) => errors.push(info.kind),
    }),
  );
  servers.push(buggy);
  const bug = await fetch(buggy.url);
  await bug.text();
  check("bad cost() answers 500", [bug.status, errors], [500, ["programming"]]);

  // 5. A response with immutable headers (Response.redirect) still gets the fields.
  const redirect = serve(
    withRateLimit(() => Response.redirect("http://127.0.0.1/next", 302), { limiter: recording() }),
  );
  servers.push(redirect);
  const moved = await fetch(redirect.url, { redirect: "manual" });
  await moved.text();
  check("redirect status", moved.status, 302);
  check("redirect headers", pick(moved, ["location", "ratelimit"]), [
    "http://127.0.0.1/next",
    '"default";r=1;t=1',
  ]);

  // 6. The connect-style middleware on the runtime's node:http compatibility layer.
  now = 0;
  const nodeLimiter = recording();
  const limit = rateLimit({ limiter: nodeLimiter });
  const nodeServer = createServer((req, res) => limit(req, res, () => res.end("ok")));
  await new Promise((resolve) => nodeServer.listen(0, "127.0.0.1", resolve));
  servers.push({ stop: () => new Promise((resolve) => nodeServer.close(resolve)) });
  const nodeUrl = `http://127.0.0.1:${nodeServer.address().port}`;
  const seen = [];
  for (let i = 0; i < 3; i++) {
    const response = await fetch(nodeUrl, { headers: { connection: "close" } });
    await response.text();
    seen.push([
      response.status,
      response.headers.get("ratelimit"),
      response.headers.get("retry-after"),
    ]);
  }
  check("node:http middleware", seen, [
    [200, '"default";r=1;t=1', null],
    [200, '"default";r=0;t=2', null],
    [429, '"default";r=0;t=1', "1"],
  ]);
  check("node:http peer address", [...new Set(nodeLimiter.keys)], ["127.0.0.1"]);

  // 7. An async limiter plus an onLimited that throws: 500, not an unhandled rejection.
  const throwing = rateLimit({
    limiter: {
      consume: async () => ({
        allowed: false,
        limit: 1,
        remaining: 0,
        retryAfterMs: 1000,
        resetAfterMs: 1000,
      }),
    },
    onLimited: () => {
      throw new Error("onLimited bug");
    },
    onError: quiet,
  });
  const throwingServer = createServer((req, res) => throwing(req, res, () => res.end("ok")));
  await new Promise((resolve) => throwingServer.listen(0, "127.0.0.1", resolve));
  servers.push({ stop: () => new Promise((resolve) => throwingServer.close(resolve)) });
  const broken = await fetch(`http://127.0.0.1:${throwingServer.address().port}`, {
    headers: { connection: "close" },
  });
  await broken.text();
  check("node:http onLimited throws after an async limiter", broken.status, 500);
} finally {
  for (const server of servers) await server.stop();
}
console.log(`http-runtimes (${runtime}): ${checks} checks passed`);
