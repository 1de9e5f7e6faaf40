import { describe, expect, test } from "vitest";
import { HELP, joinNumericValues, parseCommand, type ReplayCommand } from "../../src/cli/args.js";
import { numberOrText, UsageError } from "../../src/cli/policy.js";

const replay = (...args: string[]) =>
  parseCommand(["replay", "access.log", ...args]) as ReplayCommand;

describe("parseCommand", () => {
  test("a token-bucket replay with defaults", () => {
    expect(
      replay("--algorithm", "token-bucket", "--capacity", "10", "--refill-per-second", "1"),
    ).toEqual({
      kind: "replay",
      file: "access.log",
      policies: [
        {
          algorithm: "token-bucket",
          options: { capacity: 10, refillPerSecond: 1 },
          derived: false,
        },
      ],
      key: "ip",
      format: "auto",
      timeField: undefined,
      top: 10,
      svg: undefined,
      json: false,
      reorderWindowMs: 60_000,
      maxKeys: undefined,
      maxLineBytes: 1_048_576,
    });
  });

  test("every option", () => {
    const c = parseCommand([
      "replay",
      "-",
      "-a",
      "sliding-window-counter",
      "--limit",
      "100",
      "--window-ms",
      "60000",
      "--key",
      "api_key",
      "--format",
      "jsonl",
      "--time-field",
      "start",
      "--top",
      "3",
      "--svg",
      "out.svg",
      "--json",
      "--reorder-window-ms",
      "5000",
      "--max-keys",
      "1000",
      "--max-line-bytes",
      "4096",
    ]);
    expect(c).toMatchObject({
      file: "-",
      policies: [
        { algorithm: "sliding-window-counter", options: { limit: 100, windowMs: 60_000 } },
      ],
      key: { field: "api_key" },
      format: "jsonl",
      timeField: "start",
      top: 3,
      svg: "out.svg",
      json: true,
      reorderWindowMs: 5000,
      maxKeys: 1000,
      maxLineBytes: 4096,
    });
  });

  test("--compare puts the --algorithm first (the one charted)", () => {
    const c = replay(
      "--compare",
      "--algorithm",
      "fixed-window",
      "--limit",
      "10",
      "--window-ms",
      "10000",
    );
    expect(c.policies.map((p) => [p.algorithm, p.options, p.derived])).toEqual([
      ["fixed-window", { limit: 10, windowMs: 10_000 }, false],
      ["token-bucket", { capacity: 10, refillPerSecond: 1 }, true],
      ["leaky-bucket", { capacity: 10, leakPerSecond: 1 }, true],
      ["sliding-window-log", { limit: 10, windowMs: 10_000 }, false],
      ["sliding-window-counter", { limit: 10, windowMs: 10_000 }, false],
    ]);
  });

  test("--compare with both sides given takes each as given", () => {
    const c = replay(
      "--compare",
      "--capacity",
      "5",
      "--leak-per-second",
      "2",
      "--limit",
      "7",
      "--window-ms",
      "1000",
    );
    expect(c.policies.map((p) => p.options)).toEqual([
      { capacity: 5, refillPerSecond: 2 },
      { capacity: 5, leakPerSecond: 2 },
      { limit: 7, windowMs: 1000 },
      { limit: 7, windowMs: 1000 },
      { limit: 7, windowMs: 1000 },
    ]);
    expect(c.policies.every((p) => !p.derived)).toBe(true);
  });

  test.each([
    { name: "--help", argv: ["--help"] },
    { name: "-h", argv: ["-h"] },
    { name: "help", argv: ["help"] },
    { name: "replay --help", argv: ["replay", "--help"] },
  ])("$name prints the help", ({ argv }) => {
    expect(parseCommand(argv)).toEqual({ kind: "help", text: HELP });
  });

  // Regression: `tollgate --version` said `unknown command "--version"`.
  test.each([
    { name: "--version", argv: ["--version"] },
    { name: "-v", argv: ["-v"] },
    { name: "version", argv: ["version"] },
    { name: "replay --version", argv: ["replay", "--version"] },
    { name: "replay -v with other options", argv: ["replay", "a.log", "-a", "gcra", "-v"] },
  ])("$name asks for the version", ({ argv }) => {
    expect(parseCommand(argv)).toEqual({ kind: "version" });
  });

  test("the help mentions --version", () => {
    expect(HELP).toContain("tollgate --version | --help\n");
    expect(HELP).toMatch(/\n {2}-v, --version +print the version of tollgate/);
  });

  // Invalid policy options: the constructors' own messages, then how to call the algorithm.
  test.each([
    {
      name: "capacity 0",
      args: ["-a", "token-bucket", "--capacity", "0", "--refill-per-second", "1"],
      message:
        "TokenBucket: capacity must be a finite number > 0, got 0\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
    },
    {
      name: "capacity not a number",
      args: ["-a", "token-bucket", "--capacity", "ten", "--refill-per-second", "1"],
      message:
        'TokenBucket: capacity must be a finite number > 0, got "ten" (string)\ntoken-bucket takes --capacity <number> --refill-per-second <number>',
    },
    {
      name: "missing rate",
      args: ["-a", "token-bucket", "--capacity", "10"],
      message:
        "token-bucket needs --refill-per-second\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
    },
    {
      name: "negative leak",
      args: ["-a", "leaky-bucket", "--capacity", "10", "--leak-per-second=-1"],
      message:
        "LeakyBucket: leakPerSecond must be a finite number >= 0, got -1\nleaky-bucket takes --capacity <number> --leak-per-second <number>",
    },
    {
      name: "infinite window",
      args: ["-a", "fixed-window", "--limit", "10", "--window-ms", "Infinity"],
      message:
        "FixedWindow: windowMs must be a finite number > 0, got Infinity\nfixed-window takes --limit <number> --window-ms <number>",
    },
    {
      name: "NaN limit",
      args: ["-a", "sliding-window-log", "--limit", "NaN", "--window-ms", "1000"],
      message:
        "SlidingWindowLog: limit must be a finite number > 0, got NaN\nsliding-window-log takes --limit <number> --window-ms <number>",
    },
    {
      name: "--compare from a zero rate (windowMs would be infinite)",
      args: ["--compare", "--capacity", "10", "--refill-per-second", "0"],
      message:
        "FixedWindow: windowMs must be a finite number > 0, got Infinity (derived for --compare, see --help)\nfixed-window takes --limit <number> --window-ms <number>",
    },
    {
      name: "an option of another algorithm",
      args: ["-a", "token-bucket", "--capacity", "10", "--refill-per-second", "1", "--limit", "5"],
      message:
        "--limit does not apply to token-bucket (it takes --capacity and --refill-per-second, and optionally --initial-tokens)",
    },
    {
      name: "--compare without options",
      args: ["--compare"],
      message: "--compare needs --capacity and --refill-per-second, or --limit and --window-ms",
    },
    {
      name: "no algorithm",
      args: [],
      message:
        "missing --algorithm (one of token-bucket, leaky-bucket, fixed-window, sliding-window-log, sliding-window-counter), or --compare",
    },
    {
      name: "unknown algorithm",
      args: ["-a", "gcr"],
      message:
        'unknown algorithm "gcr" (one of token-bucket, leaky-bucket, fixed-window, sliding-window-log, sliding-window-counter)',
    },
    {
      name: "unknown format",
      args: ["-a", "fixed-window", "--limit", "1", "--window-ms", "1", "--format", "w3c"],
      message: 'unknown format "w3c" (combined, common or jsonl)',
    },
    {
      name: "a JSON field key on CLF",
      args: [
        "-a",
        "fixed-window",
        "--limit",
        "1",
        "--window-ms",
        "1",
        "--format",
        "combined",
        "--key",
        "api_key",
      ],
      message:
        '--key "api_key": combined lines have no named fields; the key is one of ip, ip24, ip64, user (a field name applies to --format jsonl only)',
    },
    {
      name: "--time-field on CLF",
      args: [
        "-a",
        "fixed-window",
        "--limit",
        "1",
        "--window-ms",
        "1",
        "--format",
        "common",
        "--time-field",
        "t",
      ],
      message: "--time-field applies to --format jsonl only",
    },
    {
      name: "negative reorder window",
      args: ["-a", "fixed-window", "--limit", "1", "--window-ms", "1", "--reorder-window-ms=-5"],
      message: '--reorder-window-ms must be a finite number >= 0, got "-5"',
    },
    {
      name: "fractional --top",
      args: ["-a", "fixed-window", "--limit", "1", "--window-ms", "1", "--top", "2.5"],
      message: '--top must be an integer from 0 to 1000000, got "2.5"',
    },
    {
      name: "--max-keys 0",
      args: ["-a", "fixed-window", "--limit", "1", "--window-ms", "1", "--max-keys", "0"],
      message: '--max-keys must be an integer from 1 to 268435456, got "0"',
    },
    {
      name: "--max-line-bytes 0",
      args: ["-a", "fixed-window", "--limit", "1", "--window-ms", "1", "--max-line-bytes", "0"],
      message: '--max-line-bytes must be an integer from 1 to 268435456, got "0"',
    },
    {
      name: "--max-line-bytes above 256 MiB",
      args: [
        "-a",
        "fixed-window",
        "--limit",
        "1",
        "--window-ms",
        "1",
        "--max-line-bytes=268435457",
      ],
      message: '--max-line-bytes must be an integer from 1 to 268435456, got "268435457"',
    },
  ])("$name", ({ args, message }) => {
    expect(() => replay(...args)).toThrow(UsageError);
    expect(() => replay(...args)).toThrow(message);
  });

  test.each([
    { name: "no command", argv: [], message: /^missing command\n\nUsage: tollgate replay/ },
    {
      name: "unknown command",
      argv: ["simulate"],
      message: /^unknown command "simulate" \(the command is replay; see tollgate --help\)$/,
    },
    {
      name: "regression: a misspelt --version got no suggestion",
      argv: ["--versoin"],
      message:
        /^unknown command "--versoin" \(did you mean --version\? the command is replay; see tollgate --help\)$/,
    },
    {
      name: "a misspelt replay",
      argv: ["reply", "a.log"],
      message: /^unknown command "reply" \(did you mean replay\?; see tollgate --help\)$/,
    },
    {
      name: "a misspelt version, without dashes",
      argv: ["versoin"],
      message:
        /^unknown command "versoin" \(did you mean version\? the command is replay; see tollgate --help\)$/,
    },
    { name: "no file", argv: ["replay", "-a", "token-bucket"], message: /^missing the log file/ },
    {
      name: "two files",
      argv: ["replay", "a.log", "b.log"],
      message: /^one log file expected, got 2: a.log b.log$/,
    },
    {
      name: "unknown option",
      argv: ["replay", "a.log", "--rate", "5"],
      message:
        /^unknown option --rate \(did you mean --refill-per-second or --leak-per-second\?\)\nsee tollgate replay --help$/,
    },
    {
      name: "a window in seconds",
      argv: ["replay", "a.log", "--window-seconds", "60"],
      message:
        /^unknown option --window-seconds \(did you mean --window-ms \(milliseconds: seconds times 1000\)\?\)\nsee tollgate replay --help$/,
    },
    {
      name: "a round trip in seconds, camelCase",
      argv: ["replay", "a.log", "--rttSec", "1"],
      message:
        /^unknown option --rttSec \(did you mean --rtt-ms \(milliseconds: seconds times 1000\)\?\)/,
    },
    {
      name: "option without value",
      argv: ["replay", "a.log", "--capacity"],
      message: /^--capacity needs a value\nsee tollgate replay --help$/,
    },
  ])("$name", ({ argv, message }) => {
    expect(() => parseCommand(argv)).toThrow(UsageError);
    expect(() => parseCommand(argv)).toThrow(message);
  });
});

