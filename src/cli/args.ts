import { parseArgs } from "node:util";
import { CATALOG } from "../catalog.js";
import { type KeySpec, parseKeySpec } from "./keys.js";
import { DEFAULT_MAX_LINE_BYTES, MAX_LINE_BYTES_LIMIT } from "./lines.js";
import { type NodesOptions, SPREADS, type Spread } from "./nodes.js";
import { LOG_FORMATS, type LogFormat } from "./parse-log.js";
import {
  ALGORITHMS,
  type AlgorithmName,
  CommandUsageError,
  comparePolicies,
  flagsUsage,
  numberOrText,
  POLICY_FLAGS,
  type PolicySpec,
  type RawPolicyOptions,
  singlePolicy,
  UsageError,
} from "./policy.js";
import { checkKeyForFormat, DEFAULT_REORDER_WINDOW_MS } from "./replay.js";

/** `tollgate replay …`, read and checked. */
export interface ReplayCommand {
  readonly kind: "replay";
  /** A path, or `-` for standard input. */
  readonly file: string;
  /** The policies, the one drawn in the chart first. */
  readonly policies: readonly PolicySpec[];
  readonly key: KeySpec;
  readonly format: LogFormat | "auto";
  readonly timeField: string | undefined;
  readonly top: number;
  readonly svg: string | undefined;
  readonly json: boolean;
  readonly reorderWindowMs: number;
  readonly maxKeys: number | undefined;
  readonly maxLineBytes: number;
  /** `--nodes` and its settings: simulate N processes sharing the limit through leases. */
  readonly nodes: Omit<NodesOptions, "capacity" | "refillPerSecond" | "maxKeys"> | undefined;
}

/** What the command line asks for: a help text, the package version, or a replay. */
export type Command =
  | { readonly kind: "help"; readonly text: string }
  | { readonly kind: "version" }
  | ReplayCommand;

/** The width of the algorithm column in the help: the longest id and two spaces. */
const ALGORITHM_COLUMN = Math.max(...ALGORITHMS.map((id) => id.length)) + 2;

/**
 * The help's list of algorithms, from the catalog: each id with its policy flags, and
 * its summary on the next line, under the flags.
 */
const ALGORITHM_HELP = CATALOG.map(
  (d) =>
    `  ${d.id.padEnd(ALGORITHM_COLUMN)}${flagsUsage(d.id, "<n>")}\n` +
    `  ${"".padEnd(ALGORITHM_COLUMN)}${d.summary}`,
).join("\n");

/** The help of `tollgate` and `tollgate replay`. */
export const HELP = `Usage: tollgate replay <file|-> --algorithm <name> [policy options] [options]
       tollgate --version | --help

Replays an access log through a rate-limit policy, offline, using each line's
timestamp as the clock, and reports who would have been limited, when and how often.

Algorithms and their policy options (the constructors' options):
${ALGORITHM_HELP}

Options:
  -a, --algorithm <name>     the algorithm (with --compare: the one charted first)
      --compare              run them all with equivalent options, one row each:
                             limit = capacity, windowMs = capacity * 1000 / rate,
                             or capacity = limit, rate = limit * 1000 / windowMs
      --key <k>              client key: ip (default), ip24 (IPv4 /24, IPv6 /64),
                             ip64 (IPv6 /64), user, or a field name (jsonl only)
      --format <f>           combined, common or jsonl (default: guessed from the
                             first line); a .gz file is decompressed
      --time-field <name>    jsonl: the time field, ISO 8601 with a zone or epoch ms
                             (default: time, timestamp, @timestamp or ts)
      --reorder-window-ms <n>  how far a line may trail the latest time and still be
                             put in order (default ${DEFAULT_REORDER_WINDOW_MS}); later lines are decided at
                             the latest time (the clock stands still) and counted
      --top <n>              keys listed by denials (default 10, 0 for none)
      --max-keys <n>         keys each registry holds at most (default 1000000)
      --max-line-bytes <n>   longest line read (default ${DEFAULT_MAX_LINE_BYTES}, 1 MiB); a longer
                             line is skipped and reported, memory stays bounded
      --nodes <n>            also simulate n processes sharing the (token-bucket)
                             limit through LeasedTokenBucket leases, against the
                             exact shared bucket: overshoot and utilisation
      --rtt-ms <ms>          --nodes: the simulated store's round trip (default 1)
      --spread <s>           --nodes: random (default, seeded per request),
                             round-robin, or key (sticky: a client on one node)
      --seed <n>             --nodes: seed of the random and key spreads (default 1)
      --initial-credit <n>   --nodes: LeasedTokenBucket's initialCredit (default 1)
      --json                 print the report as JSON
      --svg <file>           write a chart of allowed and denied requests per minute
  -h, --help                 this help
  -v, --version              print the version of tollgate (also: tollgate --version)

Exit codes: 0 done; 2 bad usage, unreadable input or unwritable --svg (checked
before reading), no line parsed (an empty input included), or no request replayed
(no parsed line had a --key); 1 a bug.
Example:
  tollgate replay access.log --algorithm token-bucket --capacity 10 --refill-per-second 1
`;

