// The recipe of docs/metrics.md: count a keyed limiter's decisions, read them as a plain
// snapshot, serve them to Prometheus on node:http, and hand them to an OpenTelemetry meter.
// A manual clock makes the output the same on every run.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  KeyedLimiter,
  metricsHandler,
  metricsText,
  observeMetrics,
  TokenBucket,
  withMetrics,
} from "tollgate";

const now = 0;
const clock = () => now;

// Wrap the limiter; use the wrapper where the limiter was used (here and in tollgate/http).
const api = withMetrics(
  new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1, clock })),
  {
    name: "api",
    nearLimitShare: 0.2, // allowed with 2 or fewer of 10 left: near the limit
    nearLimitKeys: 5, // keep the 5 keys seen near their limit most often (bounded)
  },
);
for (let i = 0; i < 12; i++) api.consume("big-customer");
api.consume("small-customer");

const { allowed, denied, nearLimit, keys, nearLimitKeys } = api.metrics();
console.log({ allowed, denied, nearLimit, keys }); // { allowed: 11, denied: 2, nearLimit: 3, keys: 2 }
console.log(nearLimitKeys); // [ { key: 'big-customer', hits: 3, error: 0 } ]

// Prometheus: the text exposition, or a handler serving it.
console.log(metricsText([api]).split("\n").slice(0, 5).join("\n"));
const server = createServer(metricsHandler([api]));
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address() as AddressInfo;
const scraped = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
console.log(scraped.includes('tollgate_requests_total{limiter="api",decision="denied"} 2')); // true
server.close();

// OpenTelemetry: any Meter (metrics.getMeter("my-app") from @opentelemetry/api). This one
// prints what a collection would observe, to show the shape without a dependency.
const seen: string[] = [];
const meter = {
  createObservableCounter: (name: string) => instrument(name),
  createObservableGauge: (name: string) => instrument(name),
};
function instrument(name: string) {
  return {
    addCallback: (
      callback: (r: { observe(v: number, a?: Record<string, string>): void }) => void,
    ) => callback({ observe: (v, a) => seen.push(`${name} ${JSON.stringify(a)} ${v}`) }),
    removeCallback: () => {},
  };
}
const stop = observeMetrics(meter, [api]);
console.log(seen[0]); // tollgate.requests {"tollgate.limiter":"api","tollgate.decision":"allowed"} 11
stop();
