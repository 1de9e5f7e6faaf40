import {
  checkClock,
  checkCost,
  checkNumber,
  checkOptionNames,
  checkOptions,
} from "../core/errors.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  type Receipt,
  type Reservation,
  type ReserveOptions,
  systemClock,
  type WaitOptions,
} from "../core/limiter.js";
import { bucketHints, bucketRequired, optionNames } from "../core/option-names.js";
import type { ApplyReconfigure } from "../core/reconfigure.js";
import { BucketBase, checkInitial } from "./bucket-base.js";

/** Options of {@link TokenBucket}. */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds, and so the largest burst (> 0, fractions allowed). */
  readonly capacity: number;
  /** Tokens added per second, continuously (>= 0; 0 never refills: a fixed quota). */
  readonly refillPerSecond: number;
  /**
   * Tokens a new bucket holds, from 0 (it starts empty) to `capacity`. It refills from the
   * moment it is made (a `KeyedLimiter` key: its first use), and `reset()` returns to it.
   * Bucket4j's `initialTokens`; docs/semantics.md#initial-tokens.
   * @default capacity (it starts full)
   */
  readonly initialTokens?: number | undefined;
  /**
   * Time source in milliseconds.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

/**
 * Options of {@link TokenBucket.reconfigure}: any of the constructor's but the clock; an
 * option left out keeps its value.
 */
export type TokenBucketReconfigure = Partial<Omit<TokenBucketOptions, "clock">>;

const WHERE = "TokenBucket";

/** The option names of {@link TokenBucketOptions}, checked by the constructor; src/algorithms/catalog.ts lists them. */
export const TOKEN_BUCKET_OPTIONS = optionNames<TokenBucketOptions>()([
  "capacity",
  "refillPerSecond",
  "initialTokens",
  "clock",
]);
const SPEC = { where: WHERE, id: "token-bucket", options: TOKEN_BUCKET_OPTIONS };
const HINTS = /* @__PURE__ */ bucketHints(WHERE, "refillPerSecond", "leakPerSecond");
const REQUIRED = /* @__PURE__ */ bucketRequired(WHERE, "refillPerSecond");

