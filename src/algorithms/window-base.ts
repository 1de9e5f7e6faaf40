import type { RequiredOptions } from "../core/errors.js";
import { badClock, checkClock, checkCost, checkOptionNames, checkOptions } from "../core/errors.js";
import type { Clock, Decision, Receipt, WaitOptions } from "../core/limiter.js";
import { systemClock } from "../core/limiter.js";
import { windowHints, windowRequired } from "../core/option-names.js";
import { ChargeReceipt, deniedReceipt } from "../core/receipt.js";
import { type ApplyReconfigure, checkReconfigureOptions } from "../core/reconfigure.js";
import { jittered, WaitQueue } from "../core/wait.js";
import {
  exactPart,
  type Kernel,
  type KernelPart,
  KernelShell,
  type KeyedForm,
  type ShellSpec,
} from "./kernel.js";
import {
  checkWindowClock,
  checkWindowResize,
  checkWindowSize,
  readClock,
  windowClockBoundMs,
  windowClockError,
} from "./time.js";

/** Scratch for one receipt's mark, the units asked and given back (calls are synchronous). */
const MARKS = new Float64Array(1);
const ASKED = new Float64Array(1);
const GIVEN = new Float64Array(1);

/** What a window class tells its base: its name, option list and how to make its kernel. @internal */
export interface WindowSpec extends ShellSpec {
  readonly hints: Readonly<Record<string, string>>;
  readonly required: RequiredOptions;
  readonly Kernel: new (limit: number, windowMs: number) => Kernel;
}

/** The spec of the window class `where`, with the option hints and required options of its name. @internal */
export function windowSpec(
  where: string,
  id: string,
  options: readonly string[],
  Kernel: new (limit: number, windowMs: number) => Kernel,
): WindowSpec {
  return { where, id, options, hints: windowHints(where), required: windowRequired(where), Kernel };
}

/**
 * Base of the three window classes (`FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`):
 * each is a shell over one slot of its own kernel, and the clock (with its float-step bound),
 * receipts, waiting and reconfiguring around it are the same. Not exported from the package;
 * what each class keeps: see {@link KernelShell}.
 */
export abstract class WindowBase extends KernelShell {
  /** Most units allowed in a window. */
  readonly limit: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
  /** The time source, in milliseconds. */
  readonly clock: Clock;
  /** @internal The algorithm's kernel, deciding the one slot in `state`. */
  protected readonly kernel: Kernel;
  /** @internal */
  protected readonly state: Float64Array;
  /** @internal Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  protected clockBoundMs: number;
  /** @internal */
  protected queue: WaitQueue | undefined;
  /** @internal */
  protected readonly spec: WindowSpec;

  /** @internal Checks `options` (`limit`, `windowMs`, `clock`) as each class documents them. */
  constructor(spec: WindowSpec, options: unknown) {
    super();
    const where = spec.where;
    const o = checkOptions<Record<string, unknown>>(where, options, spec.required);
    checkOptionNames(where, o, spec.options, spec.hints, spec.required);
    const { limit, windowMs } = checkWindowSize(where, o);
    this.clock = checkClock(where, o.clock, systemClock);
    this.spec = spec;
    this.limit = limit;
    this.windowMs = windowMs;
    this.clockBoundMs = windowClockBoundMs(windowMs);
    this.kernel = this.makeKernel();
    this.kernel.bind(UNBOUNDED);
    this.kernel.grow(1);
    this.state = new Float64Array(this.kernel.doubles);
    this.kernel.init(this.state, 0, 0, Number.NEGATIVE_INFINITY);
  }

  /** @internal How a `KeyedLimiter` keeps this window's keys (see {@link KeyedForm}). */
  keyedForm(): KeyedForm {
    return {
      kernel: this.makeKernel(),
      clockBoundMs: this.clockBoundMs,
      clockWhere: this.spec.where,
      windowMs: this.windowMs,
      bucket: undefined,
    };
  }

  /** @internal This limiter as `allOf` drives it, when it is exactly a built-in class. */
  kernelPart(): KernelPart | undefined {
    return exactPart(this, WindowBase.prototype);
  }

  /** @internal */
  protected override makeKernel(): Kernel {
    return new this.spec.Kernel(this.limit, this.windowMs);
  }

  /** Takes `cost` units when they fit and says so; a denial changes nothing. */
  consume(cost?: number): Decision {
    return this.decideAt(this.now(), cost === undefined ? 1 : checkCost(this.where, cost), true);
  }

  /** What `consume(cost)` would answer now, changing nothing. */
  peek(cost?: number): Decision {
    return this.decideAt(this.now(), cost === undefined ? 1 : checkCost(this.where, cost), false);
  }

  /**
   * `consume(cost)` with a {@link Receipt}: the decision, and what the charge went into (a window,
   * a log entry), for a refund through it later; its `refundableUntilMs` says until when.
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    const c = cost === undefined ? 1 : checkCost(`${this.spec.where}.charge`, cost);
    return this.chargeAt(this.now(), c);
  }

  /** Back to the fresh state: every count forgotten. Pending waiters keep waiting. */
  reset(): void {
    this.kernel.init(this.state, 0, 0, Number.NEGATIVE_INFINITY);
    this.receiptEpoch++;
  }

