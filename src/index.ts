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
  KeySnapshot,
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
export { type AllOf, allOf } from "./composite/all-of.js";
export {
  ConcurrencyLimiter,
  type ConcurrencyLimiterOptions,
} from "./concurrency/concurrency-limiter.js";
export {
  KeyedConcurrencyLimiter,
  type KeyedConcurrencyLimiterOptions,
} from "./concurrency/keyed-concurrency-limiter.js";
export type { Permit } from "./concurrency/permit.js";
export { type CoarseClock, type CoarseClockOptions, coarseClock } from "./core/coarse-clock.js";
export { RateLimitError } from "./core/errors.js";
export type {
  Clock,
  Decision,
  Limiter,
  Receipt,
  Reservation,
  ReserveOptions,
  WaitOptions,
} from "./core/limiter.js";
export { type Settleable, type Settlement, settle } from "./core/settle.js";
export {
  type CloneableLimiter,
  KeyedLimiter,
  type KeyedLimiterOptions,
  type KeyedLimiterStats,
  type KeyedPlans,
} from "./keyed/keyed-limiter.js";
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
export { type MetricsResponse, metricsHandler, metricsText } from "./metrics/prometheus.js";
export type { CircuitState, StoreHealth } from "./metrics/store-health.js";
export {
  type KeyedDecider,
  type LimiterMetrics,
  type MeteredKeyedLimiter,
  type MeteredLimiter,
  type MetricsOptions,
  type MetricsSource,
  withMetrics,
} from "./metrics/with-metrics.js";
