import type { AlgorithmId } from "../algorithms/catalog.js";
import { RedisFixedWindow } from "./fixed-window.js";
import { RedisLeakyBucket } from "./leaky-bucket.js";
import type { RedisLimiter } from "./limiter.js";
import { RedisSlidingWindowCounter } from "./sliding-window-counter.js";
import { RedisSlidingWindowLog } from "./sliding-window-log.js";
import { RedisTokenBucket } from "./token-bucket.js";

/**
 * The Redis twin of each algorithm in the core catalog (src/algorithms/catalog.ts), keyed by its id:
 * a row missing here, or one for an id the catalog lacks, is a type error, and
 * test/redis/catalog.test.ts checks each twin against its descriptor (class name, export,
 * option names, keyspace). Internal: not exported by `tollgate/redis`, and no twin file
 * imports it, so a bundle of one twin leaves the others out.
 * @module
 */

/** A twin's constructor; its options are typed per class. */
export type RedisTwinClass = abstract new (options: never) => RedisLimiter;

/** Each core algorithm's class in `tollgate/redis`, by catalog id. */
export const REDIS_TWINS = {
  "token-bucket": RedisTokenBucket,
  "leaky-bucket": RedisLeakyBucket,
  "fixed-window": RedisFixedWindow,
  "sliding-window-log": RedisSlidingWindowLog,
  "sliding-window-counter": RedisSlidingWindowCounter,
} as const satisfies Readonly<Record<AlgorithmId, RedisTwinClass>>;
