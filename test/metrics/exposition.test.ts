// The Prometheus text format, checked two ways: parsed by parse-prometheus-text-format, and
// line by line against the format's rules (HELP/TYPE once per family before its samples,
// counters named *_total, label values escaped); and the OpenTelemetry adapter, read by the
// real SDK (@opentelemetry/sdk-metrics) through an in-memory exporter.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { describe, expect, it } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { observeMetrics } from "../../src/metrics/opentelemetry.js";
import {
  escapeLabelValue,
  metricsHandler,
  metricsText,
  PROMETHEUS_CONTENT_TYPE,
} from "../../src/metrics/prometheus.js";
import { withMetrics } from "../../src/metrics/with-metrics.js";

/** Two metered limiters with traffic: a keyed one with hostile keys, a store-backed one. */
function sources() {
  const keyed = new KeyedLimiter(
    new TokenBucket({ capacity: 2, refillPerSecond: 0, clock: () => 0 }),
  );
  const api = withMetrics(keyed, { name: 'api "v1"\\', nearLimitKeys: 2, nearLimitShare: 0.5 });
  for (const key of ['a"b', "c\\d", "e\nf", 'a"b']) api.consume(key);
  const health = {
    failures: 4,
    circuits: [
      { node: "10.0.0.1:6379", state: "open" as const },
      { node: "10.0.0.2:6379", state: "closed" as const },
    ],
  };
  const decision = { allowed: false, limit: 5, remaining: 0, retryAfterMs: 10, resetAfterMs: 10 };
  const redis = withMetrics({ consume: () => decision }, { name: "redis", store: () => health });
  redis.consume("x");
  return [api, redis];
}

describe("metricsText", () => {
  const text = metricsText(sources());

  it("parses with parse-prometheus-text-format into the documented families and values", () => {
    const families = parsePrometheusTextFormat(text) as {
      name: string;
      type: string;
      help: string;
      metrics: { value: string; labels?: Record<string, string> }[];
    }[];
    const byName = new Map(families.map((f) => [f.name, f]));
    expect([...byName.keys()]).toEqual([
      "tollgate_requests_total",
      "tollgate_near_limit_total",
      "tollgate_near_limit_share",
      "tollgate_keys",
      "tollgate_keys_evicted_total",
      "tollgate_keys_refused_total",
      "tollgate_store_failures_total",
      "tollgate_store_circuit_state",
      "tollgate_near_limit_key_hits",
    ]);
    expect(byName.get("tollgate_requests_total")!.type).toBe("COUNTER");
    expect(byName.get("tollgate_requests_total")!.metrics).toEqual([
      { value: "4", labels: { limiter: 'api "v1"\\', decision: "allowed" } },
      { value: "0", labels: { limiter: 'api "v1"\\', decision: "denied" } },
      { value: "0", labels: { limiter: "redis", decision: "allowed" } },
      { value: "1", labels: { limiter: "redis", decision: "denied" } },
    ]);
    const circuit = byName.get("tollgate_store_circuit_state")!.metrics;
    expect(circuit.filter((m) => m.value === "1").map((m) => m.labels)).toEqual([
      { limiter: "redis", node: "10.0.0.1:6379", state: "open" },
      { limiter: "redis", node: "10.0.0.2:6379", state: "closed" },
    ]);
    const keys = byName.get("tollgate_near_limit_key_hits")!.metrics.map((m) => m.labels!["key"]);
    expect(keys.length).toBe(2);
    expect(keys).toContain('a"b');
  });

  it("follows the format's rules line by line", () => {
    const lines = text.split("\n");
    expect(lines.at(-1)).toBe(""); // ends with a line feed
    const seen = new Set<string>();
    let family = "";
    let type = "";
    for (const line of lines.slice(0, -1)) {
      const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
      const typeLine = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$/.exec(line);
      if (help !== null) {
        expect(seen.has(help[1]!)).toBe(false); // one HELP per family
        seen.add(help[1]!);
        family = help[1]!;
        expect(help[2]).not.toMatch(/\\(?![\\n])/);
        continue;
      }
      if (typeLine !== null) {
        expect(typeLine[1]).toBe(family); // TYPE right after HELP, before any sample
        type = typeLine[2]!;
        if (type === "counter") expect(family).toMatch(/_total$/);
        continue;
      }
      // A sample: name{label="escaped",...} value
      const sample =
        /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} (\S+)$/.exec(
          line,
        );
      expect(sample, line).not.toBeNull();
      expect(sample![1]).toBe(family);
      expect(Number(sample![3])).not.toBeNaN();
    }
    expect(text).toContain('limiter="api \\"v1\\"\\\\"');
    expect(text).toContain('key="e\\nf"');
  });

  it("escapes backslash, double quote and line feed, and nothing else", () => {
    expect(escapeLabelValue('a\\b"c\nd\te')).toBe('a\\\\b\\"c\\nd\te');
  });

  it("refuses two limiters of one name (their series would collide)", () => {
    const a = withMetrics(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    const b = withMetrics(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    expect(() => metricsText([a, b])).toThrow(/two limiters are named "default"/);
  });

  it("metricsHandler serves it over node:http with the exposition content type", async () => {
    const list = sources();
    const server = createServer(metricsHandler(list));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const response = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe(PROMETHEUS_CONTENT_TYPE);
      expect(await response.text()).toBe(metricsText(list));
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("observeMetrics with the OpenTelemetry SDK", () => {
  it("exports the counters and gauges, each with tollgate.limiter", async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
    const provider = new MeterProvider({ readers: [reader] });
    const stop = observeMetrics(provider.getMeter("test"), sources());
    await reader.forceFlush();
    const metrics = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const byName = new Map(metrics.map((m) => [m.descriptor.name, m]));
    const requests = byName.get("tollgate.requests")!;
    expect(requests.descriptor.unit).toBe("{request}");
    const points = requests.dataPoints.map((p) => [
      p.attributes["tollgate.limiter"],
      p.attributes["tollgate.decision"],
      p.value,
    ]);
    expect(points).toEqual(
      expect.arrayContaining([
        ['api "v1"\\', "allowed", 4],
        ["redis", "denied", 1],
      ]),
    );
    const circuit = byName.get("tollgate.store.circuit.state")!;
    expect(
      circuit.dataPoints
        .filter((p) => p.value === 1)
        .map((p) => p.attributes["tollgate.circuit.state"]),
    ).toEqual(["open", "closed"]);
    expect(byName.get("tollgate.keys")!.dataPoints.map((p) => p.value)).toEqual([3]);
    stop();
    await provider.shutdown();
  });

  it("refuses something that is not a Meter", () => {
    expect(() => observeMetrics({} as never, [])).toThrow(/meter must be an OpenTelemetry Meter/);
  });
});