// Regression: `--capacity -1` was refused by parseArgs as "argument is ambiguous" while
// `--capacity=-1` reached the constructor; the README promises the constructor's message.
describe("a negative number after a numeric option gets the option's own message", () => {
  const FW = ["-a", "fixed-window", "--limit", "1", "--window-ms", "1"];
  test.each([
    {
      name: "--capacity (token-bucket)",
      before: ["-a", "token-bucket", "--refill-per-second", "1"],
      flag: "--capacity",
      value: "-1",
      message:
        "TokenBucket: capacity must be a finite number > 0, got -1\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
    },
    {
      name: "--refill-per-second",
      before: ["-a", "token-bucket", "--capacity", "1"],
      flag: "--refill-per-second",
      value: "-0.5",
      message:
        "TokenBucket: refillPerSecond must be a finite number >= 0, got -0.5\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
    },
    {
      name: "--capacity (leaky-bucket)",
      before: ["-a", "leaky-bucket", "--leak-per-second", "1"],
      flag: "--capacity",
      value: "-Infinity",
      message:
        "LeakyBucket: capacity must be a finite number > 0, got -Infinity\nleaky-bucket takes --capacity <number> --leak-per-second <number>",
    },
    {
      name: "--leak-per-second",
      before: ["-a", "leaky-bucket", "--capacity", "1"],
      flag: "--leak-per-second",
      value: "-1e3",
      message:
        "LeakyBucket: leakPerSecond must be a finite number >= 0, got -1000\nleaky-bucket takes --capacity <number> --leak-per-second <number>",
    },
    {
      name: "--limit",
      before: ["-a", "fixed-window", "--window-ms", "1"],
      flag: "--limit",
      value: "-1",
      message:
        "FixedWindow: limit must be a finite number > 0, got -1\nfixed-window takes --limit <number> --window-ms <number>",
    },
    {
      name: "--window-ms",
      before: ["-a", "sliding-window-log", "--limit", "1"],
      flag: "--window-ms",
      value: "-.5",
      message:
        "SlidingWindowLog: windowMs must be a finite number > 0, got -0.5\nsliding-window-log takes --limit <number> --window-ms <number>",
    },
    {
      name: "--capacity with --compare",
      before: ["--compare", "--refill-per-second", "1"],
      flag: "--capacity",
      value: "-1",
      message:
        "TokenBucket: capacity must be a finite number > 0, got -1\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
    },
    {
      name: "--reorder-window-ms",
      before: FW,
      flag: "--reorder-window-ms",
      value: "-5",
      message: '--reorder-window-ms must be a finite number >= 0, got "-5"',
    },
    {
      name: "--top",
      before: FW,
      flag: "--top",
      value: "-1",
      message: '--top must be an integer from 0 to 1000000, got "-1"',
    },
    {
      name: "--max-keys",
      before: FW,
      flag: "--max-keys",
      value: "-1",
      message: '--max-keys must be an integer from 1 to 268435456, got "-1"',
    },
    {
      name: "--max-line-bytes",
      before: FW,
      flag: "--max-line-bytes",
      value: "-1",
      message: '--max-line-bytes must be an integer from 1 to 268435456, got "-1"',
    },
  ])(
    "$name: a negative value as the next argument and after =, both",
    ({ before, flag, value, message }) => {
      for (const args of [
        [...before, flag, value],
        [...before, `${flag}=${value}`],
        [flag, value, ...before], // first, not last
      ]) {
        let thrown: unknown;
        try {
          replay(...args);
        } catch (error) {
          thrown = error;
        }
        expect(thrown, args.join(" ")).toBeInstanceOf(UsageError);
        expect((thrown as Error).message, args.join(" ")).toBe(message);
      }
    },
  );

  test("-0, a valid value, is read as 0 (--top -0, --reorder-window-ms -0)", () => {
    const c = replay(...FW, "--top", "-0", "--reorder-window-ms", "-0");
    expect(Object.is(c.top, 0)).toBe(true);
    expect(Object.is(c.reorderWindowMs, 0)).toBe(true);
  });

  test("a numeric option followed by an option still misses its value", () => {
    expect(() => replay("-a", "token-bucket", "--capacity", "--json")).toThrow(
      new UsageError(
        "--capacity needs a value (one that starts with - is written --capacity=<value>)\nsee tollgate replay --help",
      ),
    );
  });
});

