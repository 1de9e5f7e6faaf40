import { windowIndex } from "../algorithms/time.js";
import { checkNumber, checkOptions } from "../errors.js";
import type { Decision } from "../limiter.js";
import { cleanMs, fits, wholeUnits } from "../numeric.js";
import { RedisLimiter } from "./limiter.js";
import { SLIDING_WINDOW_COUNTER_SCRIPT } from "./lua/sliding-window-counter.js";
import { checkRedisOptions, type RedisLimiterOptions } from "./options.js";
import { checkAgreement, replyArray, replyNumber } from "./reply.js";

/**
 * Options of {@link RedisSlidingWindowCounter}: those of `SlidingWindowCounter` (no
 * `clock`) plus the Redis ones.
 */
export interface RedisSlidingWindowCounterOptions extends RedisLimiterOptions {
  /** Most units in the weighted estimate of the last `windowMs`, per key (> 0, fractions allowed). */
  readonly limit: number;
  /** Window length in milliseconds (> 0), aligned to multiples of it on Redis's clock (Unix epoch). */
  readonly windowMs: number;
}

const WHERE = "RedisSlidingWindowCounter";

/**
 * A `SlidingWindowCounter` per key, shared through Redis: a request is allowed when
 * `prev * (windowMs - e) / windowMs + curr + cost <= limit`, where `curr` counts the
 * current fixed window, `prev` the one before and `e` the time into the current one
 * (Cloudflare's sliding window approximation). Decisions are the in-memory class's for
 * the same timeline, computed atomically by one Lua script on Redis's clock.
 *
 * Good for: a smooth shared limit in O(1) memory per key (one small hash). Watch out:
 * the estimate assumes the previous window's traffic was spread evenly.
 *
 * Both windows live in one key, which expires exactly when the estimate reaches 0
 * (the end of the window after the last write), so the previous window never
 * disappears early.
 * @throws {TypeError} If `options` is not an object or an option has the wrong type.
 * @throws {RangeError} If `limit` or `windowMs` is not a finite number > 0, or a Redis
 *   option is out of range.
 * @example
 * const limiter = new RedisSlidingWindowCounter({ client: fromIoredis(redis), limit: 100, windowMs: 60_000 })
 * await limiter.consume("user:42") //=> { allowed: true, remaining: 99, … }
 */
export class RedisSlidingWindowCounter extends RedisLimiter {
  /** Most units in the estimate, per key. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
  protected readonly where = WHERE;
  protected readonly script = SLIDING_WINDOW_COUNTER_SCRIPT;
  protected readonly size: number;
  private readonly config: readonly string[];

  constructor(options: RedisSlidingWindowCounterOptions) {
    const o = checkOptions<RedisSlidingWindowCounterOptions>(WHERE, options);
    const limit = checkNumber(WHERE, "limit", o.limit, 0, false);
    const windowMs = checkNumber(WHERE, "windowMs", o.windowMs, 0, false);
    super(checkRedisOptions(WHERE, o, "tollgate:sliding-window-counter:"));
    this.limit = limit;
    this.windowMs = windowMs;
    this.size = limit;
    this.config = [String(limit), String(windowMs)];
  }

  protected configArgs(): readonly string[] {
    return this.config;
  }

  protected decode(reply: unknown, cost: number, take: boolean): Decision {
    const [allowed, index, prev, curr, now] = replyArray(reply, 5);
    const state = {
      index: replyNumber(index),
      prev: replyNumber(prev),
      curr: replyNumber(curr),
    };
    return checkAgreement(
      slidingCounterDecision(cost, take, state, replyNumber(now), this.limit, this.windowMs),
      allowed,
    );
  }
}

/** A sliding counter's state, rolled to the window holding the decision's time. */
export interface CounterState {
  /** Index of the current window. */
  readonly index: number;
  /** Units of window `index - 1`. */
  readonly prev: number;
  /** Units of window `index`, before the cost. */
  readonly curr: number;
}

/**
 * `SlidingWindowCounter`'s decision for `cost` at `nowMs` from the rolled state (as
 * `consume` answers when `take`, as `peek` otherwise). Mirrors its private
 * `decide`, `resetMs`, `retryMs` and `estimateAt`.
 */
export function slidingCounterDecision(
  cost: number,
  take: boolean,
  s: CounterState,
  nowMs: number,
  limit: number,
  windowMs: number,
): Decision {
  const w = windowMs;
  const weightAt = (t: number) => (w - (t - s.index * w)) / w;
  const estimate = s.prev === 0 ? s.curr : s.prev * weightAt(nowMs) + s.curr;
  const available = limit - estimate;
  const endsInMs = (s.index + 1) * w - nowMs;
  const resetMs = (prev: number, curr: number) =>
    curr > 0 ? endsInMs + w : prev > 0 ? endsInMs : 0;
  if (cost === 0 || fits(cost, available)) {
    const curr = take && cost > 0 ? s.curr + cost : s.curr + (take ? 0 : cost);
    return {
      allowed: true,
      limit,
      remaining: wholeUnits(available - cost, limit),
      retryAfterMs: 0,
      resetAfterMs: resetMs(s.prev, curr),
    };
  }
  let retryAfterMs = Number.POSITIVE_INFINITY;
  if (fits(cost, limit)) {
    const room = limit - cost - s.curr;
    let ms: number;
    if (room > 0 && s.prev > room) {
      ms = endsInMs - (room * w) / s.prev;
    } else {
      const roomNext = limit - cost;
      ms = s.curr > roomNext ? endsInMs + w - (roomNext * w) / s.curr : endsInMs;
    }
    const estimateAt = (t: number) => {
      const k = windowIndex(t, w);
      if (k === s.index) return s.prev * weightAt(t) + s.curr;
      if (k === s.index + 1) return (s.curr * (w - (t - k * w))) / w;
      return 0;
    };
    const snapped = cleanMs(ms);
    retryAfterMs =
      snapped !== ms && snapped > 0 && fits(cost, limit - estimateAt(nowMs + snapped))
        ? snapped
        : ms > 0
          ? ms
          : Number.MIN_VALUE;
  }
  return {
    allowed: false,
    limit,
    remaining: wholeUnits(available, limit),
    retryAfterMs,
    resetAfterMs: resetMs(s.prev, s.curr),
  };
}
