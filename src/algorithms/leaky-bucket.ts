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

/** Options of {@link LeakyBucket}. */
export interface LeakyBucketOptions {
  /** Most units the bucket holds at once (> 0, fractions allowed). */
  readonly capacity: number;
  /** Units drained per second, continuously (>= 0; 0 never drains: a fixed quota). */
  readonly leakPerSecond: number;
  /**
   * The level of a new bucket, from 0 (empty) to `capacity` (full: nothing fits until it
   * drains). It drains from the moment the bucket is made (a `KeyedLimiter` key: its first
   * use), and `reset()` returns to it. docs/semantics.md#initial-tokens.
   * @default 0 (it starts empty)
   */
  readonly initialLevel?: number | undefined;
  /**
   * Time source in milliseconds.
   * @default () => performance.now()
   */
  readonly clock?: Clock | undefined;
}

/**
 * Options of {@link LeakyBucket.reconfigure}: any of the constructor's but the clock; an
 * option left out keeps its value.
 */
export type LeakyBucketReconfigure = Partial<Omit<LeakyBucketOptions, "clock">>;

const WHERE = "LeakyBucket";

/** The option names of {@link LeakyBucketOptions}, checked by the constructor; src/algorithms/catalog.ts lists them. */
export const LEAKY_BUCKET_OPTIONS = optionNames<LeakyBucketOptions>()([
  "capacity",
  "leakPerSecond",
  "initialLevel",
  "clock",
]);
const SPEC = { where: WHERE, id: "leaky-bucket", options: LEAKY_BUCKET_OPTIONS };
const HINTS = /* @__PURE__ */ bucketHints(WHERE, "leakPerSecond", "refillPerSecond");
const REQUIRED = /* @__PURE__ */ bucketRequired(WHERE, "leakPerSecond");

/**
 * A leaky bucket meter: a level, initially 0 (or `initialLevel`), draining at `leakPerSecond` units per second;
 * a request of `cost` is allowed when `level + cost <= capacity` and raises the level by
 * `cost`. GCRA (ATM Forum TM 4.0, ITU-T I.371): as a meter it decides bit for bit as a
 * `TokenBucket` of the same numbers (one arithmetic, `bucket-math.ts`). O(1), no timers.
 *
 * Good for: a sustained rate with a bounded burst. Watch out: as a meter it admits
 * `capacity` at once; `wait`/`reserve` shape instead, so requests leave
 * `1000 / leakPerSecond` ms apart (docs/waiting.md). `leakPerSecond: 0` never drains.
 * Shared rules: docs/semantics.md#the-algorithms.
 * @example
 * new LeakyBucket({ capacity: 10, leakPerSecond: 5 }).consume(11).retryAfterMs //=> Infinity
 * @throws {RangeError} If `capacity` is not a finite number > 0 or `leakPerSecond` not >= 0.
 * @throws {TypeError} For an unknown or mistyped option: see docs/semantics.md#options.
 */
export class LeakyBucket extends BucketBase implements Limiter {
  /** Most units the bucket holds. */
  override readonly capacity: number;
  /** Units drained per second. */
  readonly leakPerSecond: number;
  /** The level of a new bucket, and the one `reset()` returns to: 0 unless given. */
  readonly initialLevel: number;
  /** The time source, in milliseconds. */
  override readonly clock: Clock;

  constructor(options: LeakyBucketOptions) {
    const o = checkOptions<LeakyBucketOptions>(WHERE, options, REQUIRED);
    checkOptionNames(WHERE, o, LEAKY_BUCKET_OPTIONS, HINTS, REQUIRED);
    const capacity = checkNumber(WHERE, "capacity", o.capacity, 0, false);
    const leakPerSecond = checkNumber(WHERE, "leakPerSecond", o.leakPerSecond, 0, true);
    const initialLevel = checkInitial(WHERE, "initialLevel", o.initialLevel, capacity) ?? 0;
    // Shaping: delay by the level, refuse when the queue is full (see the class doc).
    super(SPEC, true);
    this.capacity = capacity;
    this.leakPerSecond = leakPerSecond;
    this.initialLevel = initialLevel;
    this.clock = checkClock(WHERE, o.clock, systemClock);
    this.startUnits();
  }

  /** @internal */
  protected override get ratePerSecond(): number {
    return this.leakPerSecond;
  }

  /** @internal The free room of a new bucket. */
  protected override get initialUnits(): number {
    return this.capacity - this.initialLevel;
  }

  /**
   * A new bucket with the same options (clock and `initialLevel` included); the state is not
   * copied. A keyed registry uses it to make one bucket per key. Of the same class: a
   * subclass is cloned as itself (`new this.constructor(options)`), so its overrides apply
   * to every key; a subclass whose constructor takes other arguments must override `clone()`.
   */
  clone(): LeakyBucket {
    const Class = this.constructor as new (options: LeakyBucketOptions) => LeakyBucket;
    return new Class({
      capacity: this.capacity,
      leakPerSecond: this.leakPerSecond,
      ...(this.initialLevel === 0 ? {} : { initialLevel: this.initialLevel }),
      clock: this.clock,
    });
  }

