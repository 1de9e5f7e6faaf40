/**
 * The Prometheus text exposition format (version 0.0.4) of {@link MetricsSource}s:
 * `metricsText` and a tiny node:http handler. No dependency. @module
 */
import { CIRCUIT_STATES } from "./store-health.js";
import type { LimiterMetrics, MetricsSource } from "./with-metrics.js";

/** The `Content-Type` of {@link metricsText}'s output. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** A label value escaped for the text format: `\` as `\\`, `"` as `\"`, a line feed as `\n`. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === "\\" ? "\\\\" : c === '"' ? '\\"' : "\\n"));
}

/** A sample value as the text format writes it: `+Inf`, `-Inf`, `NaN`, else the number. */
function sampleValue(value: number): string {
  if (Number.isFinite(value)) return String(value);
  return value > 0 ? "+Inf" : value < 0 ? "-Inf" : "NaN";
}

/** One metric family: its samples come from every source's snapshot. @internal */
export interface Family {
  readonly name: string;
  readonly type: "counter" | "gauge";
  readonly help: string;
  readonly samples: (m: LimiterMetrics) => [labels: [string, string][], value: number][];
}

const one = (value: number | undefined, labels: [string, string][] = []) =>
  value === undefined ? [] : [[labels, value] as [[string, string][], number]];

/**
 * Every family, in the order they are written. The names are the documented ones.
 * `observeMetrics` reads the samples of most of them too. @internal
 */
export const FAMILIES: readonly Family[] = [
  {
    name: "tollgate_requests_total",
    type: "counter",
    help: "Decisions of the limiter, by decision (allowed or denied).",
    samples: (m) => [
      [[["decision", "allowed"]], m.allowed],
      [[["decision", "denied"]], m.denied],
    ],
  },
  {
    name: "tollgate_near_limit_total",
    type: "counter",
    help: "Allowed decisions that left remaining at or below the near-limit share of the limit.",
    samples: (m) => one(m.nearLimit),
  },
  {
    name: "tollgate_near_limit_share",
    type: "gauge",
    help: "The share of the limit at or below which an allowed decision counts as near the limit.",
    samples: (m) => one(m.nearLimitShare),
  },
  {
    name: "tollgate_keys",
    type: "gauge",
    help: "Keys with kept state.",
    samples: (m) => one(m.keys),
  },
  {
    name: "tollgate_keys_evicted_total",
    type: "counter",
    help: "Keys dropped: idle (lossless, fresh again) or lossy (in use, at the memory bound).",
    samples: (m) => [
      ...one(m.evictedIdle, [["reason", "idle"]]),
      ...one(m.evictedLossy, [["reason", "lossy"]]),
    ],
  },
  {
    name: "tollgate_keys_refused_total",
    type: "counter",
    help: "Requests of new keys refused because the registry was full.",
    samples: (m) => one(m.refused),
  },
  {
    name: "tollgate_store_failures_total",
    type: "counter",
    help: "Store calls that failed (timeouts, connection errors, error replies).",
    samples: (m) => one(m.store?.failures),
  },
  {
    name: "tollgate_store_circuit_state",
    type: "gauge",
    help: "1 for the state each store circuit is in, 0 for the others.",
    samples: (m) =>
      (m.store?.circuits ?? []).flatMap(({ node, state }) =>
        CIRCUIT_STATES.flatMap((s) =>
          one(s === state ? 1 : 0, [
            ["node", node],
            ["state", s],
          ]),
        ),
      ),
  },
  {
    name: "tollgate_near_limit_key_hits",
    type: "gauge",
    help: "Near-limit decisions of the keys seen near their limit most often (bounded top-N; an overestimate by at most the error of its entry).",
    samples: (m) => m.nearLimitKeys.map(({ key, hits }) => [[["key", key]], hits]),
  },
];

/**
 * The metrics of `sources` in the Prometheus text exposition format 0.0.4: one `# HELP`
 * and `# TYPE` line per family, then its samples, each labelled `limiter="<name>"`; a
 * family no source has is left out. Serve it with {@link PROMETHEUS_CONTENT_TYPE}.
 * @throws {RangeError} When two sources have the same name (their series would collide).
 */
export function metricsText(sources: Iterable<MetricsSource>): string {
  const snapshots: LimiterMetrics[] = [];
  const names = new Set<string>();
  for (const source of sources) {
    const m = source.metrics();
    if (names.has(m.name)) {
      throw new RangeError(
        `metricsText: two limiters are named ${JSON.stringify(m.name)}; give each its own name`,
      );
    }
    names.add(m.name);
    snapshots.push(m);
  }
  let text = "";
  for (const family of FAMILIES) {
    let lines = "";
    for (const m of snapshots) {
      const limiter = `limiter="${escapeLabelValue(m.name)}"`;
      for (const [labels, value] of family.samples(m)) {
        const rest = labels.map(([k, v]) => `,${k}="${escapeLabelValue(v)}"`).join("");
        lines += `${family.name}{${limiter}${rest}} ${sampleValue(value)}\n`;
      }
    }
    if (lines === "") continue;
    text += `# HELP ${family.name} ${family.help}\n# TYPE ${family.name} ${family.type}\n${lines}`;
  }
  return text;
}

/** The part of a node `ServerResponse` {@link metricsHandler} writes to. */
export interface MetricsResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body: string): unknown;
}

/**
 * A node:http (or Express) handler answering every request with {@link metricsText} of
 * `sources` (read at each request, so wrappers added to the array later are included).
 * @example
 * http.createServer(metricsHandler([api, login])).listen(9464)
 */
export function metricsHandler(
  sources: Iterable<MetricsSource>,
): (req: unknown, res: MetricsResponse) => void {
  return (_req, res) => {
    let body: string;
    try {
      body = metricsText(sources);
    } catch (error) {
      res.statusCode = 500;
      res.setHeader("Content-Type", "text/plain; charset=utf-8");
      res.end(`${error instanceof Error ? error.message : String(error)}\n`);
      return;
    }
    res.statusCode = 200;
    res.setHeader("Content-Type", PROMETHEUS_CONTENT_TYPE);
    res.end(body);
  };
}
