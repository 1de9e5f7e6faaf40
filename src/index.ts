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
  type Reservation,
  type ReserveOptions,
  systemClock,
  type WaitOptions,
} from "./limiter.js";
export {
  type CloneableLimiter,
  DEFAULT_MAX_KEYS,
  KeyedLimiter,
  type KeyedLimiterOptions,
  type KeyedLimiterStats,
} from "./registry.js";
