import { badClock, checkNumber, mustBe } from "../core/errors.js";
import type { Clock, Decision, WaitOptions } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import { ChargeReceipt, deniedReceipt } from "../core/receipt.js";
import { type ApplyReconfigure, checkReconfigureOptions } from "../core/reconfigure.js";
import { jittered } from "../core/wait.js";
import { BucketKernel, HeldBucket } from "./bucket-kernel.js";
import type { BucketLedger } from "./bucket-ledger.js";
import {
  exactPart,
  type KernelPart,
  KernelShell,
  type KeyedForm,
  type ShellSpec,
} from "./kernel.js";
import { readClock } from "./time.js";

/** Scratch for the units one refund gave back (calls are synchronous). */
const GIVEN = new Float64Array(1);

/**
 * Checks a bucket's starting amount (`initialTokens`, `initialLevel`): undefined, or a
 * finite number from 0 to `capacity`.
 * @throws {TypeError} For a non-number; {RangeError} for one out of range (NaN included).
 * @internal
 */
export function checkInitial(
  where: string,
  name: string,
  value: unknown,
  capacity: number,
): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "number" && value >= 0 && value <= capacity) return value + 0; // -0 as 0
  throw mustBe(where, name, `a finite number from 0 to capacity (${capacity})`, value);
}

/**
 * Base of {@link TokenBucket} and {@link LeakyBucket}, one bucket seen from two sides: the token
 * bucket's tokens are the leaky bucket's free room (`capacity - level`). A shell over one slot of
 * its {@link BucketKernel}: with nothing held for waiters or reservations the kernel decides; while
 * units are held, its {@link HeldBucket} over the same slot (as for the keyed registry's waiting
 * keys). Not exported from the package; its members are marked internal. Each subclass keeps
 * what {@link KernelShell} says, and declares each public method with its own docs (the API
 * report lists only a class's own members), its body a call to a method here.
 */
export abstract class BucketBase extends KernelShell {
  /** Most units the bucket holds. */
  abstract readonly capacity: number;
  /** The time source, in milliseconds. */
  abstract readonly clock: Clock;
  /** @internal Units per second the bucket refills (tokens) or drains (level). */
  protected abstract get ratePerSecond(): number;
  /**
   * @internal The units of a fresh bucket: a token bucket's `initialTokens`, a leaky
   * bucket's `capacity - initialLevel`; `capacity` for one that starts full.
   */
  protected abstract get initialUnits(): number;

  /**
   * @internal The bucket's slot of its kernel, `[units, anchorMs]`: units (tokens, or free room) at
   * `anchorMs` (`-Infinity` while full and unused; never moves back), as if units held for waiters
   * had not been taken (see {@link HeldBucket}).
   */
  protected readonly state = new Float64Array(2);
  /** @internal The kernel deciding `state` while nothing is held; set by the subclass's constructor. */
  protected kernel!: BucketKernel;
  /** @internal Units held for waiters and reservations, and their ledger: made at the first of them. */
  protected waiting: HeldBucket | undefined;
  /** @internal Units refunds gave back so far: receipts count them as refill ({@link refundAt}). */
  protected credited = 0;

  /** @internal The class's name, catalog id and option names. */
  protected readonly spec: ShellSpec;
  /** @internal True for the leaky bucket's shaping: delay by the level, refuse when full. */
  protected readonly shaping: boolean;

  /** @internal */
  constructor(spec: ShellSpec, shaping: boolean) {
    super();
    this.spec = spec;
    this.shaping = shaping;
  }