/** The options of `tollgate replay` other than the policy options (those are the catalog's). */
const OPTIONS = {
  algorithm: { type: "string", short: "a" },
  compare: { type: "boolean" },
  key: { type: "string" },
  format: { type: "string" },
  "time-field": { type: "string" },
  "reorder-window-ms": { type: "string" },
  top: { type: "string" },
  "max-keys": { type: "string" },
  "max-line-bytes": { type: "string" },
  nodes: { type: "string" },
  "rtt-ms": { type: "string" },
  spread: { type: "string" },
  seed: { type: "string" },
  "initial-credit": { type: "string" },
  json: { type: "boolean" },
  svg: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const;

/** The policy options' flags for parseArgs, from the catalog (`capacity`, `refill-per-second`, …). */
const POLICY_OPTIONS: Readonly<Record<string, { readonly type: "string" }>> = Object.fromEntries(
  [...POLICY_FLAGS.values()].map((flag) => [flag.slice(2), { type: "string" }]),
);

/**
 * Every option of `tollgate replay` by its name without `--`, for parseArgs and for
 * test/catalog.test.ts (a policy flag must not take the name of another option).
 */
export const REPLAY_OPTION_NAMES: readonly string[] = [
  ...Object.keys(OPTIONS),
  ...Object.keys(POLICY_OPTIONS),
];

/** The options whose value is a number: the policy options and the numeric settings. */
const NUMERIC_OPTIONS: ReadonlySet<string> = new Set(
  [
    ...Object.keys(POLICY_OPTIONS),
    ...([
      "reorder-window-ms",
      "top",
      "max-keys",
      "max-line-bytes",
      "nodes",
      "rtt-ms",
      "seed",
      "initial-credit",
    ] satisfies readonly (keyof typeof OPTIONS)[]),
  ].map((name) => `--${name}`),
);

/**
 * Joins a numeric option and a following number into one token (`--capacity -1` →
 * `--capacity=-1`), so that a negative value reaches the option's own validation.
 * node:util parseArgs takes a next token starting with `-` for an option and refuses
 * `--capacity -1` as "ambiguous"; `--capacity=-1` it reads as a value. Only tokens that
 * read as a number (numberOrText: `-1`, `-0.5`, `-1e3`, `-Infinity`) are joined, so
 * `--capacity --json` still fails as a missing value; nothing after `--` is touched.
 */
export function joinNumericValues(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      out.push(...args.slice(i));
      break;
    }
    const next = args[i + 1];
    if (NUMERIC_OPTIONS.has(arg) && next !== undefined && typeof numberOrText(next) === "number") {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** A whole number from `min` to `max`, or a UsageError naming the flag. */
function integerOption(
  flag: string,
  text: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (text === undefined) return fallback;
  const value = numberOrText(text);
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new UsageError(
      `${flag} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`,
    );
  }
  return value + 0; // -0 (from `--top -0`) as 0
}

/** A finite number >= 0, or a UsageError naming the flag. */
function nonNegativeOption(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = numberOrText(text);
  if (typeof value !== "number" || !(value >= 0) || !Number.isFinite(value)) {
    throw new UsageError(`${flag} must be a finite number >= 0, got ${JSON.stringify(text)}`);
  }
  return value + 0;
}

/** `--nodes` and its settings, or undefined; a setting without `--nodes` is an error. */
function nodesOption(
  v: Readonly<Record<string, string | boolean | undefined>>,
): ReplayCommand["nodes"] {
  const settings = ["rtt-ms", "spread", "seed", "initial-credit"].filter((f) => v[f] !== undefined);
  if (v["nodes"] === undefined) {
    if (settings.length > 0) {
      throw new UsageError(`--${settings[0]} applies with --nodes only`);
    }
    return undefined;
  }
  const spread = (v["spread"] as string | undefined) ?? "random";
  if (!(SPREADS as readonly string[]).includes(spread)) {
    throw new UsageError(
      `unknown --spread ${JSON.stringify(spread)} (one of ${SPREADS.join(", ")})`,
    );
  }
  return {
    nodes: integerOption("--nodes", v["nodes"] as string, 1, 1, 1024),
    rttMs: nonNegativeOption("--rtt-ms", v["rtt-ms"] as string | undefined, 1),
    spread: spread as Spread,
    seed: integerOption("--seed", v["seed"] as string | undefined, 1, 0, 2 ** 32 - 1),
    initialCredit: nonNegativeOption(
      "--initial-credit",
      v["initial-credit"] as string | undefined,
      1,
    ),
  };
}

/**
 * Reads the command line (without `node` and the script).
 * @throws {CommandUsageError} For no command or an unknown one.
 * @throws {UsageError} For anything wrong in a replay command: unknown option, missing file, unknown
 *   algorithm or format, invalid policy option (the constructor's own message).
 */
export function parseCommand(argv: readonly string[]): Command {
  if (argv.length === 0) throw new CommandUsageError(`missing command\n\n${HELP}`);
  const [command, ...rest] = argv;
  if (command === "-h" || command === "--help" || command === "help") {
    return { kind: "help", text: HELP };
  }
  if (command === "-v" || command === "--version" || command === "version") {
    return { kind: "version" };
  }
  if (command !== "replay") {
    throw new CommandUsageError(
      `unknown command ${JSON.stringify(command)} (the command is replay; see tollgate --help)`,
    );
  }
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({
      args: joinNumericValues(rest),
      // The policy options first: a fixed option keeps its definition (no policy flag takes
      // one's name, which test/catalog.test.ts checks).
      options: { ...POLICY_OPTIONS, ...OPTIONS } as typeof OPTIONS,
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nsee tollgate replay --help`);
  }
  const v = parsed.values;
  if (v.help) return { kind: "help", text: HELP };
  if (v.version) return { kind: "version" };
  if (parsed.positionals.length !== 1) {
    throw new UsageError(
      parsed.positionals.length === 0
        ? "missing the log file (a path, or - for standard input)"
        : `one log file expected, got ${parsed.positionals.length}: ${parsed.positionals.join(" ")}`,
    );
  }

  const algorithm = v.algorithm;
  if (algorithm !== undefined && !(ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new UsageError(
      `unknown algorithm ${JSON.stringify(algorithm)} (one of ${ALGORITHMS.join(", ")})`,
    );
  }
  const given = v as Readonly<Record<string, string | boolean | undefined>>;
  const raw: RawPolicyOptions = Object.fromEntries(
    [...POLICY_FLAGS].map(([name, flag]) => [
      name,
      numberOrText(given[flag.slice(2)] as string | undefined),
    ]),
  );
  let policies: PolicySpec[];
  if (v.compare) {
    policies = comparePolicies(raw);
    const first = policies.findIndex((p) => p.algorithm === (algorithm ?? ALGORITHMS[0]));
    policies.unshift(...policies.splice(first, 1));
  } else if (algorithm === undefined) {
    throw new UsageError(`missing --algorithm (one of ${ALGORITHMS.join(", ")}), or --compare`);
  } else {
    policies = [singlePolicy(algorithm as AlgorithmName, raw)];
  }

  const nodes = nodesOption(given);
  if (nodes !== undefined && (policies.length !== 1 || policies[0]!.algorithm !== "token-bucket")) {
    throw new UsageError(
      "--nodes simulates LeasedTokenBucket, a token bucket: use it with --algorithm token-bucket and without --compare",
    );
  }
  const format = v.format ?? "auto";
  if (format !== "auto" && !(LOG_FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`unknown format ${JSON.stringify(format)} (combined, common or jsonl)`);
  }
  if (v["time-field"] !== undefined && format !== "jsonl" && format !== "auto") {
    throw new UsageError("--time-field applies to --format jsonl only");
  }
  const key = parseKeySpec(v.key ?? "ip");
  if (format !== "auto") checkKeyForFormat(key, format as LogFormat);
  let reorderWindowMs = DEFAULT_REORDER_WINDOW_MS;
  if (v["reorder-window-ms"] !== undefined) {
    const value = numberOrText(v["reorder-window-ms"]);
    if (typeof value !== "number" || !(value >= 0) || !Number.isFinite(value)) {
      throw new UsageError(
        `--reorder-window-ms must be a finite number >= 0, got ${JSON.stringify(v["reorder-window-ms"])}`,
      );
    }
    reorderWindowMs = value + 0; // -0 as 0
  }
  return {
    kind: "replay",
    file: parsed.positionals[0]!,
    policies,
    key,
    format: format as LogFormat | "auto",
    timeField: v["time-field"],
    top: integerOption("--top", v.top, 10, 0, 1_000_000),
    svg: v.svg,
    json: v.json ?? false,
    reorderWindowMs,
    maxKeys:
      v["max-keys"] === undefined
        ? undefined
        : integerOption("--max-keys", v["max-keys"], 0, 1, 2 ** 28),
    maxLineBytes: integerOption(
      "--max-line-bytes",
      v["max-line-bytes"],
      DEFAULT_MAX_LINE_BYTES,
      1,
      MAX_LINE_BYTES_LIMIT,
    ),
    nodes,
  };
}
