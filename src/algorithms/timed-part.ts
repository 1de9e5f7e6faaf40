import type { Decision } from "../limiter.js";
import type { ChargeReceipt } from "../receipt.js";

/**
 * How {@link allOf} drives a built-in limiter at a time it read once, so that it can read
 * every part's clock first (a reading that throws leaves every part as it was), then check
 * every part, then charge every part: all or nothing.
 *
 * Internal: not exported from the package index, and no class shows it in its public
 * types. Each of the five algorithm classes registers its driver for its own prototype
 * from a static block (which may read the class's private state); a subclass, an instance
 * with its own `allow`/`consume`/`peek`, and any other limiter get none and are called
 * through their public methods.
 * @module
 */

/**
 * The four steps of one built-in limiter `L` at a time of the caller's choosing. `nowMs`
 * is always a value `timeOf` returned for this limiter; `cost` is already checked.
 * @internal
 */
export interface TimedPart<L = never> {
  /**
   * The time the limiter would decide at now: its clock read and checked, at least the
   * latest reading it has seen. Keeps nothing (not even the reading).
   * @throws {TypeError} When the reading is not a number.
   * @throws {RangeError} When it is NaN or infinite, or a window's size is below the
   *   clock's float step there: the errors the limiter's own methods throw.
   */
  timeOf(limiter: L): number;
  /** `allow(cost)` at `nowMs`, taking nothing (may move state on as `peek` does). */
  fitsAt(limiter: L, nowMs: number, cost: number): boolean;
  /** Takes `cost` at `nowMs`, where `fitsAt` just said it fits; a cost of 0 takes nothing. */
  takeAt(limiter: L, nowMs: number, cost: number): void;
  /** `consume(cost)` (`take` true) or `peek(cost)` at `nowMs`. */
  decideAt(limiter: L, nowMs: number, cost: number, take: boolean): Decision;
  /** `charge(cost)` at `nowMs`: `consume` with its receipt. */
  chargeAt(limiter: L, nowMs: number, cost: number): ChargeReceipt;
  /**
   * A refund at `nowMs` of `units` (checked; through `receipt`, at most what it still holds),
   * or without a receipt when `receipt` is undefined; returns the units given back.
   */
  refundAt(limiter: L, nowMs: number, units: number, receipt: ChargeReceipt | undefined): number;
  /** False when `refund(cost)` without a receipt refuses (a fixed window). */
  readonly refundsWithoutReceipt: boolean;
}

/** The drivers by the prototype of the class they drive. */
const drivers = new WeakMap<object, TimedPart<object>>();

/**
 * Registers `driver` for the instances whose prototype is exactly `prototype`.
 * @internal
 */
export function defineTimedPart<L extends object>(prototype: L, driver: TimedPart<L>): void {
  drivers.set(prototype, driver as unknown as TimedPart<object>);
}

/** The public methods a driver bypasses: an instance that has its own is not driven. */
const DRIVEN_METHODS = ["allow", "consume", "peek"] as const;

/**
 * The driver of `limiter`: only for an instance of exactly one of the registered classes
 * (not a subclass, whose overrides the driver would bypass) that has no `allow`,
 * `consume` or `peek` of its own (a spy or a patch); otherwise undefined.
 * @internal
 */
export function timedPartOf(limiter: object): TimedPart<object> | undefined {
  const driver = drivers.get(Object.getPrototypeOf(limiter) as object);
  if (driver === undefined) return undefined;
  for (const name of DRIVEN_METHODS) if (Object.hasOwn(limiter, name)) return undefined;
  return driver;
}
