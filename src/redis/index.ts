/**
 * `tollgate/redis`: the five algorithms with their state in Redis (or Valkey), shared
 * by every process that uses the same server, prefix, algorithm and options (keys are
 * `<prefix><keyspace>:<key>`, the keyspace a fingerprint of the algorithm and its
 * options unless pinned), decided atomically by one Lua script per algorithm on the
 * server's clock. No runtime dependencies: bring a client
 * through {@link fromIoredis}, {@link fromNodeRedis} or your own {@link RedisLike}.
 * @module
 */

export type { CircuitSnapshot, CircuitState } from "../store/circuit.js";
export type { CircuitOptions, StoreLimiterOptions } from "../store/options.js";
export {
  fromIoredis,
  fromNodeRedis,
  type IoredisClientLike,
  type NodeRedisClientLike,
  type RedisKey,
  type RedisLike,
} from "./client.js";
export { RateLimitStoreError, StoreTimeoutError, StoreUnavailableError } from "./errors.js";
export { RedisFixedWindow, type RedisFixedWindowOptions } from "./fixed-window.js";
export { RedisLeakyBucket, type RedisLeakyBucketOptions } from "./leaky-bucket.js";
export type {
  LeaseFailureEvent,
  LeaseOperation,
  LeaseRecoveryEvent,
  LeaseTableFullEvent,
} from "./leased/events.js";
export type {
  HeartbeatAnswer,
  LeaseBlockChange,
  LeaseExchange,
  LeaseGrant,
  LeaseRequest,
  LeaseStore,
  Scheduler,
} from "./leased/exchange.js";
export {
  type LeasedDecision,
  type LeasedReceipt,
  type LeasedSource,
  LeasedTokenBucket,
  type LeasedTokenBucketStats,
} from "./leased/leased-token-bucket.js";
export {
  type LeaseRecord,
  MemoryLeaseStore,
  type MemoryLeaseStoreOptions,
} from "./leased/memory-store.js";
export type { LeasedTokenBucketOptions, LeaseFailurePolicy } from "./leased/options.js";
export type { RedisLimiter } from "./limiter.js";
export type { RedisLimiterOptions } from "./options.js";
export type {
  DecisionSource,
  FailureOutcome,
  FailurePolicy,
  FallbackLimiter,
  PolicySource,
  RedisDecision,
  RedisReceipt,
  StoreDecision,
  StoreFailureEvent,
  StoreOperation,
  StoreReceipt,
  StoreRecoveryEvent,
} from "./policy.js";
export {
  RedisSlidingWindowCounter,
  type RedisSlidingWindowCounterOptions,
} from "./sliding-window-counter.js";
export { RedisSlidingWindowLog, type RedisSlidingWindowLogOptions } from "./sliding-window-log.js";
export { RedisTokenBucket, type RedisTokenBucketOptions } from "./token-bucket.js";
