export {
  FixedWindow,
  type FixedWindowOptions,
  type FixedWindowReconfigure,
} from "./algorithms/fixed-window.js";
export {
  LeakyBucket,
  type LeakyBucketOptions,
  type LeakyBucketReconfigure,
} from "./algorithms/leaky-bucket.js";
export {
  SlidingWindowCounter,
  type SlidingWindowCounterOptions,
  type SlidingWindowCounterReconfigure,
} from "./algorithms/sliding-window-counter.js";
export {
  SlidingWindowLog,
  type SlidingWindowLogOptions,
  type SlidingWindowLogReconfigure,
} from "./algorithms/sliding-window-log.js";
export type {
  LimiterSnapshot,
  RegistrySnapshot,
  SnapshotHeader,
  SnapshotNumber,
  SnapshotOptions,
} from "./algorithms/snapshot.js";
export {
  TokenBucket,
  type TokenBucketOptions,
  type TokenBucketReconfigure,
} from "./algorithms/token-bucket.js";
export { AllOf, allOf } from "./composite.js";
export {
  ConcurrencyLimiter,
  type ConcurrencyLimiterOptions,
} from "./concurrency/concurrency-limiter.js";
export {
  DEFAULT_CONCURRENCY_MAX_KEYS,
  KeyedConcurrencyLimiter,
  type KeyedConcurrencyLimiterOptions,
} from "./concurrency/keyed-concurrency-limiter.js";
export type { Permit } from "./concurrency/permit.js";
export { RateLimitError } from "./errors.js";
export {
  type Clock,
  type Decision,
  type Limiter,
  type Receipt,
  type Reservation,
  type ReserveOptions,
  systemClock,
  type WaitOptions,
} from "./limiter.js";
export {
  type DecisionAttributesOptions,
  type DecisionAttributeValue,
  decisionAttributes,
} from "./metrics/attributes.js";
export type { NearLimitKey } from "./metrics/near-limit-keys.js";
export {
  type MeterAttributes,
  type MeterLike,
  type ObservableLike,
  type ObservableResultLike,
  observeMetrics,
} from "./metrics/opentelemetry.js";
export {
  escapeLabelValue,
  type MetricsResponse,
  metricsHandler,
  metricsText,
  PROMETHEUS_CONTENT_TYPE,
} from "./metrics/prometheus.js";
export { CIRCUIT_STATES, type CircuitState, type StoreHealth } from "./metrics/store-health.js";
export {
  type KeyedDecider,
  type LimiterMetrics,
  MAX_NEAR_LIMIT_KEYS,
  MeteredKeyedLimiter,
  MeteredLimiter,
  type MetricsOptions,
  type MetricsSource,
  withMetrics,
} from "./metrics/with-metrics.js";
export {
  type CloneableLimiter,
  DEFAULT_MAX_KEYS,
  KeyedLimiter,
  type KeyedLimiterOptions,
  type KeyedLimiterStats,
} from "./registry.js";
export { type Settleable, type Settlement, settle } from "./settle.js";
