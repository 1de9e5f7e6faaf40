/**
 * The buckets of the HTTP section's allowed rows, shared by the in-process servers
 * (bench/http.bench.ts) and the Redis-limited ones (bench/support/http-redis-server.ts), so
 * the rows compared send headers of the same shape.
 * @module
 */

/**
 * The `memory` and `redis` rows: refilled at once, so `remaining` (`r=`) stays at the
 * capacity less one and the header text is the same on every request (and reused).
 */
export const STEADY_BUCKET = { capacity: 1e12, refillPerSecond: 1e12 } as const;

/**
 * The `memory-varying` and `leased` rows: refilled so slowly that `r=` and `t=` change with
 * every request, as a lease's do, so the header text is built anew each time in both.
 */
export const VARYING_BUCKET = { capacity: 1e12, refillPerSecond: 1e-3 } as const;