  /** @internal Reads the clock; a reading behind the latest one counts as the latest one. */
  protected override now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock(this.where, t);
    if (t > this.seenMs) this.seenMs = t;
    return this.seenMs;
  }

  /** @internal Units held for waiters and reservations (0 without any). */
  protected get held(): number {
    return this.waiting === undefined ? 0 : this.waiting.held;
  }

  /**
   * @internal The fresh state: `initialUnits` from now (from the constructor's clock reading, for a
   * new bucket), refilling from then; a bucket that starts full is full for good until used
   * (`anchorMs` of `-Infinity`), and reads no clock. See docs/semantics.md#initial-tokens.
   */
  protected startUnits(): void {
    if (this.kernel === undefined) this.kernel = this.makeKernel();
    const full = this.initialUnits >= this.capacity;
    this.kernel.init(this.state, 0, 0, full ? Number.NEGATIVE_INFINITY : this.now());
  }

  /** @internal Back to the fresh state; pending reservations and waiters keep their units and place. */
  protected resetUnits(): void {
    this.receiptEpoch++;
    if (this.held === 0) this.startUnits();
    else this.waiting!.resetTo(this.initialUnits, this.now()); // at most capacity (checked)
  }

  /**
   * @internal Gives back a checked `cost` taken earlier, at now: the units rise by `cost`, never
   * above the fresh state, nor, while units are held, past what {@link HeldBucket.refundAt} allows
   * (waiters are then served first-in, first-out: a refund lets no one jump the queue). Returns the
   * units given back.
   */
  protected refundUnits(cost: number, now: number): number {
    if (!(cost > 0)) return 0;
    // The kernel's refund: a bucket full again is written exactly full (isIdle, traces).
    const given =
      this.held !== 0
        ? this.waiting!.refundAt(now, cost)
        : this.kernel.refundAt(this.state, 0, 0, now, cost, GIVEN, 0);
    this.credited += given;
    return given;
  }

  /**
   * @internal `charge` of a checked `cost` at `now`: the receipt keeps when the bucket is full
   * again with no further traffic (`now + resetAfterMs`) and the units credited so far.
   */
  chargeAt(now: number, cost: number): ChargeReceipt {
    const decision = this.decideAt(now, cost, true);
    if (!decision.allowed || cost === 0) return deniedReceipt(decision, undefined, now, this);
    const fullAt = now + decision.resetAfterMs;
    return new ChargeReceipt(
      decision,
      undefined,
      cost,
      now,
      fullAt,
      this,
      this.receiptEpoch,
      fullAt,
      this.credited,
      undefined,
    );
  }

  /** @internal True when the bucket is at capacity and nothing is pending. */
  protected idle(): boolean {
    const now = this.now();
    // Reservations whose time has come are spent: settle them before looking.
    if (this.held !== 0) this.waiting!.ledger.settle(now);
    return this.held === 0 && this.kernel.isIdle(this.state, 0, 0, now);
  }

  /** @internal `wait` through the ledger, jittered; aborted meanwhile, `refund(cost)`. */
  protected waitUnits(cost?: number, options?: WaitOptions): Promise<Decision> {
    return jittered(
      options,
      () => this.waitLedger().wait(cost, options),
      () => this.refund(cost),
    );
  }

  /** @internal The ledger behind `wait` and `reserve`, made at the first of them. */
  protected waitLedger(): BucketLedger {
    if (this.waiting === undefined) {
      const bucket = this;
      this.waiting = new (class extends HeldBucket {
        // Read live: reconfigure() may change them.
        get capacity() {
          return bucket.capacity;
        }
        get ratePerSecond() {
          return bucket.ratePerSecond;
        }
        readonly st = bucket.state;
        readonly s = 0;
        now() {
          return bucket.now();
        }
      })(this.where, this.shaping);
    }
    return this.waiting.ledger;
  }

  /**
   * @internal `reconfigure`'s `options` checked as the constructor checks them (`hints` its
   * option hints), with `capacity` and the rate option `rate` as they will be: each the
   * current one when left out.
   */
  protected checkRetune(
    options: unknown,
    hints: Readonly<Record<string, string>>,
    rate: string,
  ): [Readonly<Record<string, unknown>>, number, number] {
    const { where, options: names } = this.spec;
    const o = checkReconfigureOptions<Record<string, unknown>>(where, options, names, hints);
    const capacity = checkNumber(where, "capacity", o.capacity, 0, false, this.capacity);
    return [o, capacity, checkNumber(where, rate, o[rate], 0, true, this.ratePerSecond)];
  }

  /**
   * @internal Reads the clock; the result moves the bucket to `capacity` and the rate at that
   * reading (`assign` sets the subclass's fields), carrying the units over (`retunedUnits`;
   * full stays full) and re-planning waiters (`BucketLedger.replan`). See
   * docs/semantics.md#changing-limits-live.
   */
  protected planBucket(capacity: number, assign: () => void): ApplyReconfigure {
    const now = this.now();
    return () => {
      this.receiptEpoch++;
      const w = this.waiting;
      if (this.held !== 0) w!.ledger.settle(now);
      const held = this.held;
      if (held !== 0) w!.retune(now, capacity);
      assign();
      const next = this.makeKernel();
      if (held === 0) this.kernel.retuneSlot(next, this.state, 0, 0, now);
      this.kernel.adopt(next);
      w?.ledger.replan();
    };
  }

  /** @internal `consume` (`take` true) or `peek` for a checked `cost`. */
  protected decide(cost: number, take: boolean): Decision {
    return this.decideAt(this.now(), cost, take);
  }

  /**
   * @internal `consume` (`take` true) or `peek` of a checked `cost` at `now` (a reading of the
   * bucket's clock, at least `seenMs`): the kernel's, unless a ledger ever held units.
   */
  override decideAt(now: number, cost: number, take: boolean): Decision {
    if (now > this.seenMs) this.seenMs = now;
    const w = this.waiting;
    if (w === undefined) return this.kernel.decideAt(this.state, 0, 0, now, cost, take);
    return w.decideAt(now, cost, take);
  }

  /** @internal Throws while units are held for waiters or reservations (those due settled first). */
  protected override checkNothingHeld(where: string): void {
    if (this.held !== 0) this.waiting!.ledger.settle(this.now());
    if (this.held !== 0) {
      throw new RangeError(
        `${where}: ${this.held} units are held for waiters or reservations; they cannot leave the process: snapshot once they are served or cancelled`,
      );
    }
  }

  /** @internal How a `KeyedLimiter` keeps this bucket's keys (see {@link KeyedForm}). */
  keyedForm(): KeyedForm {
    return {
      kernel: this.makeKernel(),
      clockBoundMs: Number.POSITIVE_INFINITY,
      clockWhere: "KeyedLimiter",
      windowMs: 1,
      bucket: { capacity: this.capacity, ratePerSecond: this.ratePerSecond, shaping: this.shaping },
    };
  }

  /** @internal A kernel with the bucket's numbers now. */
  protected override makeKernel(): BucketKernel {
    return new BucketKernel(this.capacity, this.ratePerSecond, this.shaping, this.initialUnits);
  }

  /** @internal This bucket as `allOf` drives it, when it is exactly a built-in class. */
  kernelPart(): KernelPart | undefined {
    return exactPart(this, BucketBase.prototype);
  }

  /** @internal See {@link KernelPart.timeOf}. */
  timeOf(): number {
    return readClock(this.where, this.clock, this.seenMs);
  }

  /**
   * @internal See {@link KernelPart.fitsAt}. As the classes' `allow()`: a free probe is
   * allowed even in debt, and a leaky bucket's plain request waits behind its shaping queue.
   */
  override fitsAt(now: number, cost: number): boolean {
    return this.held === 0
      ? this.kernel.fitsAt(this.state, 0, 0, now, cost)
      : this.fitsHeld(now, cost);
  }

  /** @internal {@link fitsAt} while units are held (kept apart: the hot path inlines less). */
  private fitsHeld(now: number, cost: number): boolean {
    const w = this.waiting!;
    const units = w.unitsAt(now);
    if (!fits(cost, units)) return cost === 0;
    return !(cost > 0 && this.shaping && w.ledger.blocks(units));
  }

  /** @internal See {@link KernelPart.takeAt}. */
  override takeAt(now: number, cost: number): void {
    if (now > this.seenMs) this.seenMs = now;
    if (!(cost > 0)) return;
    const w = this.waiting;
    if (w === undefined || w.held === 0) this.kernel.takeAt(this.state, 0, 0, now, cost);
    else w.take(w.unitsAt(now), cost, now);
  }

  /**
   * @internal See {@link KernelPart.refundAt}. Through a receipt (docs/semantics.md#refunds):
   * at most what the refill has not yet repaid of `units`, `rate * (fullAt - now)`, less the
   * units refunds credited since the charge (this receipt's own too: they refilled the bucket),
   * then as {@link refundUnits} allows; nothing after a reset or reconfigure since the charge.
   */
  override refundAt(now: number, units: number, receipt: ChargeReceipt | undefined): number {
    if (now > this.seenMs) this.seenMs = now;
    if (receipt === undefined) return this.refundUnits(units, now);
    if (!(units > 0) || receipt.epoch !== this.receiptEpoch) return 0;
    const give = this.kernel.receiptBound(receipt.a, now, units, this.credited - receipt.b);
    if (!(give > 0)) return 0;
    const given = this.refundUnits(give, now);
    receipt.refunded += given;
    return given;
  }

  /** @internal See {@link KernelPart.timeAt}. */
  override timeAt(timeMs: number): number {
    return timeMs > this.seenMs ? timeMs : this.seenMs;
  }
}
