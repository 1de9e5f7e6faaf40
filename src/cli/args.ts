import { parseArgs } from "node:util";
import { type AlgorithmDescriptor, algorithmIdOf, CATALOG } from "../algorithms/catalog.js";
import { closestName } from "../core/errors.js";
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
  optionalFlagsUsage,
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

/** An algorithm's name in the help: its id, then its aliases (`leaky-bucket, gcra`). */
const helpName = (d: AlgorithmDescriptor) => [d.id, ...(d.cli.aliases ?? [])].join(", ");

/** The width of the algorithm column in the help: the longest name and two spaces. */
const ALGORITHM_COLUMN = Math.max(...CATALOG.map((d) => helpName(d).length)) + 2;

/**
 * The help's list of algorithms, from the catalog: each id (and aliases) with its policy
 * flags, and its summary on the next line, under the flags.
 */
const ALGORITHM_HELP = CATALOG.map((d: AlgorithmDescriptor) => {
  const optional = optionalFlagsUsage(d.id as AlgorithmName, "<n>");
  return (
    `  ${helpName(d).padEnd(ALGORITHM_COLUMN)}${flagsUsage(d.id as AlgorithmName, "<n>")}\n` +
    `  ${"".padEnd(ALGORITHM_COLUMN)}${d.summary}` +
    (optional === "" ? "" : `\n  ${"".padEnd(ALGORITHM_COLUMN)}optional: ${optional}`)
  );
}).join("\n");

/**
 * The names of `known` that `name` may mean: `exact` (by default `name` itself, when known),
 * else the names it begins, else the closest one ({@link closestName}), else none.
 */
function meant(name: string, known: readonly string[], exact = known.find((n) => n === name)) {
  if (exact !== undefined) return [exact];
  const prefixed = known.filter((n) => n.startsWith(name));
  return prefixed.length > 0 ? prefixed : [closestName(name, known)].filter((n) => n !== undefined);
}

/** "did you mean" for an unknown `--algorithm`: a prefix of ids, a misspelling, or "". */
function algorithmSuggestion(name: string): string {
  const kebab = name
    .replace(/([a-z])([A-Z])/g, "$1-$2")
    .replace(/[_\s]+/g, "-")
    .toLowerCase();
  const names = meant(kebab, ALGORITHMS, algorithmIdOf(kebab));
  return names.length === 0 ? "" : `did you mean ${names.join(" or ")}? `;
}

/** What `tollgate` takes first, for the "did you mean" of an unknown command. */
const COMMANDS = ["replay", "--version", "--help", "version", "help"];

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
                             first line); gzip input is decompressed
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

/** Flags of other tools and near words, and what `tollgate replay` calls them. */
const FLAG_HINTS: Readonly<Record<string, string>> = {
  rate: "--refill-per-second or --leak-per-second",
  burst: "--capacity",
  max: "--limit or --capacity",
  points: "--limit",
  duration: "--window-ms (milliseconds)",
  interval: "--window-ms (milliseconds)",
  period: "--window-ms (milliseconds)",
  file: "the log file as a plain argument, or - for standard input",
  input: "the log file as a plain argument, or - for standard input",
};

/** The `-ms` flag meant by a flag in seconds (`window-seconds`, `rtt-s`), if there is one. */
function inSeconds(kebab: string): string | undefined {
  const stem = /^(.+?)-?(?:s|secs?|seconds?)$/.exec(kebab)?.[1];
  const ms = `${stem}-ms`;
  return stem !== undefined && REPLAY_OPTION_NAMES.includes(ms) ? ms : undefined;
}

/** "did you mean" for an unknown long flag `name` (without `--`), or "" when nothing is close. */
function flagSuggestion(name: string): string {
  const kebab = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const close = meant(kebab, REPLAY_OPTION_NAMES);
  const ms = inSeconds(kebab);
  const hint = Object.hasOwn(FLAG_HINTS, kebab)
    ? FLAG_HINTS[kebab]
    : ms !== undefined
      ? `--${ms} (milliseconds: seconds times 1000)`
      : close.length > 0
        ? close.map((n) => `--${n}`).join(" or ")
        : undefined;
  return hint === undefined ? "" : ` (did you mean ${hint}?)`;
}

