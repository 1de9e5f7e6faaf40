/**
 * The OpenTelemetry adapter of {@link MetricsSource}s: observable instruments on a `Meter`
 * given by the application, typed structurally, so tollgate needs no `@opentelemetry/api`.
 * @module
 */
import { CIRCUIT_STATES } from "./store-health.js";
import type { LimiterMetrics, MetricsSource } from "./with-metrics.js";

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

type Observe = (
  m: LimiterMetrics,
  emit: (value: number, attributes: MeterAttributes) => void,
) => void;

/** The instruments, named after OpenTelemetry's conventions (dots, no `_total`). */
const INSTRUMENTS: readonly {
  name: string;
  kind: "counter" | "gauge";
  unit: string;
  description: string;
  observe: Observe;
}[] = [
  {
    name: "tollgate.requests",
    kind: "counter",
    unit: "{request}",
    description: "Decisions of the limiter, by tollgate.decision (allowed or denied).",
    observe: (m, emit) => {
      emit(m.allowed, { "tollgate.decision": "allowed" });
      emit(m.denied, { "tollgate.decision": "denied" });
    },
  },
  {
    name: "tollgate.requests.near_limit",
    kind: "counter",
    unit: "{request}",
    description: "Allowed decisions that left remaining at or below the near-limit share.",
    observe: (m, emit) => emit(m.nearLimit, {}),
  },
  {
    name: "tollgate.keys",
    kind: "gauge",
    unit: "{key}",
    description: "Keys with kept state.",
    observe: (m, emit) => {
      if (m.keys !== undefined) emit(m.keys, {});
    },
  },
  {
    name: "tollgate.keys.evicted",
    kind: "counter",
    unit: "{key}",
    description: "Keys dropped, by tollgate.reason: idle (lossless) or lossy (in use).",
    observe: (m, emit) => {
      if (m.evictedIdle !== undefined) emit(m.evictedIdle, { "tollgate.reason": "idle" });
      if (m.evictedLossy !== undefined) emit(m.evictedLossy, { "tollgate.reason": "lossy" });
    },
  },
  {
    name: "tollgate.keys.refused",
    kind: "counter",
    unit: "{request}",
    description: "Requests of new keys refused because the registry was full.",
    observe: (m, emit) => {
      if (m.refused !== undefined) emit(m.refused, {});
    },
  },
  {
    name: "tollgate.store.failures",
    kind: "counter",
    unit: "{call}",
    description: "Store calls that failed.",
    observe: (m, emit) => {
      if (m.store !== undefined) emit(m.store.failures, {});
    },
  },
  {
    name: "tollgate.store.circuit.state",
    kind: "gauge",
    unit: "1",
    description: "1 for the state each store circuit is in, 0 for the others.",
    observe: (m, emit) => {
      for (const { node, state } of m.store?.circuits ?? []) {
        for (const s of CIRCUIT_STATES) {
          emit(s === state ? 1 : 0, { "tollgate.store.node": node, "tollgate.circuit.state": s });
        }
      }
    },
  },
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
  if (
    typeof meter !== "object" ||
    meter === null ||
    typeof meter.createObservableCounter !== "function" ||
    typeof meter.createObservableGauge !== "function"
  ) {
    throw new TypeError(
      "observeMetrics: meter must be an OpenTelemetry Meter (createObservableCounter, createObservableGauge)",
    );
  }
  const removers: (() => void)[] = [];
  for (const spec of INSTRUMENTS) {
    const options = { description: spec.description, unit: spec.unit };
    const instrument =
      spec.kind === "counter"
        ? meter.createObservableCounter(spec.name, options)
        : meter.createObservableGauge(spec.name, options);
    const callback = (result: ObservableResultLike) => {
      for (const source of sources) {
        const m = source.metrics();
        spec.observe(m, (value, attributes) =>
          result.observe(value, { "tollgate.limiter": m.name, ...attributes }),
        );
      }
    };
    instrument.addCallback(callback);
    removers.push(() => instrument.removeCallback(callback));
  }
  return () => {
    for (const remove of removers.splice(0)) remove();
  };
}
