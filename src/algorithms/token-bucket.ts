import { checkClock, checkCost, checkNumber, checkOptionNames, checkOptions } from "../errors.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  type Reservation,
  type ReserveOptions,
  systemClock,
  type WaitOptions,
} from "../limiter.js";
import { fits } from "../numeric.js";
import { bucketHints, optionNames } from "../option-names.js";
import { BucketBase, defineBucketPart } from "./bucket-base.js";

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

/** Whether allOf's driver for this class is registered (by the first constructor). */
let timedPartDefined = false;
/** The option names of {@link TokenBucketOptions}, checked by the constructor. */
const OPTIONS = optionNames<TokenBucketOptions>()(["capacity", "refillPerSecond", "clock"]);
const HINTS = /* @__PURE__ */ bucketHints(WHERE, "refillPerSecond", "leakPerSecond");

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
 * A cost fits within a float tolerance (`cost <= tokens + 1e-9 * max(1, cost)`); what it
 * takes beyond the tokens stays owed (tokens a hair below 0, `remaining` 0) until the
 * refill repays it, so the tolerance is granted once, not on every request.
 *
 * Waiting (`wait`, `reserve`) works as Go's `rate.Limiter`: a request that does not fit
 * takes its tokens at once and the bucket goes into debt (tokens below 0); it may act
 * when the debt up to and including it is repaid, so waiters are served first-in,
 * first-out and a large cost is never starved. While anyone holds debt, plain
 * `allow`/`consume` are denied and their `retryAfterMs` counts the debt.
 *
 * @throws {TypeError} If `options` is not an object or names an unknown option (the
 *   message names it and, for a typo or another library's name, what to use instead),
 *   `capacity` or `refillPerSecond` is not a number, or `clock` is not a function.
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `refillPerSecond`
 *   is not a finite number >= 0.
 * @example
 * const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 5 })
 * bucket.consume().allowed //=> true
 */
export class TokenBucket extends BucketBase implements Limiter {
  /** Most tokens the bucket holds. */
  override readonly capacity: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;
  /** The time source, in milliseconds. */
  override readonly clock: Clock;

  constructor(options: TokenBucketOptions) {
    const o = checkOptions<TokenBucketOptions>(WHERE, options);
    checkOptionNames(WHERE, o, OPTIONS, HINTS);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    const clock = checkClock(WHERE, o.clock, systemClock);
    super();
    this.capacity = capacity;
    this.refillPerSecond = refillPerSecond;
    this.clock = clock;
    this.units = capacity;
    // allOf reads, checks and charges an exact TokenBucket at one clock reading; registered
    // by the first constructor, not a static block, so that an unused class can be dropped.
    if (!timedPartDefined) {
      timedPartDefined = true;
      defineBucketPart(TokenBucket.prototype);
    }
  }

  protected override get where(): string {
    return WHERE;
  }

  protected override get ratePerSecond(): number {
    return this.refillPerSecond;
  }

  /** Not shaping: a request that does not fit goes into debt (Go's `rate.Limiter`). */
  protected override get shaping(): boolean {
    return false;
  }

  /**
   * A new, full bucket with the same options (clock included), of the same class: a
   * subclass is cloned as itself (`new this.constructor(options)`), so its overrides apply
   * to every key of a `KeyedLimiter`. A subclass whose constructor takes other arguments
   * must override `clone()`.
   */
  clone(): TokenBucket {
    const Class = this.constructor as new (options: TokenBucketOptions) => TokenBucket;
    return new Class({
      capacity: this.capacity,
      refillPerSecond: this.refillPerSecond,
      clock: this.clock,
    });
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    const tokens = this.unitsAt(now);
    if (!fits(c, tokens)) return c === 0; // a free probe is allowed even in debt
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

  /**
   * Refills the bucket: back to the fresh, full state, except that pending reservations
   * and waiters keep their tokens and their place (the full bucket pays their debt first,
   * so they are served sooner).
   */
  reset(): void {
    this.resetUnits();
  }

  /** True when the bucket is full and nothing is pending: a new bucket would decide the same. */
  isIdle(): boolean {
    return this.idle();
  }

  /**
   * Resolves with the granting decision once `cost` tokens are taken, first-in, first-out
   * behind earlier waiters and reservations.
   *
   * A cost that fits now (and nobody pending) resolves at once. Otherwise the tokens are
   * taken now, into debt, and the promise resolves when the debt up to and including this
   * request is repaid: `(cost - tokens) * 1000 / refillPerSecond` ms, sooner if a waiter
   * ahead aborts. One timer per bucket, for the first waiter, ref'd (a pending wait keeps
   * the process alive, like a pending `setTimeout`), in pieces of at most 2^31 - 1 ms.
   *
   * Rejects (never throws): `TypeError`/`RangeError` for a bad cost or option; `RangeError`
   * `TokenBucket.wait: cost 12 exceeds capacity 10` when the cost can never fit;
   * `RateLimitError` when the wait would exceed `maxWaitMs` or never end (a rate of 0),
   * taking nothing; `signal.reason` when the signal is (or gets) aborted, giving the tokens
   * back (those that reservations made after it count on stay taken, see
   * {@link TokenBucket.reserve}) so the waiters behind move up at once.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return this.waitUnits(cost, options);
  }

  /**
   * Reserves `cost` tokens now, Go-style (`rate.Limiter.ReserveN`): the tokens are taken at
   * once, into debt if needed, and `delayMs` says how long to wait before acting (0 when
   * they were there). Later reservations queue behind this one.
   *
   * `ok` is false, and nothing is taken, when the cost is above `capacity`, the delay would
   * exceed `maxWaitMs`, or the rate is 0 and the tokens are not there.
   *
   * `cancel()` before the time to act gives back the reserved tokens except those that
   * reservations made after it already count on: `cost - (tokens held by later
   * reservations)`, at least 0, returns at once; the rest is given back when those later
   * reservations are cancelled in turn (or is spent when they are served). Tokens it kept
   * for reservations cancelled before it stay kept while a later reservation is pending,
   * and what refilled beyond capacity meanwhile is not given back. So cancelling
   * every reservation, last first or first first, restores the balance exactly (integer
   * arithmetic on tokens: no rounding through milliseconds, unlike Go). A reservation with
   * `delayMs` 0 may be used at once, so its `cancel()` does nothing; nor does cancelling
   * after the time to act, or twice.
   *
   * @throws {TypeError} If `cost` or `maxWaitMs` is not a number, or options not an object.
   * @throws {RangeError} If `cost` is NaN, negative or infinite, or `maxWaitMs` below 0.
   * @example
   * const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 10 })
   * bucket.reserve().delayMs //=> 0
   * const r = bucket.reserve() // in debt: acts 100 ms from now
   * r.delayMs //=> 100
   * r.cancel() // the token is back
   */
  reserve(cost?: number, options?: ReserveOptions): Reservation {
    return this.reserveUnits(cost, options);
  }
}