/**
 * Refuses every unknown flag at once, each with the flag meant when one is close (a prefix,
 * a misspelling, the API's camelCase name, or another tool's word), before node:util
 * parseArgs would refuse the first in its own words.
 * @throws {UsageError} `unknown option --refill (did you mean --refill-per-second?)`
 */
function checkFlags(args: readonly string[]): void {
  const unknown: string[] = [];
  const shorts = new Map(
    Object.entries(OPTIONS).flatMap(([name, o]) =>
      "short" in o ? [[o.short as string, name] as const] : [],
    ),
  );
  const takesValue = (name: string) =>
    (POLICY_OPTIONS[name] ?? OPTIONS[name as keyof typeof OPTIONS])?.type === "string";
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") break;
    if (!arg.startsWith("-") || arg === "-" || typeof numberOrText(arg) === "number") continue;
    let name: string | undefined;
    if (arg.startsWith("--")) {
      const bare = arg.slice(2).split("=")[0]!;
      if (!REPLAY_OPTION_NAMES.includes(bare)) {
        unknown.push(`--${bare}${flagSuggestion(bare)}`);
        continue;
      }
      if (!arg.includes("=")) name = bare;
    } else {
      const letters = [...arg.slice(1)];
      const bad = letters.filter((c) => !shorts.has(c));
      if (bad.length > 0) {
        unknown.push(...bad.map((c) => `-${c}${/[a-z]/i.test(c) ? flagSuggestion(c) : ""}`));
        continue;
      }
      name = shorts.get(letters.at(-1)!);
    }
    // The value of an option that takes one is not a flag, whatever it looks like.
    if (name !== undefined && takesValue(name) && !(args[i + 1] ?? "-").startsWith("--")) i++;
  }
  if (unknown.length === 0) return;
  throw new UsageError(
    `unknown option${unknown.length === 1 ? "" : "s"} ${unknown.join(", ")}\nsee tollgate replay --help`,
  );
}

/**
 * node:util parseArgs's refusal in this CLI's words (its own texts quote unevenly):
 * a missing value, a value given to a flag that takes none.
 */
function parseArgsMessage(error: Error): string {
  const m =
    /^Option '(?:-\w, )?(--[\w-]+)(?: <value>)?' (argument missing|does not take an argument|argument is ambiguous)/.exec(
      error.message,
    );
  if (m === null) return error.message;
  const flag = m[1]!;
  if (m[2] === "argument missing") return `${flag} needs a value`;
  if (m[2] === "does not take an argument") return `${flag} takes no value`;
  return `${flag} needs a value (one that starts with - is written ${flag}=<value>)`;
}

/**
 * The numeric settings of `tollgate replay`: an integer from `[min, max]`, or (undefined) a
 * finite number >= 0.
 */
const NUMBERS: Readonly<Record<string, readonly [min: number, max: number] | undefined>> = {
  "reorder-window-ms": undefined,
  top: [0, 1_000_000],
  "max-keys": [1, 2 ** 28],
  "max-line-bytes": [1, MAX_LINE_BYTES_LIMIT],
  nodes: [1, 1024],
  "rtt-ms": undefined,
  seed: [0, 2 ** 32 - 1],
  "initial-credit": undefined,
};