  /**
   * Changes `capacity` and/or `leakPerSecond` live, as Go's `SetBurst`/`SetLimit`: the level,
   * drained up to now at the old rate, is kept as it is (above a smaller capacity too: nothing fits
   * until it has drained below it; an empty bucket stays empty), and the new rate drains it from
   * now on. Waiters are re-planned: one whose cost is now above `capacity`, whose wait would never
   * end or would now pass its `maxWaitMs` is rejected as a fresh `wait` would be. Reservations keep
   * their water and their time to act. `initialLevel` applies from the next fresh state (a
   * `reset()`, a new key) and must fit the new capacity. See
   * docs/semantics.md#changing-limits-live.
   * @example
   * const bucket = new LeakyBucket({ capacity: 10, leakPerSecond: 1 })
   * bucket.reconfigure({ leakPerSecond: 5 })
   * @throws {TypeError} If `options` is not an object, names an unknown option or the clock, or an
   *   option is not a number; nothing changes.
   * @throws {RangeError} As the constructor, for an option out of range; nothing changes.
   */
  reconfigure(options: LeakyBucketReconfigure): void {
    this.planReconfigure(options)();
  }

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const [o, capacity, rate] = this.checkRetune(options, HINTS, "leakPerSecond");
    const level = o.initialLevel ?? this.initialLevel;
    const initial = checkInitial(WHERE, "initialLevel", level, capacity)!;
    return this.planBucket(capacity, () => {
      const self = this as { capacity: number; leakPerSecond: number; initialLevel: number };
      self.capacity = capacity;
      self.leakPerSecond = rate;
      self.initialLevel = initial;
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

  /** Adds `cost` to the level when it fits and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true);
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false);
  }

  /**
   * Empties the bucket (or fills it to `initialLevel`): back to the fresh state, except that requests waiting in the
   * shaping queue keep their place and their water (which then drains first, so they
   * leave sooner).
   */
  reset(): void {
    this.resetUnits();
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and when the bucket would be empty again
   * with no further traffic (the receipt's `refundableUntilMs`), for a refund through it later.
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    const c = cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost);
    return this.chargeAt(this.now(), c);
  }

  /**
   * Gives back units taken earlier and returns how many came back: the level falls by them,
   * never below empty. Through the receipt of a {@link charge}: `units` of what it took
   * (default: all it still holds), at most what has not leaked out of them yet
   * (`leakPerSecond * (refundableUntilMs - now) / 1000`, less what other refunds gave back
   * since), nothing after a reset or reconfigure. Without one: `cost` units (default 1).
   * Never what a pending reservation's time counts on; requests waiting in the shaping queue
   * leave sooner, first-in, first-out. See docs/semantics.md#refunds.
   * @throws {TypeError} If `cost` or `units` is not a number, or the receipt is another
   *   limiter's. {RangeError} If it is NaN, negative or infinite.
   */
  override refund(receipt: Receipt, units?: number): number;
  override refund(cost?: number): number;
  override refund(cost?: number | Receipt, units?: number): number {
    return this.refundOf(cost, units);
  }

  /**
   * True when the bucket is empty and nothing waits. A new bucket would decide the same,
   * or, with an `initialLevel`, be stricter: forgetting an idle bucket is never in the
   * client's favour (docs/semantics.md#initial-tokens).
   */
  isIdle(): boolean {
    return this.idle();
  }

  /**
   * Shapes: resolves with the granting decision when this request may leave the queue,
   * `level * 1000 / leakPerSecond` ms after the call (the level before it), so requests leave at
   * the constant leak rate, first-in, first-out.
   *
   * Rejects (never throws), taking nothing, for a bad cost or option (`TypeError`/`RangeError`), a
   * cost above `capacity` (`RangeError`), a full queue (`level + cost > capacity`) or a wait beyond
   * `maxWaitMs` or endless (`RateLimitError`); on abort, with `signal.reason`, removing its water
   * as {@link LeakyBucket.reserve}'s `cancel()` does. See docs/waiting.md.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return this.waitUnits(cost, options);
  }

  /**
   * Shapes one request Go-style: admits `cost` into the queue now; act after
   * `delayMs = level * 1000 / leakPerSecond` (the level before it). `ok` is false, admitting
   * nothing, when the cost is above capacity, the queue is full (`level + cost > capacity`),
   * the delay would exceed `maxWaitMs`, or never end (a leak of 0 with water ahead).
   *
   * `cancel()` at or before the time to act (a `delayMs` of 0 included) removes its water,
   * unless a request reserved after it is pending: then all of it stays until that one
   * leaves or is cancelled too (giving part back would allow a burst). After the time to
   * act, or twice, it does nothing. Details: docs/waiting.md#reservations-go-style.
   * @example
   * const shaper = new LeakyBucket({ capacity: 10, leakPerSecond: 5 })
   * shaper.reserve().delayMs //=> 0
   * shaper.reserve().delayMs //=> 200
   * @throws {TypeError} If `cost` or `maxWaitMs` is not a number, or options are not an object
   *   or name an unknown option.
   * @throws {RangeError} If `cost` is NaN, negative or infinite, or `maxWaitMs` below 0.
   */
  reserve(cost?: number, options?: ReserveOptions): Reservation {
    return this.waitLedger().reserve(cost, options);
  }
}
