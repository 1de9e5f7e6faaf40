/**
 * `tollgate/http`: 429 responses, `Retry-After` and the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers-10) for node:http, Express, fetch handlers (Bun,
 * Deno, Workers), Fastify, Hono and Koa. No runtime dependencies (not even on the
 * frameworks); loads nothing unless imported.
 */
export type { AfterResponseOptions, RequestCharges } from "./after-response.js";
export {
  type ClientKeyConfig,
  MALFORMED_FORWARDED_KEY,
  OVERSIZED_KEY,
  type ProxyHeader,
  type TrustProxy,
  UNKNOWN_CLIENT_KEY,
} from "./client-key.js";
export type { CommonConcurrencyOptions } from "./concurrency.js";
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
export { type RateLimitHeadersOptions, rateLimitHeaders, refusalStatus } from "./headers.js";
export { type HonoContextLike, type HonoRateLimitOptions, honoRateLimit } from "./hono.js";
export { type KoaContextLike, type KoaRateLimitOptions, koaRateLimit } from "./koa.js";
export {
  type NextFunction,
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from "./node.js";
