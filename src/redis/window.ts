import { checkNumber, checkOptions } from "../errors.js";
import { RedisLimiter } from "./limiter.js";
import { checkRedisOptions, type RedisLimiterOptions } from "./options.js";

/** The options the three Redis window limiters share: their algorithm's, then the Redis ones. */
export interface RedisWindowOptions extends RedisLimiterOptions {
  /** Most units per window and key (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0). */
  readonly windowMs: number;
}

/**
 * The base of `RedisFixedWindow`, `RedisSlidingWindowLog` and
 * `RedisSlidingWindowCounter`: validates `limit` and `windowMs` (in that order, before
 * the common Redis options, as the in-memory windows do) and sends them to the script.
 */
export abstract class RedisWindowLimiter extends RedisLimiter {
  /** Most units per window and key. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;

  /**
   * @param where The class name, for messages.
   * @param defaultPrefix The default key prefix, `'tollgate:<algorithm>:'`.
   * @throws {TypeError} If `options` is not an object or an option has the wrong type.
   * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0, or a Redis
   *   option is out of range.
   */
  protected constructor(where: string, options: RedisWindowOptions, defaultPrefix: string) {
    const o = checkOptions<RedisWindowOptions>(where, options);
    const limit = checkNumber(where, "limit", o.limit, 0, false);
    const windowMs = checkNumber(where, "windowMs", o.windowMs, 0, false);
    super(checkRedisOptions(where, o, defaultPrefix), limit, [limit, windowMs]);
    this.limit = limit;
    this.windowMs = windowMs;
  }
}
