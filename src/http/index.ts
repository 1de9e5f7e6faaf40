/**
 * `tollgate/http`: 429 responses, `Retry-After` and the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers-10) for node:http, Express, fetch handlers (Bun,
 * Deno, Workers), Fastify, Hono and Koa. No runtime dependencies (not even on the
 * frameworks); loads nothing unless imported.
 */
export {
  ABORTED_STATUS,
  type AfterResponseOptions,
  type RequestCharges,
} from "./after-response.js";
export {
  type ClientKeyConfig,
  MALFORMED_FORWARDED_KEY,
  MAX_TRUSTED_HOPS,
  OVERSIZED_KEY,
  type ProxyHeader,
  type TrustProxy,
  UNKNOWN_CLIENT_KEY,
} from "./client-key.js";
export {
  CONCURRENT_REQUESTS,
  type CommonConcurrencyOptions,
  DEFAULT_MAX_HOLD_MS,
} from "./concurrency.js";
export {
  type FastifyConcurrencyOptions,
  type FastifyConcurrencyReplyLike,
  type FastifyConcurrencyRequestLike,
  fastifyConcurrencyLimit,
} from "./concurrency-fastify.js";
export { type FetchConcurrencyOptions, withConcurrencyLimit } from "./concurrency-fetch.js";
export { type KoaConcurrencyOptions, koaConcurrencyLimit } from "./concurrency-koa.js";
export { type ConcurrencyLimitOptions, concurrencyLimit } from "./concurrency-node.js";
export type {
  CommonRateLimitOptions,
  FailureInfo,
  FailureKind,
  FailureMode,
  HeaderMode,
  HttpFailureOutcome,
  KeyedConsumer,
} from "./core.js";
export {
  type FastifyInstanceLike,
  type FastifyRateLimitOptions,
  type FastifyReplyLike,
  type FastifyRequestLike,
  type FastifyRouteRateLimit,
  fastifyRateLimit,
  fastifyRateLimitCharges,
} from "./fastify.js";
export { type FetchHandler, type FetchRateLimitOptions, withRateLimit } from "./fetch.js";
export {
  ceilSeconds,
  MAX_SF_INTEGER,
  QUOTA_EXCEEDED_TYPE,
  quotaExceededProblem,
  type RateLimitHeadersOptions,
  rateLimitHeaders,
  refusalStatus,
  retryAfterSeconds,
  windowSecondsOf,
} from "./headers.js";
export { type HonoContextLike, type HonoRateLimitOptions, honoRateLimit } from "./hono.js";
export { DEFAULT_IPV6_PREFIX, ipKey } from "./ip.js";
export { type KoaContextLike, type KoaRateLimitOptions, koaRateLimit } from "./koa.js";
export {
  type NextFunction,
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from "./node.js";
