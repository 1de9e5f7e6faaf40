import { checkWindowClock, checkWindowSize, windowClockBoundMs } from "../algorithms/time.js";
import { checkOptionNames, checkOptions, mustBe } from "../core/errors.js";
import type { Clock } from "../core/limiter.js";
import { optionNames, windowHints, windowRequired } from "../core/option-names.js";
import { checkReconfigureOptions } from "../core/reconfigure.js";
import type { LocalClass } from "../store/local.js";
import { type LocalTwin, RedisLimiter } from "./limiter.js";
import {
  checkRedisOptions,
  REDIS_HINTS,
  REDIS_OPTIONS,
  type RedisLimiterOptions,
} from "./options.js";
import type { Script } from "./script.js";

/** The options the three Redis window limiters share: their algorithm's, then the Redis ones. */
export interface RedisWindowOptions extends RedisLimiterOptions {
  /** Most units per window and key (> 0, fractions allowed). */
  readonly limit: number;
  /**
   * Window length in milliseconds (> 0; at least 0.001, one microsecond, on Redis's
   * clock, which counts whole microseconds).
   */
  readonly windowMs: number;
}

/** The options `reconfigure` may change; `OPTIONS`, every one the constructor takes. */
const TUNABLE = ["limit", "windowMs"] as const;
const OPTIONS = optionNames<RedisWindowOptions>()([...TUNABLE, ...REDIS_OPTIONS]);

/**
 * The shortest window on Redis's clock: `TIME` counts whole microseconds, so a shorter
 * window would hold at most one reading. It also keeps the server's epoch time far inside
 * the float bound of the window arithmetic (`2^43` ms, the year 2248, for 0.001 ms).
 */
export const MIN_SERVER_WINDOW_MS = 0.001;

/**
 * The base of `RedisFixedWindow`, `RedisSlidingWindowLog` and
 * `RedisSlidingWindowCounter`: validates `limit` and `windowMs` (in that order, before
 * the common Redis options, as the in-memory windows do) and sends them to the script.
 *
 * Time, as in memory, must be fine enough for the window: on Redis's clock `windowMs`
 * must be at least {@link MIN_SERVER_WINDOW_MS}; an explicit `clock` may read anything
 * at which `windowMs` is at least the float step, and each reading is checked here,
 * before anything is sent (the same check and message as `FixedWindow`).
 */
export abstract class RedisWindowLimiter extends RedisLimiter {
  /** Most units per window and key. */
  readonly limit!: number;
  /** Window length in milliseconds. */
  readonly windowMs!: number;

  /**
   * @internal `algorithm` names the default prefix and the keyspace fingerprint; `Local` is the
   * in-memory class of the same algorithm, for `'local'`.
   * @throws {TypeError} If `options` is not an object or an option has the wrong type.
   * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0, `windowMs` is below
   *   0.001 without a `clock`, or a Redis option is out of range.
   */
  protected constructor(
    where: string,
    options: RedisWindowOptions,
    algorithm: string,
    Local: LocalClass<{ limit: number; windowMs: number }>,
    scripts: readonly [Script, Script, Script],
  ) {
    const required = windowRequired(where);
    const o = checkOptions<RedisWindowOptions>(where, options, required);
    const hints = { ...windowHints(where), ...REDIS_HINTS };
    checkOptionNames(where, o, OPTIONS, hints, required);
    const { limit, windowMs } = checkWindowSize(where, o);
    checkServerWindow(where, o.clock, windowMs);
    const common = checkRedisOptions(where, o, algorithm, { limit, windowMs });
    const length = { windowMs };
    const clock = common.clock && checkedWindowClock(where, common.clock, length);
    super({ ...common, clock }, where, scripts);
    this.length = length;
    this.tune(limit, windowMs, Local);
  }

  /** @internal The window length the explicit clock's check reads. */
  private readonly length: { windowMs: number };

  /** @internal Takes checked numbers, for the constructor and {@link reconfigure}. */
  private tune(limit: number, windowMs: number, Class: LocalTwin["Class"]): void {
    this.retune(limit, [limit, windowMs], { Class, options: { limit, windowMs } });
    this.length.windowMs = windowMs;
    Object.assign(this, { limit, windowMs });
  }

  /**
   * Changes `limit` and/or `windowMs` live, from the next call, for every key: the keyspace
   * stays, so each key's stored state is judged by the new numbers, and a state counted with
   * another `windowMs` is carried over at its next call (docs/redis.md#changing-limits-live).
   * The `'local'` policy's limiter follows. Checked first, with the constructor's messages;
   * a throw changes nothing.
   * @throws {TypeError} For an unknown option (the Redis options and `clock` cannot change).
   * @throws {RangeError} As the constructor, for an option out of range.
   */
  reconfigure(options: Partial<Pick<RedisWindowOptions, "limit" | "windowMs">>): void {
    const hints = windowHints(this.where);
    const o = checkReconfigureOptions<RedisWindowOptions>(this.where, options, TUNABLE, hints);
    const { limit, windowMs } = checkWindowSize(this.where, {
      limit: o.limit === undefined ? this.limit : o.limit,
      windowMs: o.windowMs === undefined ? this.windowMs : o.windowMs,
    });
    checkServerWindow(this.where, this.clock, windowMs);
    this.tune(limit, windowMs, this.local.Class);
  }
}

/** Without an explicit clock, a window shorter than {@link MIN_SERVER_WINDOW_MS} throws. */
function checkServerWindow(where: string, clock: unknown, windowMs: number): void {
  if (clock === undefined && windowMs < MIN_SERVER_WINDOW_MS) {
    const range = `a finite number >= ${MIN_SERVER_WINDOW_MS} on Redis's clock (TIME counts whole microseconds; pass a clock for shorter windows)`;
    throw mustBe(where, "windowMs", range, windowMs);
  }
}

/**
 * Wraps an explicit clock so that a reading (held at its high-water mark, as the limiter
 * holds it) where `windowMs` is below the float step throws the in-memory windows'
 * RangeError before the script runs; such a reading is not kept. Anything but a finite
 * number passes through, for the limiter's own clock check and message.
 */
function checkedWindowClock(
  where: string,
  clock: Clock,
  length: { readonly windowMs: number },
): Clock {
  let seenMs = Number.NEGATIVE_INFINITY;
  return () => {
    const t = clock();
    if (typeof t !== "number" || t - t !== 0) return t;
    const windowMs = length.windowMs;
    const boundMs = windowClockBoundMs(windowMs);
    seenMs = checkWindowClock(where, t > seenMs ? t : seenMs, windowMs, boundMs);
    return t;
  };
}
