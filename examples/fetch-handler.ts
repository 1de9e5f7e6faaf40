// tollgate/http around a fetch-style handler, the shape Bun.serve, Deno.serve, Hono's
// app.fetch and Workers share. The same file runs on all three runtimes:
//   npx bun examples/fetch-handler.ts
//   npx deno run --allow-net --allow-read --allow-env examples/fetch-handler.ts
//   npx tsx examples/fetch-handler.ts   (Node has no fetch server: the handler is called directly)
// With Hono: `Deno.serve(withRateLimit(app.fetch, { limiter }))`.
import { KeyedLimiter, TokenBucket } from "tollgate";
import { withRateLimit } from "tollgate/http";

const limiter = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0.1 }));

export const handler = withRateLimit(() => new Response("hello\n"), {
  limiter,
  policy: "demo",
  windowSeconds: 20,
});

// The runtimes' server APIs, typed just enough for this file.
type Handler = (request: Request) => Promise<Response | undefined>;
interface Served {
  readonly url: string;
  stop(): Promise<void> | void;
}
const runtime = globalThis as unknown as {
  Bun?: {
    serve(options: { port: number; hostname: string; fetch: Handler }): {
      port: number;
      stop(): void;
    };
  };
  Deno?: {
    serve(
      options: { port: number; hostname: string; onListen?: () => void },
      handler: Handler,
    ): { addr: { port: number }; shutdown(): Promise<void> };
  };
};

function serve(): Served | undefined {
  if (runtime.Bun !== undefined) {
    const server = runtime.Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler });
    return { url: `http://127.0.0.1:${server.port}/`, stop: () => server.stop() };
  }
  if (runtime.Deno !== undefined) {
    const server = runtime.Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, handler);
    return { url: `http://127.0.0.1:${server.addr.port}/`, stop: () => server.shutdown() };
  }
  return undefined; // Node: no built-in fetch server
}

const server = serve();
console.log(server === undefined ? "Node: calling the handler directly" : `serving ${server.url}`);
for (let i = 1; i <= 3; i++) {
  const response = server
    ? await fetch(server.url)
    : ((await handler(new Request("http://localhost/"))) as Response);
  console.log(`GET / -> ${response.status}`);
  response.headers.forEach((value, name) => {
    if (/^(ratelimit|x-ratelimit|retry-after|content-type)/.test(name))
      console.log(`${name}: ${value}`);
  });
  console.log(`${(await response.text()).trim()}\n`);
}
await server?.stop();