  /** True when the window holds no units now and nobody waits. */
  isIdle(): boolean {
    const idle = this.kernel.isIdle(this.state, 0, 0, this.now());
    return idle && (this.queue === undefined || this.queue.size === 0);
  }

  /**
   * Waits until `cost` fits, first-in, first-out behind earlier waiters, and resolves
   * with the granting decision. See {@link Limiter.wait}. A plain `consume` does not
   * queue: it may take free units while others wait.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    const queue = (this.queue ??= new WaitQueue(this.spec.where, this));
    return jittered(
      options,
      () => queue.wait(cost, options),
      () => this.refund(cost),
    );
  }

  /** @internal Waiters are re-checked. */
  protected override restored(): void {
    this.queue?.wake();
  }

  /** @internal Checks `options` and reads the clock; the returned function applies them. */
  planReconfigure(options: unknown): ApplyReconfigure {
    const spec = this.spec;
    const o = checkReconfigureOptions(spec.where, options, spec.options, spec.hints);
    const now = this.now();
    const next = checkWindowResize(spec.where, o, this, now);
    return () => {
      const kernel = new spec.Kernel(next.limit, next.windowMs);
      this.kernel.retuneSlot(kernel, this.state, 0, 0, now);
      this.kernel.adopt(kernel);
      const self = this as { limit: number; windowMs: number };
      self.limit = next.limit;
      self.windowMs = next.windowMs;
      this.clockBoundMs = next.clockBoundMs;
      this.receiptEpoch++;
      this.queue?.replan();
    };
  }

  /**
   * @internal Reads the clock and keeps the reading (one behind the latest counts as it); one
   * where `windowMs` is below the clock's float step throws and is not kept.
   */
  protected override now(): number {
    // `timeOf`'s steps written out, with no call but the clock on the way: every request
    // takes it, and a small body leaves V8 room to inline the kernel's step too. The clock
    // is called as `readClock` calls it, unbound: not as a method of the limiter.
    const clock = this.clock;
    const t = clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock(this.spec.where, t);
    const n = t > this.seenMs ? t : this.seenMs;
    if (!(n < this.clockBoundMs && n > -this.clockBoundMs)) {
      throw windowClockError(this.spec.where, n, this.windowMs);
    }
    this.seenMs = n;
    return n;
  }

  /** @internal See {@link KernelPart.timeAt}. */
  override timeAt(timeMs: number): number {
    const t = timeMs > this.seenMs ? timeMs : this.seenMs;
    return checkWindowClock(this.spec.where, t, this.windowMs, this.clockBoundMs);
  }

  /** @internal See {@link KernelPart.timeOf}. */
  timeOf(): number {
    const where = this.spec.where;
    const t = readClock(where, this.clock, this.seenMs);
    return checkWindowClock(where, t, this.windowMs, this.clockBoundMs);
  }

  /** @internal See {@link KernelPart.fitsAt}. */
  override fitsAt(now: number, cost: number): boolean {
    if (now > this.seenMs) this.seenMs = now;
    return this.kernel.fitsAt(this.state, 0, 0, now, cost);
  }

  /** @internal See {@link KernelPart.takeAt}. */
  override takeAt(now: number, cost: number): void {
    if (now > this.seenMs) this.seenMs = now;
    if (cost > 0) this.kernel.takeAt(this.state, 0, 0, now, cost);
  }

  /** @internal `consume` (`take` true) or `peek` of a checked `cost` at `now` (a checked time). */
  override decideAt(now: number, cost: number, take: boolean): Decision {
    if (now > this.seenMs) this.seenMs = now;
    return this.kernel.decideAt(this.state, 0, 0, now, cost, take);
  }

  /** @internal `charge` of a checked `cost` at `now`: the receipt keeps the kernel's mark. */
  chargeAt(now: number, cost: number): ChargeReceipt {
    const decision = this.decideAt(now, cost, true);
    if (!decision.allowed || cost === 0) return deniedReceipt(decision, undefined, now, this);
    const end = this.kernel.markReceipt(this.state, 0, 0, now, MARKS, 0);
    const mark = MARKS[0]!;
    const epoch = this.receiptEpoch;
    return new ChargeReceipt(decision, undefined, cost, now, end, this, epoch, mark, 0, undefined);
  }

  /** @internal See {@link KernelPart.refundAt}: by the receipt's mark, or the kernel's rule. */
  override refundAt(now: number, units: number, receipt: ChargeReceipt | undefined): number {
    if (now > this.seenMs) this.seenMs = now;
    if (!(units > 0)) return 0;
    const st = this.state;
    if (receipt === undefined) {
      this.kernel.refundAt(st, 0, 0, now, units, GIVEN, 0);
    } else {
      if (receipt.epoch !== this.receiptEpoch) return 0;
      MARKS[0] = receipt.a;
      ASKED[0] = units;
      this.kernel.refundMarkedAt(st, 0, 0, now, MARKS, ASKED, 0, GIVEN, 0);
      receipt.refunded += GIVEN[0]!;
    }
    const given = GIVEN[0]!;
    if (given > 0) this.queue?.wake();
    return given;
  }
}

/** A limiter of its own has no byte bound: its kernel's growth is never refused. */
const UNBOUNDED = {
  addBytes(): void {},
  reserve(): boolean {
    return true;
  },
};
