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
import { readClock } from "./time.js";

/** Options of {@link LeakyBucket}. */
export interface LeakyBucketOptions {
  /** Most units the bucket holds at once (> 0, fractions allowed). */
  readonly capacity: number;
  /** Units drained per second, continuously (>= 0; 0 never drains: a fixed quota). */
  readonly leakPerSecond: number;
  /**
   * Time source in milliseconds.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

const WHERE = "LeakyBucket";

/** Whether allOf's driver for this class is registered (by the first constructor). */
let timedPartDefined = false;
/** The option names of {@link LeakyBucketOptions}, checked by the constructor. */
const OPTIONS = optionNames<LeakyBucketOptions>()(["capacity", "leakPerSecond", "clock"]);
const HINTS = /* @__PURE__ */ bucketHints(WHERE, "leakPerSecond", "refillPerSecond");

/**
 * A leaky bucket used as a meter: a level, initially 0, that drains continuously at
 * `leakPerSecond` units per second; a request of `cost` units is allowed when
 * `level + cost <= capacity` and then raises the level by `cost`. Units are the
 * caller's (requests, bytes...); durations are milliseconds.
 *
 * This is the Generic Cell Rate Algorithm (GCRA) of the ATM Forum Traffic Management
 * Specification 4.0 (ITU-T I.371) in its continuous-state leaky bucket form: capacity
 * is the burst tolerance, `leakPerSecond` the sustained rate. As a meter it decides
 * exactly as a `TokenBucket` with the same capacity and rate (the free room
 * `capacity - level` is that bucket's tokens); both share one arithmetic
 * (`bucket-math.ts`), so their decisions agree bit for bit.
 *
 * Good for: enforcing a sustained rate with a bounded burst, in O(1) time and memory.
 * Watch out: as a meter it admits a burst of `capacity` at once, like a token bucket;
 * smooth output needs the shaping mode (`wait`/`reserve`).
 *
 * Shaping (`wait`, `reserve`): the bucket is a queue with a constant outflow. A request
 * that fits (`level + cost <= capacity`) is admitted at once, adding `cost` to the level,
 * and may act after `level * 1000 / leakPerSecond` ms (the level before it: the water
 * ahead of it has drained), so a burst of N requests of cost 1 leaves exactly
 * `1000 / leakPerSecond` ms apart, with no burst; a request that does not fit finds the
 * queue full and is refused (`RateLimitError`, `ok: false`). While requests wait in the
 * queue, plain `allow`/`consume` are denied (they would overtake them), with
 * `retryAfterMs` until the last of them leaves (or the cost fits, if later).
 *
 * `retryAfterMs` is the time until enough has drained for the cost to fit;
 * `resetAfterMs` the time until the bucket is empty. A denied request changes
 * nothing. A clock that goes backwards drains nothing (time stands still at the
 * latest reading). A `leakPerSecond` of 0 never drains: once full, `retryAfterMs`
 * is `Infinity`. A cost fits within a float tolerance (`level + cost <= capacity +
 * 1e-9 * max(1, cost)`); the level then stays a hair above `capacity` until that much has
 * drained, so the tolerance is granted once, not on every request.
 *
 * @throws {TypeError} If `options` is not an object or names an unknown option (the
 *   message names it and, for a typo or another library's name, what to use instead),
 *   `capacity` or `leakPerSecond` is not a number, or `clock` is not a function.
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `leakPerSecond`
 *   is not a finite number >= 0.
 * @example
 * const bucket = new LeakyBucket({ capacity: 10, leakPerSecond: 5 })
 * bucket.consume(10).allowed //=> true
 * bucket.consume().allowed //=> false (one unit drains in 200 ms)
 */
export class LeakyBucket extends BucketBase implements Limiter {
  /** Most units the bucket holds. */
  override readonly capacity: number;
  /** Units drained per second. */
  readonly leakPerSecond: number;
  /** The time source, in milliseconds. */
  override readonly clock: Clock;

  constructor(options: LeakyBucketOptions) {
    const o = checkOptions<LeakyBucketOptions>(WHERE, options);
    checkOptionNames(WHERE, o, OPTIONS, HINTS);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const leakPerSecond = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true);
    const clock = checkClock(WHERE, o.clock, systemClock);
    super();
    this.capacity = capacity;
    this.leakPerSecond = leakPerSecond;
    this.clock = clock;
    // The units are the free room, `capacity - level`: a TokenBucket's tokens.
    this.units = capacity;
    // allOf reads, checks and charges an exact LeakyBucket at one clock reading; registered
    // by the first constructor, not a static block, so that an unused class can be dropped.
    if (!timedPartDefined) {
      timedPartDefined = true;
      defineBucketPart(LeakyBucket.prototype);
    }
  }