describe("joinNumericValues", () => {
  test.each([
    { name: "negative integer", args: ["--capacity", "-1"], want: ["--capacity=-1"] },
    { name: "negative fraction", args: ["--window-ms", "-0.5"], want: ["--window-ms=-0.5"] },
    { name: "-Infinity", args: ["--limit", "-Infinity"], want: ["--limit=-Infinity"] },
    { name: "positive", args: ["--top", "3"], want: ["--top=3"] },
    { name: "already joined", args: ["--capacity=-1", "-2"], want: ["--capacity=-1", "-2"] },
    { name: "not a number", args: ["--capacity", "-x"], want: ["--capacity", "-x"] },
    { name: "an option after", args: ["--capacity", "--json"], want: ["--capacity", "--json"] },
    { name: "last token", args: ["a.log", "--capacity"], want: ["a.log", "--capacity"] },
    { name: "not a numeric option", args: ["--svg", "-1"], want: ["--svg", "-1"] },
    { name: "short option", args: ["-a", "-1"], want: ["-a", "-1"] },
    {
      name: "nothing after --",
      args: ["--limit", "-1", "--", "--capacity", "-1"],
      want: ["--limit=-1", "--", "--capacity", "-1"],
    },
    {
      name: "every numeric option",
      args: [
        ...["--capacity", "--refill-per-second", "--leak-per-second", "--limit", "--window-ms"],
        ...["--reorder-window-ms", "--top", "--max-keys", "--max-line-bytes"],
      ].flatMap((flag) => [flag, "-2"]),
      want: [
        ...["--capacity", "--refill-per-second", "--leak-per-second", "--limit", "--window-ms"],
        ...["--reorder-window-ms", "--top", "--max-keys", "--max-line-bytes"],
      ].map((flag) => `${flag}=-2`),
    },
  ])("$name", ({ args, want }) => {
    expect(joinNumericValues(args)).toEqual(want);
  });
});

describe("numberOrText", () => {
  test.each([
    { text: "10", want: 10 },
    { text: " 0.5 ", want: 0.5 },
    { text: "1e3", want: 1000 },
    { text: "-2", want: -2 },
    { text: ".25", want: 0.25 },
    { text: "Infinity", want: Number.POSITIVE_INFINITY },
    { text: "-Infinity", want: Number.NEGATIVE_INFINITY },
    { text: "0x10", want: "0x10" },
    { text: "", want: "" },
    { text: "10ms", want: "10ms" },
  ])("$text", ({ text, want }) => {
    expect(numberOrText(text)).toBe(want);
  });

  test("NaN and undefined", () => {
    expect(numberOrText("NaN")).toBeNaN();
    expect(numberOrText(undefined)).toBeUndefined();
  });
});
