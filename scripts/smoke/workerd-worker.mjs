// A Worker and a Durable Object that import the built package and decide with
// KeyedLimiter under workerd (run by scripts/smoke/workerd.mjs through Miniflare). Each
// answers the decisions of one fixed script as JSON; the runner checks them.

import { withRateLimit } from "../../dist/http.js";
import { KeyedLimiter, TokenBucket } from "../../dist/index.js";

// Built in the global scope with default options, as a Worker module usually does.
const perKey = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 0 }));

/** The decisions of one script: 4 calls of key a (3 fit), then one of b. */
function decide(limiter) {
  const out = [];
  for (let i = 0; i < 4; i++) out.push(limiter.allow("a"));
  out.push(limiter.consume("b").remaining);
  return out;
}

// Per-key plans on the fast path, full at two keys: a limited free key stays limited while
// new keys come and go.
function plans() {
  const keyed = new KeyedLimiter(
    {
      plans: {
        free: new TokenBucket({ capacity: 2, refillPerSecond: 0 }),
        pro: new TokenBucket({ capacity: 4, refillPerSecond: 0 }),
      },
      plan: (key) => (key.startsWith("pro:") ? "pro" : "free"),
    },
    { maxKeys: 2 },
  );
  const out = [keyed.allow("free:a"), keyed.allow("free:a"), keyed.allow("free:a")];
  for (let i = 0; i < 4; i++) out.push(keyed.allow(`pro:${i}`));
  out.push(keyed.allow("free:a"));
  return { plans: out, size: keyed.size };
}

// tollgate/http's fetch wrapper, keyed by a header (a Worker reads cf-connecting-ip).
const limited = withRateLimit(() => new Response("ok"), {
  limiter: new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1 / 60 })),
  key: (request) => request.headers.get("x-client") ?? "anonymous",
  policy: "smoke",
  windowSeconds: 120,
});

async function http() {
  const statuses = [];
  let retryAfter = null;
  for (let i = 0; i < 3; i++) {
    const response = await limited(
      new Request("http://localhost/", { headers: { "x-client": "c" } }),
    );
    statuses.push(response.status);
    if (response.status === 429) retryAfter = response.headers.get("retry-after");
  }
  return { statuses, retryAfter };
}

export class LimiterObject {
  constructor(state) {
    this.state = state;
    this.limiter = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 0 }));
  }
  async fetch() {
    return Response.json({ object: decide(this.limiter), size: this.limiter.size });
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/object") {
      const stub = env.LIMITER.get(env.LIMITER.idFromName("one"));
      return stub.fetch(request);
    }
    if (url.pathname === "/http") return Response.json(await http());
    if (url.pathname === "/plans") return Response.json(plans());
    return Response.json({ worker: decide(perKey), size: perKey.size });
  },
};
