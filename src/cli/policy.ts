import {
  type AlgorithmDescriptor,
  type AlgorithmId,
  CATALOG,
  descriptorOf,
  type Measure,
} from "../algorithms/catalog.js";
import type { Clock } from "../core/limiter.js";
import type { CloneableLimiter } from "../keyed/keyed-limiter.js";

/** The algorithms `tollgate replay --algorithm` accepts, in report order: the catalog's ids. */
export const ALGORITHMS: readonly AlgorithmName[] = CATALOG.map((d) => d.id);
/** One of {@link ALGORITHMS}. */
export type AlgorithmName = AlgorithmId;

/** The option names of one descriptor's flags (distributed over the catalog's rows). */
type FlagOptionOf<D> = D extends { readonly cli: { readonly flags: infer F } } ? keyof F : never;
/** A policy option the command line takes: `capacity`, `refillPerSecond`, `limit`, … */
export type PolicyOptionName = FlagOptionOf<(typeof CATALOG)[number]> & string;

/**
 * Policy options as given on the command line: a number when the text reads as one
 * (`10`, `0.5`, `1e3`, `Infinity`, `NaN`), else the text itself, so the constructor
 * reports it in its own words (`got "ten" (string)`). Undefined when not given.
 */
export type RawPolicyOptions = {
  readonly [name in PolicyOptionName]?: number | string | undefined;
};

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

/** The catalog's row of `algorithm`. */
export function descriptor(algorithm: AlgorithmName): AlgorithmDescriptor {
  return descriptorOf(algorithm)!;
}

/** The policy options of `algorithm`, in its flags' order. */
function optionsOf(algorithm: AlgorithmName): readonly PolicyOptionName[] {
  return Object.keys(descriptor(algorithm).cli.flags) as PolicyOptionName[];
}

/** The options of `algorithm` that may be left out (`initialTokens`). */
function optionalOf(algorithm: AlgorithmName): readonly string[] {
  return descriptor(algorithm).cli.optional ?? [];
}

/** The options of `algorithm` that must be given, in its flags' order. */
function requiredOf(algorithm: AlgorithmName): readonly PolicyOptionName[] {
  const optional = optionalOf(algorithm);
  return optionsOf(algorithm).filter((n) => !optional.includes(n));
}

/**
 * Each policy option's flag, in the catalog's order (an option's first appearance). A flag
 * names one option for every algorithm that takes it, which test/catalog.test.ts checks.
 */
export const POLICY_FLAGS: ReadonlyMap<PolicyOptionName, string> = new Map(
  CATALOG.flatMap((d) => Object.entries(d.cli.flags) as [PolicyOptionName, string][]),
);

/** The flags of the options `names`, each followed by `suffix`, joined by `separator`. */
function flagsOf(names: readonly string[], suffix: string, separator: string): string {
  return names.map((n) => `${POLICY_FLAGS.get(n as PolicyOptionName)}${suffix}`).join(separator);
}

/** `--capacity <n> --refill-per-second <n>`: the required flags of `algorithm` with a placeholder. */
export function flagsUsage(algorithm: AlgorithmName, placeholder: string): string {
  return flagsOf(requiredOf(algorithm), ` ${placeholder}`, " ");
}

/** `--initial-tokens <n>`: the flags `algorithm` may be given besides, or "". */
export function optionalFlagsUsage(algorithm: AlgorithmName, placeholder: string): string {
  return flagsOf(optionalOf(algorithm), ` ${placeholder}`, " ");
}

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
  const Class = descriptor(algorithm).Class;
  return new Class({ ...options, clock } as never);
}