/**
 * A token bucket: up to `capacity` tokens, initially full (or `initialTokens`), refilled
 * continuously at `refillPerSecond` tokens per second; an allowed request takes `cost` tokens. RFC 2697's
 * single-rate bucket with a continuous refill, as Go's `golang.org/x/time/rate`; lazy and
 * O(1), no timers. Formula and shared rules: docs/semantics.md#the-algorithms.
 *
 * Good for: bursts up to `capacity` around a long-run average of `refillPerSecond`. Watch
 * out: a full bucket admits `capacity` at once (for a smooth outflow, `LeakyBucket.wait`);
 * `refillPerSecond: 0` is a fixed quota. `wait`/`reserve` go into debt: docs/waiting.md.
 * @example
 * new TokenBucket({ capacity: 10, refillPerSecond: 5 }).consume().allowed //=> true
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `refillPerSecond` not >= 0.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class TokenBucket extends BucketBase implements Limiter {
  /** Most tokens the bucket holds. */
  override readonly capacity: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;
  /** Tokens a new bucket holds, and `reset()` returns to: `capacity` unless given. */
  readonly initialTokens: number;
  /** The time source, in milliseconds. */
  override readonly clock: Clock;
  /** @internal Whether `initialTokens` was given, or follows `capacity`. */
  private initialGiven: boolean;

  constructor(options: TokenBucketOptions) {
    const o = checkOptions<TokenBucketOptions>(WHERE, options, REQUIRED);
    checkOptionNames(WHERE, o, TOKEN_BUCKET_OPTIONS, HINTS, REQUIRED);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const refillPerSecond = checkNumber(WHERE, "refillPerSecond", o.refillPerSecond, 0, true);
    const initialTokens = checkInitial(WHERE, "initialTokens", o.initialTokens, capacity);
    // Not shaping: a cost that does not fit goes into debt (Go's `rate.Limiter`).
    super(SPEC, false);
    this.capacity = capacity;
    this.refillPerSecond = refillPerSecond;
    this.initialTokens = initialTokens ?? capacity;
    this.initialGiven = initialTokens !== undefined;
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.startUnits();
  }

  /** @internal */
  protected override get ratePerSecond(): number {
    return this.refillPerSecond;
  }

  /** @internal */
  protected override get initialUnits(): number {
    return this.initialTokens;
  }

  /**
   * A new bucket with the same options (clock and `initialTokens` included), of the same class: a
   * subclass is cloned as itself (`new this.constructor(options)`), so its overrides apply
   * to every key of a `KeyedLimiter`. A subclass whose constructor takes other arguments
   * must override `clone()`.
   */
  clone(): TokenBucket {
    const Class = this.constructor as new (options: TokenBucketOptions) => TokenBucket;
    return new Class({
      capacity: this.capacity,
      refillPerSecond: this.refillPerSecond,
      ...(this.initialGiven ? { initialTokens: this.initialTokens } : {}),
      clock: this.clock,
    });
  }

  /**
   * Changes `capacity` and/or `refillPerSecond` live, as Go's `SetBurst`/`SetLimit`: the tokens
   * accrued up to now at the old rate are kept, clamped to a smaller capacity (a full bucket stays
   * full), and the new rate applies from now on. Waiters are re-planned: one whose cost is now
   * above `capacity`, whose wait would never end or would now pass its `maxWaitMs` is rejected as a
   * fresh `wait` would be. Reservations keep their tokens and their time to act. `initialTokens`
   * applies from the next fresh state (a `reset()`, a new key); one given must fit the new
   * capacity. See docs/semantics.md#changing-limits-live.
   * @example
   * const bucket = new TokenBucket({ capacity: 10, refillPerSecond: 1 })
   * bucket.reconfigure({ refillPerSecond: 5 })
   * @throws {TypeError} If `options` is not an object, names an unknown option or the clock, or an
   *   option is not a number; nothing changes.
   * @throws {RangeError} As the constructor, for an option out of range; nothing changes.
   */
  reconfigure(options: TokenBucketReconfigure): void {
    this.planReconfigure(options)();
  }

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const [o, capacity, rate] = this.checkRetune(options, HINTS, "refillPerSecond");
    const given = o.initialTokens !== undefined || this.initialGiven;
    const initial = given
      ? checkInitial(WHERE, "initialTokens", o.initialTokens ?? this.initialTokens, capacity)!
      : capacity;
    return this.planBucket(capacity, () => {
      const self = this as { capacity: number; refillPerSecond: number; initialTokens: number };
      self.capacity = capacity;
      self.refillPerSecond = rate;
      self.initialTokens = initial;
      this.initialGiven = given;
    });
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    if (this.waiting === undefined || this.waiting.held === 0)
      return this.kernel.allowAt(this.state, 0, 0, now, c);
    if (!this.fitsAt(now, c)) return false; // as the kernel, and behind a shaping queue
    this.takeAt(now, c);
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
   * Refills the bucket: back to the fresh state (full, or `initialTokens` from now), except that pending reservations
   * and waiters keep their tokens and their place (the full bucket pays their debt first,
   * so they are served sooner).
   */
  reset(): void {
    this.resetUnits();
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and when the bucket would be full again
   * with no further traffic (the receipt's `refundableUntilMs`), for a refund through it later.
   * @example
   * const receipt = bucket.charge(1000) // the most an LLM answer may cost
   * bucket.refund(receipt, 800) // it cost 200: up to 800 back
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    const c = cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost);
    return this.chargeAt(this.now(), c);
  }

  /**
   * Gives back tokens taken earlier (a request that turned out cheaper, or should not count)
   * and returns how many came back. Through the receipt of a {@link charge}: `units` of what
   * it took (default: all it still holds), at most what the refill has not repaid of them
   * yet (`refillPerSecond * (refundableUntilMs - now) / 1000`, less what other refunds gave
   * back since), nothing after a reset or reconfigure. Without one: `cost` tokens (default
   * 1), the bucket then holding `min(capacity, tokens + cost)`. Either way never more than a
   * full bucket, nor what a pending reservation's time counts on; waiters are then served
   * first-in, first-out. See docs/semantics.md#refunds.
   * @throws {TypeError} If `cost` or `units` is not a number, or the receipt is another
   *   limiter's. {RangeError} If it is NaN, negative or infinite.
   */
  override refund(receipt: Receipt, units?: number): number;
  override refund(cost?: number): number;
  override refund(cost?: number | Receipt, units?: number): number {
    return this.refundOf(cost, units);
  }

  /**
   * True when the bucket is full and nothing is pending. A new bucket would decide the
   * same, or, with `initialTokens` below capacity, be stricter: forgetting an idle bucket
   * is never in the client's favour (docs/semantics.md#initial-tokens).
   */
  isIdle(): boolean {
    return this.idle();
  }

  /**
   * Resolves with the granting decision once `cost` tokens are taken, first-in, first-out
   * behind earlier waiters and reservations. A cost that does not fit takes its tokens now,
   * into debt, and resolves when the debt up to it is repaid:
   * `(cost - tokens) * 1000 / refillPerSecond` ms, sooner if a waiter ahead aborts.
   *
   * Rejects (never throws), taking nothing, for a bad cost or option (`TypeError`/
   * `RangeError`), a cost above `capacity` (`RangeError`) or a wait beyond `maxWaitMs` or
   * endless (`RateLimitError`); on abort, with `signal.reason`, giving the tokens back as
   * {@link TokenBucket.reserve}'s `cancel()` does. See docs/waiting.md.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return this.waitUnits(cost, options);
  }

  /**
   * Reserves `cost` tokens now, Go-style (`rate.Limiter.ReserveN`): taken at once, into debt
   * if needed; act after `delayMs` (0 when they were there). Later reservations queue behind.
   * `ok` is false, taking nothing, when the cost is above `capacity`, the delay would exceed
   * `maxWaitMs`, or the rate is 0 and the tokens are not there.
   *
   * `cancel()` at or before the time to act (a `delayMs` of 0 included) gives the tokens
   * back, except those later reservations count on, which come back when those are cancelled
   * too (Go's rule, in exact units); after the time to act, or twice, it does nothing.
   * Details: docs/waiting.md#reservations-go-style.
   * @example
   * const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 10 })
   * bucket.reserve().delayMs //=> 0
   * const r = bucket.reserve() // in debt: acts 100 ms from now
   * r.delayMs //=> 100
   * r.cancel() // the token is back
   * @throws {TypeError} If `cost` or `maxWaitMs` is not a number, or options are not an object
   *   or name an unknown option.
   * @throws {RangeError} If `cost` is NaN, negative or infinite, or `maxWaitMs` below 0.
   */
  reserve(cost?: number, options?: ReserveOptions): Reservation {
    return this.waitLedger().reserve(cost, options);
  }
}
