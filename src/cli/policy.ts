import { FixedWindow } from "../algorithms/fixed-window.js";
import { LeakyBucket } from "../algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../algorithms/sliding-window-log.js";
import { TokenBucket } from "../algorithms/token-bucket.js";
import type { Clock } from "../limiter.js";
import type { CloneableLimiter } from "../registry.js";

/** The algorithms `tollgate replay --algorithm` accepts, in report order. */
export const ALGORITHMS = [
  "token-bucket",
  "leaky-bucket",
  "fixed-window",
  "sliding-window-log",
  "sliding-window-counter",
] as const;
/** One of {@link ALGORITHMS}. */
export type AlgorithmName = (typeof ALGORITHMS)[number];

/**
 * Policy options as given on the command line: a number when the text reads as one
 * (`10`, `0.5`, `1e3`, `Infinity`, `NaN`), else the text itself, so the constructor
 * reports it in its own words (`got "ten" (string)`). Undefined when not given.
 */
export interface RawPolicyOptions {
  readonly capacity?: number | string | undefined;
  readonly refillPerSecond?: number | string | undefined;
  readonly leakPerSecond?: number | string | undefined;
  readonly limit?: number | string | undefined;
  readonly windowMs?: number | string | undefined;
}

/** One validated policy: an algorithm and the options of its constructor (all numbers). */
export interface PolicySpec {
  readonly algorithm: AlgorithmName;
  /** The constructor options, without `clock`: `{ capacity, refillPerSecond }` etc. */
  readonly options: Readonly<Record<string, number>>;
  /** True when `--compare` computed these options from another algorithm's. */
  readonly derived: boolean;
}

/**
 * A wrong or missing command-line option (exit code 2). The message is the
 * constructor's own when a constructor refused the value.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/**
 * A usage error of `tollgate` itself, before a command was read (no command, an unknown
 * one): reported as `tollgate: …`, not as a replay's.
 */
export class CommandUsageError extends UsageError {}

/** The command-line flags of each algorithm's options. */
const FLAGS: Readonly<Record<AlgorithmName, readonly (keyof RawPolicyOptions)[]>> = {
  "token-bucket": ["capacity", "refillPerSecond"],
  "leaky-bucket": ["capacity", "leakPerSecond"],
  "fixed-window": ["limit", "windowMs"],
  "sliding-window-log": ["limit", "windowMs"],
  "sliding-window-counter": ["limit", "windowMs"],
};

const FLAG_NAMES: Readonly<Record<keyof RawPolicyOptions, string>> = {
  capacity: "--capacity",
  refillPerSecond: "--refill-per-second",
  leakPerSecond: "--leak-per-second",
  limit: "--limit",
  windowMs: "--window-ms",
};

/** Reads an option's text as a number when it is one, else keeps the text. */
export function numberOrText(text: string | undefined): number | string | undefined {
  if (text === undefined) return undefined;
  const t = text.trim();
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t)) return Number(t);
  if (/^[+-]?Infinity$/.test(t)) return Number(t);
  if (t === "NaN") return Number.NaN;
  return text;
}

/**
 * A new limiter of `algorithm` with `options` and `clock`; the constructor validates.
 * @throws {TypeError|RangeError} The constructor's own error for a bad option.
 */
export function buildLimiter(
  algorithm: AlgorithmName,
  options: Readonly<Record<string, unknown>>,
  clock?: Clock,
): CloneableLimiter {
  const o = { ...options, clock } as never;
  switch (algorithm) {
    case "token-bucket":
      return new TokenBucket(o);
    case "leaky-bucket":
      return new LeakyBucket(o);
    case "fixed-window":
      return new FixedWindow(o);
    case "sliding-window-log":
      return new SlidingWindowLog(o);
    case "sliding-window-counter":
      return new SlidingWindowCounter(o);
  }
}

/** Validates one algorithm's options by constructing it; the error becomes a UsageError. */
function validated(algorithm: AlgorithmName, raw: RawPolicyOptions, derived: boolean): PolicySpec {
  const options: Record<string, unknown> = {};
  for (const name of FLAGS[algorithm]) options[name] = raw[name];
  try {
    buildLimiter(algorithm, options);
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) {
      const flags = FLAGS[algorithm].map((n) => `${FLAG_NAMES[n]} <number>`).join(" ");
      const how = derived ? " (derived for --compare, see --help)" : "";
      throw new UsageError(`${error.message}${how}\n${algorithm} takes ${flags}`);
    }
    throw error;
  }
  return { algorithm, options: options as Record<string, number>, derived };
}

