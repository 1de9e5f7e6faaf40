import type { Decision } from "./limiter.js";

/**
 * The error `wait` rejects with when a request would have to wait longer than
 * `maxWaitMs`, or forever (a rate of 0, a full leaky-bucket queue).
 * `decision` holds the denying {@link Decision}; nothing was taken.
 */
export class RateLimitError extends Error {
  override readonly name = "RateLimitError";
  /** The denying decision: `retryAfterMs` says how long the wait would have been. */
  readonly decision: Decision;

  constructor(message: string, decision: Decision) {
    super(message);
    this.decision = decision;
  }
}

/**
 * Formats a received value for an error message: `0`, `NaN`, `"10" (string)`,
 * `1n (bigint)`, `undefined`.
 */
export function describe(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "bigint") return `${value}n (bigint)`;
  if (typeof value === "string") return `${JSON.stringify(value)} (string)`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "function") return "a function";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${String(value)} (${typeof value})`;
}

/**
 * Checks that `options` is an object (or undefined when `optional`) and returns it.
 * @throws {TypeError} `Where: options must be an object, got …`
 */
export function checkOptions<T extends object>(where: string, options: unknown): T {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new TypeError(`${where}: options must be an object, got ${describe(options)}`);
  }
  return options as T;
}

/**
 * Checks a numeric option: a number (else `TypeError`), finite and above `min`
 * (or at least `min` when `inclusive`), else `RangeError`. NaN is a `RangeError`.
 * Message: `TokenBucket: capacity must be a finite number > 0, got 0`.
 */
export function checkNumber(
  where: string,
  name: string,
  value: unknown,
  min: number,
  inclusive: boolean,
): number {
  const range = `a finite number ${inclusive ? ">=" : ">"} ${min}`;
  if (typeof value !== "number") {
    throw new TypeError(`${where}: ${name} must be ${range}, got ${describe(value)}`);
  }
  if (!Number.isFinite(value) || (inclusive ? value < min : value <= min)) {
    throw new RangeError(`${where}: ${name} must be ${range}, got ${describe(value)}`);
  }
  return value;
}

/**
 * Checks an integer option in `[min, max]`.
 * @throws {TypeError} for a non-number; {RangeError} for a non-integer or out of range.
 */
export function checkInteger(
  where: string,
  name: string,
  value: unknown,
  min: number,
  max: number,
): number {
  const range = `an integer from ${min} to ${max}`;
  if (typeof value !== "number") {
    throw new TypeError(`${where}: ${name} must be ${range}, got ${describe(value)}`);
  }
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${where}: ${name} must be ${range}, got ${describe(value)}`);
  }
  return value;
}

/**
 * Checks an optional clock option and returns it (or `fallback` when undefined).
 * @throws {TypeError} when it is neither undefined nor a function.
 */
export function checkClock<T>(where: string, value: unknown, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== "function") {
    throw new TypeError(
      `${where}: clock must be a function returning milliseconds, got ${describe(value)}`,
    );
  }
  return value as T;
}

/**
 * Checks a cost: undefined means 1; otherwise a finite number >= 0.
 * @throws {TypeError} for a non-number; {RangeError} for NaN, a negative or infinite cost.
 */
export function checkCost(where: string, cost: unknown): number {
  if (cost === undefined) return 1;
  if (typeof cost !== "number") {
    throw new TypeError(`${where}: cost must be a finite number >= 0, got ${describe(cost)}`);
  }
  if (!(cost >= 0) || cost === Number.POSITIVE_INFINITY) {
    throw new RangeError(`${where}: cost must be a finite number >= 0, got ${describe(cost)}`);
  }
  return cost;
}

/**
 * Checks a clock reading: a finite number.
 * @throws {TypeError} for a non-number; {RangeError} for NaN or an infinite reading.
 */
export function badClock(where: string, reading: unknown): Error {
  const message = `${where}: clock must return a finite number of milliseconds, got ${describe(reading)}`;
  return typeof reading === "number" ? new RangeError(message) : new TypeError(message);
}
