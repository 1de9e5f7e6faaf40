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
 * `1n (bigint)`, `undefined`; a class, where an instance was likely meant, by name (with
 * what its constructor takes: `KeyedLimiter` a limiter, the others options).
 */
export function describe(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "bigint") return `${value}n (bigint)`;
  if (typeof value === "string") return `${JSON.stringify(value)} (string)`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "function") {
    if (!/^class\b/.test(Function.prototype.toString.call(value))) return "a function";
    const name = value.name || "(anonymous)";
    // A registry is made from a limiter, not from options.
    const args = name === "KeyedLimiter" ? "new TokenBucket({ ... })" : "{ ... }";
    return `the class ${name}, not an instance (new ${name}(${args}))`;
  }
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${String(value)} (${typeof value})`;
}

/**
 * A computed number of units for a message, without float noise: at most 6 decimals,
 * rounded down so it never says more is there than is (`0.00501405500000196` reads
 * `0.005014`). A number the caller gave is printed as given, not through this.
 */
export function formatUnits(units: number): string {
  if (!Number.isFinite(units)) return String(units);
  // A thousandth of the last digit absorbs the product's own error (0.003 * 1e6 is
  // 2999.9999999999995).
  return String(Math.floor(units * 1e6 + 1e-3) / 1e6 + 0);
}

/**
 * A computed duration in milliseconds for a message, to the microsecond, without float
 * noise (`1499.9999999998` reads `1500`).
 */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  return String(Number(ms.toFixed(3)) + 0);
}

/** True for an object (not null) whose properties `names` are all functions. */
export function hasMethods(value: unknown, ...names: string[]): boolean {
  if (typeof value !== "object" || value === null) return false;
  return names.every((name) => typeof (value as Record<string, unknown>)[name] === "function");
}

/**
 * Checks that `options` is an object and returns it; with `required`, the message ends with
 * its example call.
 * @throws {TypeError} `Where: options must be an object, got …[; for example: …]`
 */
export function checkOptions<T extends object>(
  where: string,
  options: unknown,
  required?: RequiredOptions,
): T {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    const error = mustBe(where, "options", "an object", options, TypeError);
    if (required === undefined) throw error;
    throw new TypeError(`${error.message}; for example: ${exampleCall(required, {})}`);
  }
  return options as T;
}

/**
 * The options a constructor cannot do without, and a one-line call that gives them all, for
 * {@link checkOptionNames}'s message.
 */
export interface RequiredOptions {
  /** Names that must not be undefined, in the order they are documented. */
  readonly names: readonly string[];
  /**
   * A call that gives them all (`new TokenBucket({ capacity: 10, refillPerSecond: 5 })`),
   * or a function making one from the options given (to carry a peer's values over).
   */
  readonly example: string | ((options: Readonly<Record<string, unknown>>) => string);
}

/** The one-line call of `required`, made from the options `given` when it is a function. */
function exampleCall(required: RequiredOptions, given: Readonly<Record<string, unknown>>): string {
  const example = required.example;
  return typeof example === "string" ? example : example(given);
}

/**
 * Checks that `options` names only options of `where`, and, with `required`, that none of
 * those is missing. Every enumerable string key, own or inherited (`for...in`), must be one of
 * `known`. Guards JavaScript callers against a typo (`maxkeys`) or a peer library's name
 * (`max`, `windowMs` on the middleware), which would otherwise be ignored silently. Each
 * unknown name gets a hint: `hints[name]` when given (for a peer's names), else a known
 * option that differs only in case or by at most two edits. A key whose value is
 * `undefined` is checked too: a misspelt option is wrong whatever its value.
 *
 * One message lists every problem, so one round of fixes is enough: one problem on one line,
 * several as a list, then the known options (for an unknown one) and `required.example`
 * (for a missing one).
 * @throws {TypeError} `KeyedLimiter: unknown option "maxkeys" (did you mean "maxKeys"?);
 *   known options: maxKeys, idleTimeoutMs`
 */
export function checkOptionNames(
  where: string,
  options: object,
  known: readonly string[],
  hints: Readonly<Record<string, string>> = {},
  required?: RequiredOptions,
): void {
  const problems: string[] = [];
  // for-in, not Object.keys: an option inherited from a prototype (`Object.create({ max })`)
  // is read by the constructor like an own one, so it is checked like one.
  for (const name in options) {
    if (known.includes(name)) continue;
    const close = closestName(name, known);
    const hint = Object.hasOwn(hints, name)
      ? hints[name]
      : close && `did you mean ${JSON.stringify(close)}?`;
    problems.push(
      `unknown option ${JSON.stringify(name)}${hint === undefined ? "" : ` (${hint})`}`,
    );
  }
  const unknown = problems.length;
  const values = options as Readonly<Record<string, unknown>>;
  const missing = required?.names.filter((name) => values[name] === undefined) ?? [];
  if (missing.length > 0) {
    const names = missing.map((name) => JSON.stringify(name));
    problems.push(
      names.length === 1
        ? `missing option ${names[0]}`
        : `missing options ${names.slice(0, -1).join(", ")} and ${names.at(-1)}`,
    );
  }
  if (problems.length === 0) return;
  const tail: string[] = [];
  if (unknown > 0) tail.push(`known options: ${known.join(", ")}`);
  if (missing.length > 0) {
    tail.push(`for example: ${exampleCall(required!, values)}`);
  }
  throw new TypeError(
    problems.length === 1
      ? `${where}: ${[problems[0], ...tail].join("; ")}`
      : [
          `${where}: ${problems.length} problems with the options:`,
          ...problems.map((line) => `  - ${line}`),
          ...tail.map((line) => `  ${line}`),
        ].join("\n"),
  );
}

/**
 * The name of `known` closest to `name`: one that differs only in case, else by at most two
 * edits (and fewer than half its length), else the one known name a name of 5 or more
 * letters begins (`refillPerSec`), else `undefined`. For "did you mean" hints.
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const d = candidate.toLowerCase() === lower ? 0 : editDistance(lower, candidate.toLowerCase());
    if (d < bestDistance && d < Math.max(candidate.length, name.length) / 2) {
      best = candidate;
      bestDistance = d;
    }
  }
  if (best !== undefined || lower.length < 5) return best;
  const longer = known.filter((k) => k.toLowerCase().startsWith(lower));
  return longer.length === 1 ? longer[0] : undefined;
}

/** Levenshtein distance (insert, delete, substitute), O(a·b); option names are short. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(substitute, (previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * The error of a value out of its range: `Where: name must be <range>, got <value>`, a
 * `TypeError` for a value that is not a number, a `RangeError` for a number (NaN included),
 * unless `Type` says which.
 */
export function mustBe(
  where: string,
  name: string,
  range: string,
  value: unknown,
  Type: new (message: string) => Error = typeof value === "number" ? RangeError : TypeError,
): Error {
  return new Type(`${where}: ${name} must be ${range}, got ${describe(value)}`);
}

/**
 * Checks a numeric option: a number (else `TypeError`), finite and above `min`
 * (or at least `min` when `inclusive`), else `RangeError`. NaN is a `RangeError`.
 * With `fallback`, an undefined value is optional and reads as `fallback`.
 * Message: `TokenBucket: capacity must be a finite number > 0, got 0`.
 */
export function checkNumber(
  where: string,
  name: string,
  value: unknown,
  min: number,
  inclusive: boolean,
  fallback?: number,
): number {
  const finite = typeof value === "number" && Number.isFinite(value);
  if (finite && (inclusive ? value >= min : value > min)) return value;
  if (value === undefined && fallback !== undefined) return fallback;
  throw mustBe(where, name, `a finite number ${inclusive ? ">=" : ">"} ${min}`, value);
}

/**
 * Checks an integer option in `[min, max]`; with `fallback`, an undefined value reads as it.
 * @throws {TypeError} for a non-number; {RangeError} for a non-integer or out of range.
 */
export function checkInteger(
  where: string,
  name: string,
  value: unknown,
  min: number,
  max: number,
  fallback?: number,
): number {
  const integer = typeof value === "number" && Number.isInteger(value);
  if (integer && value >= min && value <= max) return value;
  if (value === undefined && fallback !== undefined) return fallback;
  throw mustBe(where, name, `an integer from ${min} to ${max}`, value);
}

/**
 * Checks an optional clock option (`name`, `clock` by default) and returns it (or `fallback`
 * when undefined).
 * @throws {TypeError} when it is neither undefined nor a function.
 */
export function checkClock<T>(where: string, value: unknown, fallback: T, name = "clock"): T {
  if (value === undefined) return fallback;
  if (typeof value !== "function") {
    throw mustBe(where, name, "a function returning milliseconds", value, TypeError);
  }
  return value as T;
}

/**
 * Checks a cost: undefined means 1; otherwise a finite number >= 0. `call`, for a method
 * that takes options after the cost, is the call shown when an object is given as the cost.
 * @throws {TypeError} for a non-number; {RangeError} for NaN, a negative or infinite cost.
 */
export function checkCost(where: string, cost: unknown, call?: string): number {
  if (cost === undefined) return 1;
  if (typeof cost === "number" && cost >= 0 && cost !== Number.POSITIVE_INFINITY) return cost;
  throw badCost(where, cost, call);
}

/** {@link checkCost}'s error: for options passed where the cost goes, where they go. */
function badCost(where: string, cost: unknown, call: string | undefined): Error {
  const error = mustBe(where, "cost", "a finite number >= 0", cost);
  if (call === undefined || typeof cost !== "object" || cost === null) return error;
  return new TypeError(`${error.message}; the options come after the cost: ${call}`);
}

/**
 * Checks a clock reading: a finite number.
 * @throws {TypeError} for a non-number; {RangeError} for NaN or an infinite reading.
 */
export function badClock(where: string, reading: unknown): Error {
  const message = `${where}: clock must return a finite number of milliseconds, got ${describe(reading)}`;
  return typeof reading === "number" ? new RangeError(message) : new TypeError(message);
}
