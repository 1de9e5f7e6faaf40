import { checkClock, checkCost, checkNumber, checkOptions } from "../errors.js";
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
 * `retryAfterMs` is the time until enough has drained for the cost to fit;
 * `resetAfterMs` the time until the bucket is empty. A denied request changes
 * nothing. A clock that goes backwards drains nothing (time stands still at the
 * latest reading). A `leakPerSecond` of 0 never drains: once full, `retryAfterMs`
 * is `Infinity`.
 *
 * @throws {TypeError} If `options` is not an object, `capacity` or `leakPerSecond`
 *   is not a number, or `clock` is not a function.
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `leakPerSecond`
 *   is not a finite number >= 0.
 * @example
 * const bucket = new LeakyBucket({ capacity: 10, leakPerSecond: 5 })
 * bucket.consume(10).allowed //=> true
 * bucket.consume().allowed //=> false (one unit drains in 200 ms)
 */
export class LeakyBucket implements Limiter {
  /** Most units the bucket holds. */
  readonly capacity: number;
  /** Units drained per second. */
  readonly leakPerSecond: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;

  /** Free room (`capacity - level`) at `anchorMs`. */
  private room: number;
  /** Time (ms) at which `room` was exact; `-Infinity` while unused. Never moves back. */
  private anchorMs = Number.NEGATIVE_INFINITY;
  /** Latest clock reading seen; earlier readings are treated as this one. */
  private seenMs = Number.NEGATIVE_INFINITY;
  private queue: WaitQueue | undefined;

  constructor(options: LeakyBucketOptions) {
    const o = checkOptions<LeakyBucketOptions>(WHERE, options);
    this.capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    this.leakPerSecond = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true);
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.room = this.capacity;
  }

  /**
   * A new, empty bucket with the same options (clock included); the state is not
   * copied. A keyed registry uses it to make one bucket per key.
   */
  clone(): LeakyBucket {
    return new LeakyBucket({
      capacity: this.capacity,
      leakPerSecond: this.leakPerSecond,
      clock: this.clock,
    });
  }

  /** `consume(cost).allowed`, without allocating. */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const now = this.now();
    const room = this.roomAt(now);
    if (!fits(c, room)) return false;
    if (c > 0) this.fill(room, c, now);
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

  /** Empties the bucket: back to the fresh state. Pending waiters keep waiting. */
  reset(): void {
    this.room = this.capacity;
    this.anchorMs = Number.NEGATIVE_INFINITY;
  }

  /** True when the bucket is empty and nobody waits: a new bucket would decide the same. */
  isIdle(): boolean {
    return (
      this.roomAt(this.now()) >= this.capacity &&
      (this.queue === undefined || this.queue.size === 0)
    );
  }

  /**
   * Waits until `cost` fits, first-in, first-out behind earlier waiters, and resolves
   * with the granting decision. See {@link Limiter.wait}.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    this.queue ??= new WaitQueue(WHERE, this);
    return this.queue.wait(cost, options);
  }

  /** Reads the clock; a reading behind the latest one counts as the latest one. */
  private now(): number {
    this.seenMs = readClock(WHERE, this.clock, this.seenMs);
    return this.seenMs;
  }

  /** Free room at `now` (>= anchor): the level drained, without storing it. */
  private roomAt(now: number): number {
    return tokensAt(this.room, this.anchorMs, now, this.capacity, this.leakPerSecond);
  }

  private fill(room: number, cost: number, now: number): void {
    this.room = tokensAfter(room, cost);
    this.anchorMs = now;
  }

  private decide(cost: number, take: boolean): Decision {
    const now = this.now();
    const room = this.roomAt(now);
    const decision = bucketDecision(cost, room, this.capacity, this.leakPerSecond);
    if (take && decision.allowed && cost > 0) this.fill(room, cost, now);
    return decision;
  }
}
