import type { RequiredOptions } from "./errors.js";
import type { ReserveOptions, WaitOptions } from "./limiter.js";

/**
 * The option names each constructor and method accepts, as runtime lists for
 * `checkOptionNames`, with the hints for names users bring from other libraries. @module
 */

/** The option names not listed in `N`: `never` when the list covers the interface `T`. */
type Unlisted<T, N extends readonly PropertyKey[]> = Exclude<keyof T, N[number]>;

/**
 * Lists the option names of the interface `T`, checked at compile time both ways: a name
 * that is not an option of `T` is a type error, and so is an option of `T` missing from the
 * list (the error names it as `unlisted`). So an option added to an interface cannot be
 * forgotten in its constructor's unknown-option check.
 * @example
 * const TOKEN_BUCKET_OPTIONS = optionNames<TokenBucketOptions>()(["capacity", "refillPerSecond", "clock"])
 */
export function optionNames<T extends object>() {
  return <const N extends readonly (keyof T & string)[]>(
    names: N & ([Unlisted<T, N>] extends [never] ? unknown : { readonly unlisted: Unlisted<T, N> }),
  ): readonly string[] => names;
}

/** `use "name"` plus an optional reason, for a hint. */
const use = (name: string, why = "") => `use ${JSON.stringify(name)}${why}`;

/** Hints for rate-limiter-flexible's lockout, `keyPrefix` and `execEvenly`; `family` is "Redis" or "". */
function flexibleHints(family: string): Readonly<Record<string, string>> {
  const lockout = `a lockout is a block, not a limiter option: ${family === "" ? "keyed.block(key, ms) on a KeyedLimiter" : "limiter.block(key, ms)"}, or blockDurationMs on rateLimit (blocks a client at its first denial)`;
  const prefix =
    "keys are the strings you pass to KeyedLimiter.allow(key): prefix them yourself (a tollgate/redis limiter takes prefix)";
  // rate-limiter-flexible's block durations are seconds; tollgate's, milliseconds.
  const seconds = `${lockout}; block takes milliseconds (seconds x 1000)`;
  return {
    blockDuration: seconds,
    blockDurationMs: lockout,
    inMemoryBlockOnConsumed: lockout,
    inMemoryBlockDuration: seconds,
    keyPrefix: family === "" ? prefix : use("prefix"),
    execEvenly: "a LeakyBucket with wait() spaces requests evenly",
  };
}

/**
 * Hints for the bucket algorithms (`TokenBucket`, `LeakyBucket` and their Redis twins):
 * the names of express-rate-limit, rate-limiter-flexible, `limiter` and Go's `rate`.
 * @param rate The class's rate option, `refillPerSecond` or `leakPerSecond`.
 * @param other The other bucket's rate option, a likely mix-up.
 */
export function bucketHints(
  where: string,
  rate: "refillPerSecond" | "leakPerSecond",
  other: "refillPerSecond" | "leakPerSecond",
): Readonly<Record<string, string>> {
  const family = where.startsWith("Redis") ? "Redis" : "";
  const perSecond = use(rate, " (units per second)");
  const size = use("capacity", ", the most units at once");
  const noWindow = `${where} has no window: "capacity" units, refilled at "${rate}" per second; for a window use ${family}FixedWindow or ${family}SlidingWindowCounter`;
  return {
    max: size,
    limit: size,
    points: size,
    burst: size,
    bucketSize: size,
    size,
    rate: perSecond,
    refillRate: perSecond,
    leakRate: perSecond,
    tokensPerInterval: `${perSecond}: tokensPerInterval / interval in seconds`,
    interval: `${perSecond}: tokensPerInterval / interval in seconds`,
    tokensPerSecond: perSecond,
    [other]: `${use(rate)}: ${other} is the other bucket's`,
    [rate.replace("Second", "Ms")]: use(rate, " (units per second: per millisecond x 1000)"),
    [rate.replace("Second", "Minute")]: use(rate, " (units per second: per minute / 60)"),
    windowMs: noWindow,
    duration: noWindow,
    ...flexibleHints(family),
  };
}

/** Hints for `FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter` and their Redis twins. */
export function windowHints(where: string): Readonly<Record<string, string>> {
  const limit = use("limit", ", the most units per window");
  const window = use("windowMs", " (milliseconds)");
  const family = where.startsWith("Redis") ? "Redis" : "";
  const noRate = `${where} has no rate: "limit" units per "windowMs"; for a rate use ${family}TokenBucket`;
  return {
    max: limit,
    points: limit,
    capacity: limit,
    requests: limit,
    duration: use("windowMs", " (milliseconds; rate-limiter-flexible's duration is seconds)"),
    windowSeconds: use("windowMs", " (milliseconds: seconds x 1000)"),
    windowSec: use("windowMs", " (milliseconds: seconds x 1000)"),
    windowMinutes: use("windowMs", " (milliseconds: minutes x 60_000)"),
    window,
    windowSize: window,
    interval: window,
    period: window,
    rate: noRate,
    refillPerSecond: noRate,
    leakPerSecond: noRate,
    ...flexibleHints(family),
  };
}

/**
 * The required options of `where`, the names of `example` (and `client` first for a Redis
 * twin), with the one-line call a missing one is shown: `new Where({ capacity: 10, ... })`.
 */
function required(where: string, example: Readonly<Record<string, string>>): RequiredOptions {
  const all = where.startsWith("Redis") ? { client: "fromIoredis(redis)", ...example } : example;
  const given = Object.entries(all).map(([name, value]) => `${name}: ${value}`);
  return { names: Object.keys(all), example: `new ${where}({ ${given.join(", ")} })` };
}

/**
 * The required options of a bucket class (`TokenBucket`, `LeakyBucket` and their Redis
 * twins, which also need `client`), with the one-line example a missing one is shown.
 * @param rate The class's rate option, `refillPerSecond` or `leakPerSecond`.
 */
export function bucketRequired(
  where: string,
  rate: "refillPerSecond" | "leakPerSecond",
): RequiredOptions {
  return required(where, { capacity: "10", [rate]: "5" });
}

/** The required options of a window class, as {@link bucketRequired}. */
export function windowRequired(where: string): RequiredOptions {
  return required(where, { limit: "100", windowMs: "60_000" });
}

/** Names of {@link WaitOptions}. */
export const WAIT_OPTIONS = optionNames<WaitOptions>()(["signal", "maxWaitMs", "jitterMs"]);
/** Names of {@link ReserveOptions}. */
export const RESERVE_OPTIONS = optionNames<ReserveOptions>()(["maxWaitMs"]);

const MAX_WAIT = use("maxWaitMs", " (milliseconds)");
/** Hints for {@link WaitOptions}. */
export const WAIT_HINTS: Readonly<Record<string, string>> = {
  jitter: use("jitterMs", " (milliseconds)"),
  maxWait: MAX_WAIT,
  timeout: MAX_WAIT,
  timeoutMs: MAX_WAIT,
  abortSignal: use("signal"),
};
/** Hints for {@link ReserveOptions}. */
export const RESERVE_HINTS: Readonly<Record<string, string>> = {
  ...WAIT_HINTS,
  signal: "reserve takes no signal: call cancel() on the reservation instead",
};
