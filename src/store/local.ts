import { createHash } from "node:crypto";
import type { Clock } from "../core/limiter.js";
import { type CloneableLimiter, KeyedLimiter } from "../keyed/keyed-limiter.js";
import type { FallbackLimiter } from "./policy.js";

/** Most keys the local limiter keeps; past it the key idle soonest is evicted (its trace kept). */
export const LOCAL_MAX_KEYS = 100_000;
/** Longest key kept as it is; a longer one is kept as its prefix and a SHA-256 digest. */
export const LOCAL_MAX_KEY_LENGTH = 1024;

/**
 * The `'local'` policy's limiter: a {@link FallbackLimiter} that also follows the store
 * limiter's `refund` and `reconfigure`, so the policy judges as the store would (its blocks
 * are in the store limiter's own table).
 */
export interface LocalLimiter extends FallbackLimiter {
  /** Gives back `cost` units of `key` (`KeyedLimiter.refund`). */
  refund(key: string, cost: number): void;
  /** Changes the options of every key (`KeyedLimiter.reconfigure`; checked already). */
  reconfigure(options: object): void;
}

/** An in-memory algorithm class, as the catalog lists it (`TokenBucket`, `FixedWindow`, ...). */
export type LocalClass<O> = new (options: O & { readonly clock?: Clock }) => CloneableLimiter;

/**
 * Builds the local limiter of `Class` with `options` (and `clock`, the store limiter's
 * explicit clock, if any): a `KeyedLimiter` of at most {@link LOCAL_MAX_KEYS} keys. A key
 * longer than {@link LOCAL_MAX_KEY_LENGTH} code units is replaced by its first 900 code
 * units and the hex SHA-256 of its UTF-8, so that no key makes the local limiter throw.
 */
export function localLimiter<O extends object>(
  Class: LocalClass<O>,
  options: O,
  clock: Clock | undefined,
): LocalLimiter {
  const keyed = new KeyedLimiter(new Class(clock === undefined ? options : { ...options, clock }), {
    maxKeys: LOCAL_MAX_KEYS,
    maxKeyLength: LOCAL_MAX_KEY_LENGTH,
  });
  const fold = (key: string): string =>
    key.length <= LOCAL_MAX_KEY_LENGTH
      ? key
      : `${key.slice(0, 900)}#${createHash("sha256").update(key, "utf8").digest("hex")}`;
  return {
    consume: (key, cost) => keyed.consume(fold(key), cost),
    peek: (key, cost) => keyed.peek(fold(key), cost),
    reset: (key) => keyed.reset(fold(key)),
    refund: (key, cost) => keyed.refund(fold(key), cost),
    reconfigure: (next) => keyed.reconfigure(next),
  };
}