/** Validates one algorithm's options by constructing it; the error becomes a UsageError. */
function validated(algorithm: AlgorithmName, raw: RawPolicyOptions, derived: boolean): PolicySpec {
  const options: Record<string, unknown> = {};
  for (const name of optionsOf(algorithm)) if (raw[name] !== undefined) options[name] = raw[name];
  const missing = requiredOf(algorithm).filter((name) => raw[name] === undefined);
  if (missing.length > 0) {
    throw new UsageError(
      `${algorithm} needs ${flagsOf(missing, "", " and ")}\n${algorithm} takes ${flagsUsage(algorithm, "<number>")}`,
    );
  }
  try {
    buildLimiter(algorithm, options);
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) {
      const flags = flagsUsage(algorithm, "<number>");
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
  const own = optionsOf(algorithm);
  for (const [name, flag] of POLICY_FLAGS) {
    if (raw[name] !== undefined && !own.includes(name)) {
      const flags = flagsOf(requiredOf(algorithm), "", " and ");
      const optional = flagsOf(optionalOf(algorithm), "", " ");
      const more = optional === "" ? "" : `, and optionally ${optional}`;
      throw new UsageError(`${flag} does not apply to ${algorithm} (it takes ${flags}${more})`);
    }
  }
  return validated(algorithm, raw, false);
}

/**
 * The policies of `--compare`, one per algorithm in catalog order, equivalent in burst and long-run
 * rate (each algorithm's {@link Measure}): a bucket of `capacity` C refilled (or leaking) at R per
 * second matches windows of `limit` L = C requests per `windowMs` W = C * 1000 / R, and the other
 * way round (C = L, R = L * 1000 / W). Both admit C at once and R per second over time; the windows
 * differ at their edges (a fixed window admits up to 2L across a boundary). Given bucket options
 * (`--capacity` with `--refill-per-second` and/or `--leak-per-second`, one rate standing for both),
 * the windows are derived; given window options, the buckets are; given both, each algorithm takes
 * its own.
 * @throws {UsageError} When neither side is given, or an option is invalid.
 */
export function comparePolicies(raw: RawPolicyOptions): PolicySpec[] {
  const buckets = CATALOG.filter((d) => d.measure.kind === "bucket");
  const windows = CATALOG.filter((d) => d.measure.kind === "window");
  const rates = CATALOG.flatMap((d) => (d.measure.kind === "bucket" ? [d.measure.rate] : []));
  const rate = rates.map((r) => raw[r]).find((value) => value !== undefined);
  const bucketGiven = raw.capacity !== undefined || rate !== undefined;
  const windowGiven = raw.limit !== undefined || raw.windowMs !== undefined;
  if (!bucketGiven && !windowGiven) {
    const flags = (d: AlgorithmDescriptor) =>
      flagsOf(requiredOf(d.id as AlgorithmName), "", " and ");
    throw new UsageError(`--compare needs ${flags(buckets[0]!)}, or ${flags(windows[0]!)}`);
  }
  let bucket: Record<string, number | string | undefined>;
  let window: RawPolicyOptions;
  if (bucketGiven) {
    // A bucket's starting amount goes to the bucket that takes it; the windows have none.
    bucket = {
      capacity: raw.capacity,
      initialTokens: raw.initialTokens,
      initialLevel: raw.initialLevel,
    };
    for (const r of rates) bucket[r] = raw[r] ?? rate;
    for (const d of buckets) validated(d.id, bucket, false);
  }
  if (windowGiven) {
    window = { limit: raw.limit, windowMs: raw.windowMs };
    validated(windows[0]!.id, window, false);
  } else {
    const c = bucket!.capacity as number;
    const r = bucket![rates[0]!] as number;
    window = { limit: c, windowMs: (c * 1000) / r };
  }
  if (!bucketGiven) {
    const l = window.limit as number;
    const perSecond = (l * 1000) / (window.windowMs as number);
    bucket = { capacity: l };
    for (const r of rates) bucket[r] = perSecond;
  }
  return CATALOG.map((d) =>
    d.measure.kind === "bucket"
      ? validated(d.id, bucket!, !bucketGiven)
      : validated(d.id, window, !windowGiven),
  );
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
  const measure = descriptor(spec.algorithm).measure;
  return measure.kind === "bucket" ? o[measure.rate]! * 60 : (o.limit! * 60_000) / o.windowMs!;
}