/** The options whose value is a number: the policy options and the numeric settings. */
const NUMERIC_OPTIONS: ReadonlySet<string> = new Set(
  [...Object.keys(POLICY_OPTIONS), ...Object.keys(NUMBERS)].map((name) => `--${name}`),
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

/**
 * The value of the numeric setting `--name` ({@link NUMBERS}), undefined when not given.
 * @throws {UsageError} Naming the flag, its range and the text given.
 */
function numberOption(name: string, v: Readonly<Record<string, unknown>>): number | undefined {
  const text = v[name] as string | undefined;
  if (text === undefined) return undefined;
  const value = numberOrText(text);
  const range = NUMBERS[name];
  const ok =
    typeof value === "number" &&
    (range === undefined
      ? value >= 0 && Number.isFinite(value)
      : Number.isInteger(value) && value >= range[0] && value <= range[1]);
  if (ok) return value + 0; // -0 (from `--top -0`) as 0
  const must =
    range === undefined ? "a finite number >= 0" : `an integer from ${range.join(" to ")}`;
  throw new UsageError(`--${name} must be ${must}, got ${JSON.stringify(text)}`);
}

/** `--nodes` and its settings, or undefined; a setting without `--nodes` is an error. */
function nodesOption(v: Readonly<Record<string, string | undefined>>): ReplayCommand["nodes"] {
  if (v["nodes"] === undefined) {
    const setting = ["rtt-ms", "spread", "seed", "initial-credit"].find((f) => v[f] !== undefined);
    if (setting !== undefined) throw new UsageError(`--${setting} applies with --nodes only`);
    return undefined;
  }
  const spread = v["spread"] ?? "random";
  if (!(SPREADS as readonly string[]).includes(spread)) {
    throw new UsageError(
      `unknown --spread ${JSON.stringify(spread)} (one of ${SPREADS.join(", ")})`,
    );
  }
  return {
    nodes: numberOption("nodes", v)!,
    rttMs: numberOption("rtt-ms", v) ?? 1,
    spread: spread as Spread,
    seed: numberOption("seed", v) ?? 1,
    initialCredit: numberOption("initial-credit", v) ?? 1,
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
    const close = command === undefined ? undefined : closestName(command, COMMANDS);
    const hint =
      close === undefined
        ? "the command is replay"
        : close === "replay"
          ? "did you mean replay?"
          : `did you mean ${close}? the command is replay`;
    throw new CommandUsageError(
      `unknown command ${JSON.stringify(command)} (${hint}; see tollgate --help)`,
    );
  }
  checkFlags(rest);
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({
      args: joinNumericValues(rest),
      // The policy options first: a fixed option keeps its definition (see REPLAY_OPTION_NAMES).
      options: { ...POLICY_OPTIONS, ...OPTIONS } as typeof OPTIONS,
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(`${parseArgsMessage(error as Error)}\nsee tollgate replay --help`);
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

  const algorithm = v.algorithm === undefined ? undefined : algorithmIdOf(v.algorithm);
  if (v.algorithm !== undefined && algorithm === undefined) {
    throw new UsageError(
      `unknown algorithm ${JSON.stringify(v.algorithm)} (${algorithmSuggestion(v.algorithm)}one of ${ALGORITHMS.join(", ")})`,
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

  // The settings of --nodes all take a value (a string).
  const nodes = nodesOption(given as Readonly<Record<string, string | undefined>>);
  if (nodes !== undefined && (policies.length !== 1 || policies[0]!.algorithm !== "token-bucket")) {
    throw new UsageError(
      "--nodes simulates LeasedTokenBucket, a token bucket: use it with --algorithm token-bucket and without --compare",
    );
  }
  if (nodes !== undefined && policies[0]!.options["initialTokens"] !== undefined) {
    throw new UsageError(
      "--initial-tokens does not apply with --nodes: LeasedTokenBucket's shared bucket starts full",
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
  const reorderWindowMs = numberOption("reorder-window-ms", v) ?? DEFAULT_REORDER_WINDOW_MS;
  return {
    kind: "replay",
    file: parsed.positionals[0]!,
    policies,
    key,
    format: format as LogFormat | "auto",
    timeField: v["time-field"],
    top: numberOption("top", v) ?? 10,
    svg: v.svg,
    json: v.json ?? false,
    reorderWindowMs,
    maxKeys: numberOption("max-keys", v),
    maxLineBytes: numberOption("max-line-bytes", v) ?? DEFAULT_MAX_LINE_BYTES,
    nodes,
  };
}