/**
 * The policy of one algorithm from the command-line options. Options that belong to
 * other algorithms are refused, so a typo does not pass silently.
 * @throws {UsageError} For a missing, foreign or invalid option.
 */
export function singlePolicy(algorithm: AlgorithmName, raw: RawPolicyOptions): PolicySpec {
  for (const name of Object.keys(FLAG_NAMES) as (keyof RawPolicyOptions)[]) {
    if (raw[name] !== undefined && !FLAGS[algorithm].includes(name)) {
      const flags = FLAGS[algorithm].map((n) => FLAG_NAMES[n]).join(" and ");
      throw new UsageError(
        `${FLAG_NAMES[name]} does not apply to ${algorithm} (it takes ${flags})`,
      );
    }
  }
  return validated(algorithm, raw, false);
}

/**
 * The five policies of `--compare`, equivalent in burst and long-run rate:
 * a bucket of `capacity` C refilled (or leaking) at R per second matches windows of
 * `limit` L = C requests per `windowMs` W = C * 1000 / R, and the other way round
 * (C = L, R = L * 1000 / W). Both admit C at once and R per second over time; the
 * windows differ at their edges (a fixed window admits up to 2L across a boundary).
 * Given bucket options (`--capacity` with `--refill-per-second` and/or
 * `--leak-per-second`, one rate standing for both), the windows are derived; given
 * window options, the buckets are; given both, each algorithm takes its own.
 * @throws {UsageError} When neither side is given, or an option is invalid.
 */
export function comparePolicies(raw: RawPolicyOptions): PolicySpec[] {
  const rate = raw.refillPerSecond ?? raw.leakPerSecond;
  const bucketGiven = raw.capacity !== undefined || rate !== undefined;
  const windowGiven = raw.limit !== undefined || raw.windowMs !== undefined;
  if (!bucketGiven && !windowGiven) {
    throw new UsageError(
      "--compare needs --capacity and --refill-per-second, or --limit and --window-ms",
    );
  }
  let bucket: RawPolicyOptions;
  let window: RawPolicyOptions;
  let bucketDerived = false;
  let windowDerived = false;
  if (bucketGiven) {
    bucket = {
      capacity: raw.capacity,
      refillPerSecond: raw.refillPerSecond ?? rate,
      leakPerSecond: raw.leakPerSecond ?? rate,
    };
    validated("token-bucket", bucket, false);
    validated("leaky-bucket", bucket, false);
  }
  if (windowGiven) {
    window = { limit: raw.limit, windowMs: raw.windowMs };
    validated("fixed-window", window, false);
  } else {
    const c = bucket!.capacity as number;
    const r = bucket!.refillPerSecond as number;
    window = { limit: c, windowMs: (c * 1000) / r };
    windowDerived = true;
  }
  if (!bucketGiven) {
    const l = window.limit as number;
    const perSecond = (l * 1000) / (window.windowMs as number);
    bucket = { capacity: l, refillPerSecond: perSecond, leakPerSecond: perSecond };
    bucketDerived = true;
  }
  return [
    validated("token-bucket", bucket!, bucketDerived),
    validated("leaky-bucket", bucket!, bucketDerived),
    validated("fixed-window", window, windowDerived),
    validated("sliding-window-log", window, windowDerived),
    validated("sliding-window-counter", window, windowDerived),
  ];
}

/** `capacity 10, refillPerSecond 1`: a policy's options, for reports. */
export function describeOptions(spec: PolicySpec): string {
  return Object.entries(spec.options)
    .map(([name, value]) => `${name} ${formatNumber(value)}`)
    .join(", ");
}

/** A number for humans: integers as is, others with up to 6 significant digits. */
export function formatNumber(value: number): string {
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
}

/**
 * The long-run rate a policy admits per client, in requests per minute: the refill or
 * leak rate times 60 for the buckets, `limit * 60_000 / windowMs` for the windows (the
 * burst, `capacity` or `limit` at once, comes on top). The reference line of the chart.
 */
export function limitPerMinute(spec: PolicySpec): number {
  const o = spec.options;
  switch (spec.algorithm) {
    case "token-bucket":
      return o.refillPerSecond! * 60;
    case "leaky-bucket":
      return o.leakPerSecond! * 60;
    default:
      return (o.limit! * 60_000) / o.windowMs!;
  }
}
