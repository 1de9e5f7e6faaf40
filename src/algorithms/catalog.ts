import type { Limiter } from "../core/limiter.js";
import { FIXED_WINDOW_OPTIONS, FixedWindow } from "./fixed-window.js";
import { LEAKY_BUCKET_OPTIONS, LeakyBucket } from "./leaky-bucket.js";
import { SLIDING_WINDOW_COUNTER_OPTIONS, SlidingWindowCounter } from "./sliding-window-counter.js";
import { SLIDING_WINDOW_LOG_OPTIONS, SlidingWindowLog } from "./sliding-window-log.js";
import { TOKEN_BUCKET_OPTIONS, TokenBucket } from "./token-bucket.js";

/**
 * The catalog of algorithms: one descriptor per algorithm, the one place that lists them.
 * The CLI (`tollgate replay`) reads it for its algorithm names, flags, help and builder;
 * `tollgate/redis` keys its twins by its ids (src/redis/catalog.ts), and `KeyedLimiter` finds
 * a policy's class by its row (src/keyed/layouts/index.ts); test/catalog.test.ts
 * checks it against the package index and each class's option names.
 *
 * Internal: not exported by the package. The algorithm files never import it (it imports
 * them all), so a bundle of one algorithm still leaves the others out.
 * @module
 */

/**
 * How an algorithm's options give a burst and a long-run rate, the two numbers that
 * `tollgate replay --compare` matches across algorithms and its chart's limit line shows:
 * - `bucket`: `capacity` units at once, then the `rate` option's units per second;
 * - `window`: `limit` units per `windowMs` milliseconds.
 */
export type Measure =
  | { readonly kind: "bucket"; readonly rate: "refillPerSecond" | "leakPerSecond" }
  | { readonly kind: "window" };

/** What `tollgate replay` needs of an algorithm beyond its constructor. */
export interface CliDescriptor {
  /**
   * The command-line flag of each constructor option, in the order the help, the error
   * messages and the report list them (`clock` has none: the replay sets it). A flag
   * means the same option for every algorithm that takes it.
   */
  readonly flags: Readonly<Record<string, `--${string}`>>;
  /**
   * The options of `flags` that may be left out (the constructor's default applies), as
   * `initialTokens`; the others are required.
   */
  readonly optional?: readonly string[];
  /** The short column name of the `--compare` report's top-keys table (`token`). */
  readonly column: string;
  /** The chart's colour for this algorithm, distinct in hue and readable on white. */
  readonly color: `#${string}`;
  /**
   * Other names `--algorithm` accepts for it, the field's names for the same algorithm
   * (`gcra`); reports and charts show the id.
   */
  readonly aliases?: readonly string[];
}

/** One algorithm: its names, constructor, options and how the CLI and Redis show it. */
export interface AlgorithmDescriptor {
  /**
   * The id, kebab-case: `--algorithm` of the CLI, the Redis keyspace fingerprint and the
   * algorithm field of the Redis twin (`token-bucket`).
   */
  readonly id: string;
  /** The class's name, as `tollgate` exports it (`TokenBucket`). */
  readonly className: string;
  /**
   * The constructor. Its options are typed per class; callers that build from a
   * descriptor pass checked options (the constructor validates them again).
   */
  readonly Class: new (
    options: never,
  ) => Limiter & { clone(): Limiter };
  /** The option names the constructor accepts (its `checkOptionNames` list), `clock` included. */
  readonly options: readonly string[];
  /** How the options read as a burst and a long-run rate. */
  readonly measure: Measure;
  /**
   * One line for the CLI's help: how the algorithm counts and what to watch out for, in
   * its option names (at most 54 characters, so the help stays within 80 columns).
   */
  readonly summary: string;
  readonly cli: CliDescriptor;
  /** The class name of its twin in `tollgate/redis` (src/redis/catalog.ts holds the class). */
  readonly redis: string;
}

/** The flags of the window algorithms' options. */
const WINDOW_FLAGS = { limit: "--limit", windowMs: "--window-ms" } as const;

/** The algorithms, in the order the CLI's help, `--compare` and its report list them. */
export const CATALOG = [
  {
    id: "token-bucket",
    className: "TokenBucket",
    Class: TokenBucket,
    options: TOKEN_BUCKET_OPTIONS,
    measure: { kind: "bucket", rate: "refillPerSecond" },
    summary: "a burst of capacity, then refillPerSecond on average",
    cli: {
      flags: {
        capacity: "--capacity",
        refillPerSecond: "--refill-per-second",
        initialTokens: "--initial-tokens",
      },
      optional: ["initialTokens"],
      column: "token",
      color: "#1f77b4",
    },
    redis: "RedisTokenBucket",
  },
  {
    id: "leaky-bucket",
    className: "LeakyBucket",
    Class: LeakyBucket,
    options: LEAKY_BUCKET_OPTIONS,
    measure: { kind: "bucket", rate: "leakPerSecond" },
    summary: "admits as token-bucket; wait() spaces requests evenly",
    cli: {
      flags: {
        capacity: "--capacity",
        leakPerSecond: "--leak-per-second",
        initialLevel: "--initial-level",
      },
      optional: ["initialLevel"],
      column: "leaky",
      color: "#17a2b8",
      // As a meter a LeakyBucket is the generic cell rate algorithm (see its class doc).
      aliases: ["gcra"],
    },
    redis: "RedisLeakyBucket",
  },
  {
    id: "fixed-window",
    className: "FixedWindow",
    Class: FixedWindow,
    options: FIXED_WINDOW_OPTIONS,
    measure: { kind: "window" },
    summary: "limit per fixed windowMs; up to 2 * limit at an edge",
    cli: { flags: WINDOW_FLAGS, column: "fixed", color: "#ff7f0e" },
    redis: "RedisFixedWindow",
  },
  {
    id: "sliding-window-log",
    className: "SlidingWindowLog",
    Class: SlidingWindowLog,
    options: SLIDING_WINDOW_LOG_OPTIONS,
    measure: { kind: "window" },
    summary: "limit in any windowMs, exact; memory grows with limit",
    cli: { flags: WINDOW_FLAGS, column: "log", color: "#d62728" },
    redis: "RedisSlidingWindowLog",
  },
  {
    id: "sliding-window-counter",
    className: "SlidingWindowCounter",
    Class: SlidingWindowCounter,
    options: SLIDING_WINDOW_COUNTER_OPTIONS,
    measure: { kind: "window" },
    summary: "limit per windowMs, estimated from two windows' counts",
    cli: { flags: WINDOW_FLAGS, column: "counter", color: "#9467bd" },
    redis: "RedisSlidingWindowCounter",
  },
] as const satisfies readonly AlgorithmDescriptor[];

/** The id of an algorithm in {@link CATALOG}: `token-bucket`, `leaky-bucket`, … */
export type AlgorithmId = (typeof CATALOG)[number]["id"];

/** The descriptor of `id`, or `undefined` for a name that is not an algorithm's id. */
export function descriptorOf(id: string): AlgorithmDescriptor | undefined {
  return CATALOG.find((d) => d.id === id);
}

/** The id `name` stands for: itself when an id, the algorithm's when an alias, else `undefined`. */
export function algorithmIdOf(name: string): AlgorithmId | undefined {
  return CATALOG.find(
    (d: AlgorithmDescriptor) => d.id === name || (d.cli.aliases ?? []).includes(name),
  )?.id as AlgorithmId | undefined;
}