  protected override get where(): string {
    return WHERE;
  }

  protected override get ratePerSecond(): number {
    return this.leakPerSecond;
  }

  /** Shaping: delay by the level, refuse when the queue is full (see the class doc). */
  protected override get shaping(): boolean {
    return true;
  }

  /**
   * A new, empty bucket with the same options (clock included); the state is not
   * copied. A keyed registry uses it to make one bucket per key. Of the same class: a
   * subclass is cloned as itself (`new this.constructor(options)`), so its overrides apply
   * to every key; a subclass whose constructor takes other arguments must override `clone()`.
   */
  clone(): LeakyBucket {
    const Class = this.constructor as new (options: LeakyBucketOptions) => LeakyBucket;
    return new Class({
      capacity: this.capacity,
      leakPerSecond: this.leakPerSecond,
      clock: this.clock,
    });
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    // readClock here rather than the shared now(): measured faster with performance.now().
    const now = (this.seenMs = readClock(WHERE, this.clock, this.seenMs));
    const room = this.unitsAt(now);
    if (!fits(c, room)) return c === 0; // a free probe is allowed even in an overdraft
    if (this.held !== 0 && this.ledger!.blocks(room) && c > 0) return false;
    if (c > 0) this.take(room, c, now);
    return true;
  }

  /** Adds `cost` to the level when it fits and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true);
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false);
  }

  /**
   * Empties the bucket: back to the fresh state, except that requests waiting in the
   * shaping queue keep their place and their water (which then drains first, so they
   * leave sooner).
   */
  reset(): void {
    this.resetUnits();
  }

  /** True when the bucket is empty and nothing waits: a new bucket would decide the same. */
  isIdle(): boolean {
    return this.idle();
  }

  /**
   * Shapes: resolves with the granting decision when this request may leave the queue,
   * `level * 1000 / leakPerSecond` ms after the call (the level before it), so requests
   * leave at the constant leak rate, first-in, first-out. See the class doc.
   *
   * Rejects (never throws): `TypeError`/`RangeError` for a bad cost or option; `RangeError`
   * `LeakyBucket.wait: cost 12 exceeds capacity 10` when the cost can never fit;
   * `RateLimitError` when the queue is full (`level + cost > capacity`), the wait would
   * exceed `maxWaitMs`, or never end (a leak of 0 with water ahead), taking nothing;
   * `signal.reason` when aborted, removing its water so the waiters behind move up at once;
   * while a reservation made after it is pending, all of its water stays until that one
   * leaves (see {@link LeakyBucket.reserve}).
   * One timer per bucket, ref'd, in pieces of at most 2^31 - 1 ms.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return this.waitUnits(cost, options);
  }

  /**
   * Shapes one request Go-style: admits `cost` into the queue now and says how long to
   * wait before acting, `delayMs = level * 1000 / leakPerSecond` (the level before it).
   * `ok` is false, and nothing is admitted, when the queue is full (`level + cost >
   * capacity`), the cost is above capacity, the delay would exceed `maxWaitMs`, or never
   * end (a leak of 0 with water ahead).
   *
   * `cancel()` before the time to act removes its water at once, unless a request reserved
   * after it is still pending: that one leaves at its fixed time, so the outflow in front
   * of it stays taken and all the cancelled water stays until it leaves (given back only
   * if it is cancelled in turn). Giving back part of it, as Go's `x/time/rate` does for a
   * token bucket (`cost - units reserved later`), would let a later request leave at the
   * same time as that reservation: a burst. So cancelling all of them, in any order,
   * restores the level exactly. A reservation with `delayMs` 0 leaves at once: its
   * `cancel()` does nothing, nor does a second one.
   *
   * @throws {TypeError} If `cost` or `maxWaitMs` is not a number, or options not an object.
   * @throws {RangeError} If `cost` is NaN, negative or infinite, or `maxWaitMs` below 0.
   * @example
   * const shaper = new LeakyBucket({ capacity: 10, leakPerSecond: 5 })
   * shaper.reserve().delayMs //=> 0
   * shaper.reserve().delayMs //=> 200
   * shaper.reserve().delayMs //=> 400
   */
  reserve(cost?: number, options?: ReserveOptions): Reservation {
    return this.reserveUnits(cost, options);
  }
}
