import { badClock, checkClock, checkCost, checkNumber, checkOptions } from "../errors.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  systemClock,
  type WaitOptions,
} from "../limiter.js";
import { fits } from "../numeric.js";
import { WaitQueue } from "../wait.js";
import { bucketDecision, tokensAfter, tokensAt } from "./bucket-math.js";

/** Options of {@link TokenBucket}. */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds, and so the largest burst (> 0, fractions allowed). */
  readonly capacity: number;
  /** Tokens added per second, continuously (>= 0; 0 never refills: a fixed quota). */
  readonly refillPerSecond: number;
  /**
   * Time source in milliseconds.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

const WHERE = "TokenBucket";

/**
 * A token bucket holding up to `capacity` tokens, initially full, refilled
 * continuously at `refillPerSecond` tokens per second; each allowed request takes
 * `cost` tokens. The definition of RFC 2697 (single-rate token bucket, "committed
 * burst size" = capacity, "committed information rate" = refillPerSecond), with a
 * continuous instead of a per-tick refill, as Go's `golang.org/x/time/rate`.
 *
 * Good for: APIs that allow short bursts up to `capacity` while holding a long-run
 * average of `refillPerSecond`. Watch out: a full bucket admits `capacity` requests
 * at once; use a `LeakyBucket` with `wait` for a smooth outflow.
 *
 * The refill is lazy and O(1): the bucket stores the tokens at an anchor time and
 * computes `min(capacity, tokens + elapsedMs * refillPerSecond / 1000)` when asked;
 * no timers run and only allowed requests move the anchor, so no error accumulates
 * from checks. A denied request changes nothing. A clock that goes backwards adds
 * nothing (the bucket treats time as standing still at the latest reading). A
 * `refillPerSecond` of 0 is a fixed quota: once spent, `retryAfterMs` is `Infinity`.
 *
 * @throws {TypeError} If `options` is not an object, `capacity` or `refillPerSecond`
 *   is not a number, or `clock` is not a function.
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `refillPerSecond`
 *   is not a finite number >= 0.
 * @example
 * const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 5 })
 * bucket.consume().allowed //=> true
 */
export class TokenBucket implements Limiter {
  /** Most tokens the bucket holds. */
  readonly capacity: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;

  /** Tokens at `anchorMs`; negative while reservations hold units in debt. */
  private tokens: number;
  /** Time (ms) at which `tokens` was exact. Never moves back. */
  private anchorMs: number;
  /** Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  private queue: WaitQueue | undefined;

  constructor(options: TokenBucketOptions) {
    const o = checkOptions<TokenBucketOptions>(WHERE, options);
    this.capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    this.refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.tokens = this.capacity;
    this.anchorMs = Number.NEGATIVE_INFINITY;
  }

  /** A new, full bucket with the same options (clock included). */
  clone(): TokenBucket {
    return new TokenBucket({
      capacity: this.capacity,
      refillPerSecond: this.refillPerSecond,
      clock: this.clock,
    });
  }

  /** Reads the clock; a reading behind the latest one counts as the latest one. */
  private now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock(WHERE, t);
    if (t > this.seenMs) this.seenMs = t;
    return this.seenMs;
  }

  /** Tokens available at `now` (>= anchor), without storing them. */
  private tokensAt(now: number): number {
    return tokensAt(this.tokens, this.anchorMs, now, this.capacity, this.refillPerSecond);
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    const tokens = this.tokensAt(now);
    if (!fits(c, tokens)) return false;
    if (c > 0) this.take(tokens, c, now);
    return true;
  }

  /** Takes `cost` tokens when available and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true);
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false);
  }

  /** Refills the bucket: back to the fresh, full state. Pending waiters keep waiting. */
  reset(): void {
    this.tokens = this.capacity;
    this.anchorMs = Number.NEGATIVE_INFINITY;
  }

  /** True when the bucket is full and nobody waits: a new bucket would decide the same. */
  isIdle(): boolean {
    return (
      this.tokensAt(this.now()) >= this.capacity &&
      (this.queue === undefined || this.queue.size === 0)
    );
  }

  /**
   * Waits until `cost` tokens can be taken, first-in, first-out behind earlier waiters,
   * and resolves with the granting decision. See {@link Limiter.wait}.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    this.queue ??= new WaitQueue(WHERE, this);
    return this.queue.wait(cost, options);
  }

  private take(tokens: number, cost: number, now: number): void {
    this.tokens = tokensAfter(tokens, cost);
    this.anchorMs = now;
  }

  private decide(cost: number, take: boolean): Decision {
    const now = this.now();
    const tokens = this.tokensAt(now);
    const decision = bucketDecision(cost, tokens, this.capacity, this.refillPerSecond);
    if (take && decision.allowed && cost > 0) this.take(tokens, cost, now);
    return decision;
  }
}
