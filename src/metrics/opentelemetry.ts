/**
 * The OpenTelemetry adapter of {@link MetricsSource}s: observable instruments on a `Meter`
 * given by the application, typed structurally, so tollgate needs no `@opentelemetry/api`. @module
 */
import { hasMethods } from "../core/errors.js";
import { FAMILIES } from "./prometheus.js";
import type { MetricsSource } from "./with-metrics.js";

/** Attributes of one observation. */
export type MeterAttributes = Record<string, string>;

/** What an observable callback is handed: `observe(value, attributes)`. */
export interface ObservableResultLike {
  observe(value: number, attributes?: MeterAttributes): void;
}

/** An observable instrument of `@opentelemetry/api`, structurally. */
export interface ObservableLike {
  addCallback(callback: (result: ObservableResultLike) => void): void;
  removeCallback(callback: (result: ObservableResultLike) => void): void;
}

/** The part of an OpenTelemetry `Meter` that {@link observeMetrics} uses. */
export interface MeterLike {
  createObservableCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): ObservableLike;
  createObservableGauge(
    name: string,
    options?: { description?: string; unit?: string },
  ): ObservableLike;
}

/** OpenTelemetry's names of the Prometheus families' labels. */
const ATTRIBUTES: Readonly<Record<string, string>> = {
  decision: "tollgate.decision",
  reason: "tollgate.reason",
  node: "tollgate.store.node",
  state: "tollgate.circuit.state",
};

/**
 * The instruments, named after OpenTelemetry's conventions (dots, no `_total`): each
 * observes the samples of a Prometheus family (its kind the family's type), its labels
 * renamed by {@link ATTRIBUTES}; its description is the family's help unless given.
 */
const INSTRUMENTS: readonly {
  family: string;
  name: string;
  unit: string;
  description?: string;
}[] = [
  {
    family: "tollgate_requests_total",
    name: "tollgate.requests",
    unit: "{request}",
    description: "Decisions of the limiter, by tollgate.decision (allowed or denied).",
  },
  {
    family: "tollgate_near_limit_total",
    name: "tollgate.requests.near_limit",
    unit: "{request}",
    description: "Allowed decisions that left remaining at or below the near-limit share.",
  },
  { family: "tollgate_keys", name: "tollgate.keys", unit: "{key}" },
  {
    family: "tollgate_keys_evicted_total",
    name: "tollgate.keys.evicted",
    unit: "{key}",
    description: "Keys dropped, by tollgate.reason: idle (lossless) or lossy (in use).",
  },
  { family: "tollgate_keys_refused_total", name: "tollgate.keys.refused", unit: "{request}" },
  {
    family: "tollgate_store_failures_total",
    name: "tollgate.store.failures",
    unit: "{call}",
    description: "Store calls that failed.",
  },
  { family: "tollgate_store_circuit_state", name: "tollgate.store.circuit.state", unit: "1" },
];

/**
 * Registers observable instruments on `meter` (an OpenTelemetry `Meter`, or anything with
 * its `createObservableCounter`/`createObservableGauge`) that read `sources` at each
 * collection, every observation carrying `tollgate.limiter`. Nothing runs on the request
 * path. Returns a function that removes the callbacks.
 * @example
 * const stop = observeMetrics(metrics.getMeter("my-app"), [api]);
 */
export function observeMetrics(meter: MeterLike, sources: Iterable<MetricsSource>): () => void {
  if (!hasMethods(meter, "createObservableCounter", "createObservableGauge")) {
    throw new TypeError(
      "observeMetrics: meter must be an OpenTelemetry Meter (createObservableCounter, createObservableGauge)",
    );
  }
  const removers: (() => void)[] = [];
  for (const spec of INSTRUMENTS) {
    const family = FAMILIES.find((f) => f.name === spec.family)!;
    const options = { description: spec.description ?? family.help, unit: spec.unit };
    const instrument =
      family.type === "counter"
        ? meter.createObservableCounter(spec.name, options)
        : meter.createObservableGauge(spec.name, options);
    const callback = (result: ObservableResultLike) => {
      for (const source of sources) {
        const m = source.metrics();
        for (const [labels, value] of family.samples(m)) {
          const attributes: MeterAttributes = { "tollgate.limiter": m.name };
          for (const [k, v] of labels) attributes[ATTRIBUTES[k]!] = v;
          result.observe(value, attributes);
        }
      }
    };
    instrument.addCallback(callback);
    removers.push(() => instrument.removeCallback(callback));
  }
  return () => {
    for (const remove of removers.splice(0)) remove();
  };
}
