import { spawnSync } from "node:child_process";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { HELP } from "../../src/cli/args.js";
import { run } from "../../src/cli/run.js";
import { accessLogPath, excerptPath, repoRoot } from "../support/access-log.js";
import { bundle } from "../support/bundle.js";
import { readRealLog } from "./real-log.js";

const dir = mkdtempSync(join(tmpdir(), "tollgate-replay-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI in this process; resolves with the exit code and what it wrote. */
async function cli(argv: string[], stdin: string | Buffer = "") {
  const capture = () => {
    const stream = new PassThrough();
    let text = "";
    stream.on("data", (chunk: Buffer) => {
      text += chunk.toString();
    });
    return { stream, text: () => text };
  };
  const out = capture();
  const err = capture();
  const code = await run(argv, {
    stdin: Readable.from([stdin]),
    stdout: out.stream,
    stderr: err.stream,
  });
  return { code, stdout: out.text(), stderr: err.text() };
}

/**
 * The bin, bundled from source once for the file (as tsup bundles dist/cli.js for users;
 * `node --import tsx` compiled every module at each of this file's spawns). Two levels
 * under the root, as src/cli/version.ts is, so it finds the package's version.
 */
const bin = join(repoRoot, "test", "cli", `.bin-${process.pid}.mjs`);
writeFileSync(bin, bundle({ entry: "src/cli/index.ts" }));
afterAll(() => rmSync(bin, { force: true }));

/** Runs the bin in a process of its own, as a user would. */
function spawnCli(args: string[], input?: string) {
  // The timeout only stops a child that hangs (a spawnSync cannot be interrupted otherwise).
  const r = spawnSync(process.execPath, [bin, ...args], {
    cwd: repoRoot,
    encoding: "utf8",
    input,
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const TB = ["--algorithm", "token-bucket", "--capacity", "5", "--refill-per-second", "0.25"];

describe("tollgate bin (spawned: node, src/cli/index.ts bundled)", () => {
  // Regression: /dev/null and an empty pipe exited 0 (see "empty input exits 2" below).
  test.each([
    { name: "/dev/null", args: ["/dev/null"], shown: "/dev/null" },
    { name: "empty stdin", args: ["-"], shown: "-" },
  ])("empty input exits 2 with no line parsed: $name (spawned)", ({ args, shown }) => {
    const r = spawnCli(["replay", ...args, ...TB], "");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`tollgate replay: no line parsed: ${shown} is empty\n`);
  });

  test("a replay of the real log prints the report and exits 0", () => {
    const r = spawnCli(["replay", accessLogPath, ...TB]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    // Expectations from what the parser accepts: real logs hold cut-off lines.
    const log = readRealLog(accessLogPath);
    expect(r.stdout).toContain(
      `lines     ${log.read} read, ${log.accepted.length} parsed, ${log.skipped.length} skipped`,
    );
    for (const s of log.skipped.slice(0, 5)) {
      expect(r.stdout).toContain(`    line ${s.line}: ${s.reason}\n`);
    }
    expect(r.stdout).toMatch(/token-bucket +capacity 5, refillPerSecond 0\.25 +\d+/);
  });

  test("standard input (-) gives the same report as the file", () => {
    const fromFile = spawnCli(["replay", excerptPath, ...TB, "--json"]);
    const fromStdin = spawnCli(["replay", "-", ...TB, "--json"], readFileSync(excerptPath, "utf8"));
    expect(fromStdin.code).toBe(0);
    const a = JSON.parse(fromFile.stdout);
    const b = JSON.parse(fromStdin.stdout);
    expect(b.source).toBe("-");
    expect({ ...b, source: a.source }).toEqual(a);
  });

  // Regression: `tollgate --version` said `unknown command "--version"` (exit 2).
  test.each([
    { name: "--version", args: ["--version"] },
    { name: "-v", args: ["-v"] },
    { name: "replay --version", args: ["replay", "--version"] },
  ])("$name prints the package version and exits 0 (spawned)", ({ args }) => {
    const { name, version } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8"));
    expect(name).toBe("tollgate");
    const r = spawnCli(args);
    expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  test.each([
    { name: "--help", args: ["--help"], code: 0, stdout: /^Usage: tollgate replay/, stderr: /^$/ },
    {
      name: "no arguments",
      args: [],
      code: 2,
      stdout: /^$/,
      stderr: /^tollgate: missing command/,
    },
    {
      name: "unreadable file",
      args: ["replay", "/nonexistent/access.log", ...TB],
      code: 2,
      stdout: /^$/,
      stderr:
        /^tollgate replay: cannot read \/nonexistent\/access\.log: ENOENT: no such file or directory/,
    },
    {
      name: "invalid policy option",
      args: [
        "replay",
        excerptPath,
        "-a",
        "token-bucket",
        "--capacity",
        "0",
        "--refill-per-second",
        "1",
      ],
      code: 2,
      stdout: /^$/,
      stderr: /^tollgate replay: TokenBucket: capacity must be a finite number > 0, got 0\n/,
    },
    {
      // Regression: parseArgs refused `--capacity -1` as "argument is ambiguous".
      name: "negative policy option as the next argument",
      args: [
        "replay",
        excerptPath,
        "-a",
        "token-bucket",
        "--capacity",
        "-1",
        "--refill-per-second",
        "1",
      ],
      code: 2,
      stdout: /^$/,
      stderr:
        /^tollgate replay: TokenBucket: capacity must be a finite number > 0, got -1\ntoken-bucket takes --capacity <number> --refill-per-second <number>\n$/,
    },
  ])("$name exits $code", ({ args, code, stdout, stderr }) => {
    const r = spawnCli(args);
    expect(r.code).toBe(code);
    expect(r.stdout).toMatch(stdout);
    expect(r.stderr).toMatch(stderr);
  });
});

describe("run (in process)", () => {
  test("text report of the excerpt", async () => {
    const r = await cli(["replay", excerptPath, ...TB, "--top", "3"]);
    expect(r.code).toBe(0);
    const text = r.stdout;
    expect(text).toContain("  format combined, key ip\n");
    expect(text).toContain(
      "  time      2015-05-17T10:05:00Z .. 2015-05-17T14:05:56Z (4h 0m 56s)\n",
    );
    expect(text).toContain("  reorder   window 60000 ms: 394 lines put back in order, 0 too late");
    expect(text).toContain("  keys      97 distinct\n");
    expect(text).toMatch(
      / {2}top 3 keys by denials \(token-bucket\)\n {2}key +requests +peak\/min +denied\n/,
    );
  });

  test("regression: --window-ms 60 (seconds meant) replayed without a word", async () => {
    const input = '{"ts":1000,"ip":"1.1.1.1"}\n{"ts":1001,"ip":"1.1.1.1"}\n';
    const short = await cli(
      ["replay", "-", "-a", "fixed-window", "--limit", "10", "--window-ms", "60"],
      input,
    );
    expect(short.code).toBe(0);
    expect(short.stderr).toBe(
      "tollgate replay: note: --window-ms 60 is 60 milliseconds; for 60 seconds, --window-ms 60000\n",
    );
    // A second or more, and options --compare derived, get no note.
    const long = await cli(
      [
        "replay",
        "-",
        "-a",
        "sliding-window-log",
        "--limit",
        "10",
        "--window-ms",
        "1000",
        "--compare",
      ],
      input,
    );
    expect(long.code).toBe(0);
    expect(long.stderr).toBe("");
  });

  test("--compare: one row per algorithm, derived ones marked, a denial column each", async () => {
    const r = await cli([
      "replay",
      excerptPath,
      "--compare",
      "--capacity",
      "5",
      "--refill-per-second",
      "0.1",
    ]);
    expect(r.code).toBe(0);
    for (const row of [
      /token-bucket +capacity 5, refillPerSecond 0\.1 +424 /,
      /leaky-bucket +capacity 5, leakPerSecond 0\.1 +424 /,
      /fixed-window\* +limit 5, windowMs 50000 +424 /,
      /sliding-window-log\* +limit 5, windowMs 50000 +424 /,
      /sliding-window-counter\* +limit 5, windowMs 50000 +424 /,
    ]) {
      expect(r.stdout).toMatch(row);
    }
    expect(r.stdout).toContain("* options derived for --compare");
    expect(r.stdout).toMatch(/key +requests +peak\/min +token +leaky +fixed +log +counter\n/);
  });

  test("--json: the numbers of the text report", async () => {
    const r = await cli([
      "replay",
      excerptPath,
      "-a",
      "fixed-window",
      "--limit",
      "5",
      "--window-ms",
      "60000",
      "--json",
    ]);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({
      source: excerptPath,
      format: "combined",
      key: "ip",
      lines: { read: 424, parsed: 424, skipped: 0, unkeyed: 0, skippedSamples: [] },
      time: { first: "2015-05-17T10:05:00Z", last: "2015-05-17T14:05:56Z", spanMs: 14_456_000 },
      reorder: { windowMs: 60_000, reordered: 394, late: 0 },
      distinctKeys: 97,
    });
    const [result] = json.results;
    expect(result.requests).toBe(424);
    expect(result.allowed + result.denied).toBe(424);
    expect(result.deniedPercent).toBe(Math.round((result.denied * 10_000) / 424) / 100);
    expect(json.top[0].denied).toEqual({ "fixed-window": expect.any(Number) });
  });

  test("--svg writes the chart", async () => {
    const svg = join(dir, "chart.svg");
    const r = await cli(["replay", excerptPath, ...TB, "--svg", svg]);
    expect(r.code).toBe(0);
    const text = readFileSync(svg, "utf8");
    expect(text).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(text).toContain("<title>token-bucket (capacity 5, refillPerSecond 0.25) per ip</title>");
    expect(
      [...text.matchAll(/class="denied" data-algorithm="([\w-]+)"/g)].map((m) => m[1]),
    ).toEqual(["token-bucket"]);
  });

  test("compare svg draws every algorithm (regression: it was the first one's chart)", async () => {
    const one = join(dir, "one.svg");
    const all = join(dir, "all.svg");
    const compare = ["--capacity", "5", "--refill-per-second", "0.1"];
    expect(
      (await cli(["replay", excerptPath, "-a", "token-bucket", ...compare, "--svg", one])).code,
    ).toBe(0);
    expect((await cli(["replay", excerptPath, "--compare", ...compare, "--svg", all])).code).toBe(
      0,
    );
    const text = readFileSync(all, "utf8");
    expect(text).not.toBe(readFileSync(one, "utf8"));
    expect(
      [...text.matchAll(/class="denied" data-algorithm="([\w-]+)"/g)].map((m) => m[1]),
    ).toEqual([
      "token-bucket",
      "leaky-bucket",
      "fixed-window",
      "sliding-window-log",
      "sliding-window-counter",
    ]);
    // Each strip has bars, and the limited clients are drawn with a bar per algorithm.
    for (const part of text.split('class="denied"').slice(1)) {
      expect(part.slice(0, part.indexOf("</g>"))).toMatch(/<rect /);
    }
    expect(text).toContain("Most limited clients: top 10 by token-bucket denials");
    const fills = [...text.matchAll(/class="top-bar"[^>]* fill="(#\w+)"/g)].map((m) => m[1]);
    expect(fills.length).toBeGreaterThanOrEqual(10);
    expect(new Set(fills).size).toBe(5);
    // The policies' long-run rate, 0.1/s = 6/min, is the reference line.
    expect(text).toContain("limit per ip: 6/min long-run (+ burst)");
  });

  test("escape sequences in a user agent or path are escaped in the text report (regression: raw to the terminal)", async () => {
    const ok = (host: string, sec: number) =>
      `${host} - - [17/May/2015:10:05:0${sec} +0000] "GET /\x1b[2J HTTP/1.1" 200 5 "-" "-"`;
    const input = [
      ok("evil\x1b]0;owned\x07", 0),
      ok("evil\x1b]0;owned\x07", 1),
      `192.0.2.1 - - [17/May/2015:10:05:02 +0000] "GET / HTTP/1.1" 200 5 "-" "\x1b[31mred\u202e`,
    ].join("\n");
    const r = await cli(
      ["replay", "-", "-a", "fixed-window", "--limit", "1", "--window-ms", "60000"],
      input,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("  evil\\x1b]0;owned\\x07 ");
    expect(r.stdout).toContain('"-" "\\x1b[31mred\\u{202e}\n');
    for (const c of ["\x1b", "\x07", "\u202e"]) expect(r.stdout).not.toContain(c);
    const json = await cli(
      ["replay", "-", "-a", "fixed-window", "--limit", "1", "--window-ms", "60000", "--json"],
      input,
    );
    expect(JSON.parse(json.stdout).top[0].key).toBe("evil\x1b]0;owned\x07");
  });

  test("--top 0 with --svg: no top list printed, the chart still shows the limited clients", async () => {
    const svg = join(dir, "top0.svg");
    const r = await cli(["replay", excerptPath, ...TB, "--top", "0", "--svg", svg, "--json"]);
    expect(JSON.parse(r.stdout).top).toEqual([]);
    expect(readFileSync(svg, "utf8")).toMatch(/Most limited clients: top \d+ by denials/);
  });

  test("a .gz log is decompressed", async () => {
    const gz = join(dir, "access.log.gz");
    writeFileSync(gz, gzipSync(readFileSync(excerptPath)));
    const plain = await cli(["replay", excerptPath, ...TB, "--json"]);
    const packed = await cli(["replay", gz, ...TB, "--json"]);
    expect(packed.code).toBe(0);
    expect({ ...JSON.parse(packed.stdout), source: excerptPath }).toEqual(JSON.parse(plain.stdout));
  });

  test("regression: gzip without a .gz name was read as text (no line parsed, check --format)", async () => {
    const packedBytes = gzipSync(readFileSync(excerptPath));
    const named = join(dir, "access-gzipped.log");
    writeFileSync(named, packedBytes);
    const plain = JSON.parse((await cli(["replay", excerptPath, ...TB, "--json"])).stdout);
    const file = await cli(["replay", named, ...TB, "--json"]);
    expect(file.code).toBe(0);
    expect({ ...JSON.parse(file.stdout), source: excerptPath }).toEqual(plain);
    const piped = await cli(["replay", "-", ...TB, "--json"], packedBytes);
    expect(piped.code).toBe(0);
    expect({ ...JSON.parse(piped.stdout), source: excerptPath }).toEqual(plain);
  });

  test.each([
    { name: "a directory", file: () => dir, message: "it is a directory" },
    {
      name: "corrupt gzip",
      file: () => {
        const p = join(dir, "corrupt.log.gz");
        writeFileSync(p, "not gzip at all");
        return p;
      },
      message: "incorrect header check",
    },
  ])("$name: exit 2 with the reason", async ({ file, message }) => {
    const path = file();
    const r = await cli(["replay", path, ...TB]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`tollgate replay: cannot read ${path}: ${message}\n`);
  });

  // Regression: a corrupt .gz failed in gunzip but left the file's stream open, and node
  // warned "Closing file descriptor … on garbage collection" (DEP0137).
  test("corrupt gzip leaves no file open", async () => {
    const p = join(dir, "corrupt2.log.gz");
    writeFileSync(p, "not gzip at all, and long enough to be read".repeat(1000));
    const open = () => readdirSync("/proc/self/fd").length;
    await cli(["replay", p, ...TB]); // warm up whatever the first run opens for good
    const before = open();
    for (let i = 0; i < 5; i++) expect((await cli(["replay", p, ...TB])).code).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(open()).toBeLessThanOrEqual(before); // without the fix: one more per run
  });

  test("no line parses: the report, then exit 2 with a hint", async () => {
    const r = await cli(["replay", "-", ...TB, "--format", "common"], "a\nb\nc\n");
    expect(r.code).toBe(2);
    expect(r.stdout).toContain("lines     3 read, 0 parsed, 3 skipped");
    expect(r.stdout).toContain(
      "    line 1: expected `host ident user [time]` at the start\n      a\n",
    );
    expect(r.stderr).toBe(
      "tollgate replay: no line parsed: none of the 3 lines of - reads as common; check --format\n",
    );
  });

  test("progress and timing go to stderr only when it is a terminal", async () => {
    const tty = Object.assign(new PassThrough(), { isTTY: true });
    let text = "";
    tty.on("data", (c: Buffer) => {
      text += c.toString();
    });
    const out = new PassThrough();
    out.resume();
    const code = await run(["replay", excerptPath, ...TB], {
      stdin: Readable.from([]),
      stdout: out,
      stderr: tty,
    });
    expect(code).toBe(0);
    // \r back to the line start, \x1b[K clears what a longer progress line left.
    const CLEAR = "\x1b[K";
    expect(text.startsWith("\rtollgate replay: 424 lines in ")).toBe(true);
    expect(text.endsWith(` s${CLEAR}\n`)).toBe(true);
    expect(text.slice(31, -6)).toMatch(/^\d+\.\d\d$/);
    expect((await cli(["replay", excerptPath, ...TB])).stderr).toBe("");
  });

  // Regression: a jsonl time of 1e16 or 1e308 crashed the report (exit 1, "RangeError:
  // Invalid time value at isoTime"), with and without --json.
  test.each([
    { name: "text", json: [] as string[] },
    { name: "--json", json: ["--json"] },
  ])("out-of-range time does not crash the report ($name)", async ({ json }) => {
    const input = [
      `{"ts":1e16,"ip":"1.1.1.1"}`,
      `{"ts":1000,"ip":"1.1.1.1"}`,
      `{"ts":1e308,"ip":"1.1.1.1"}`,
      `{"ts":-1e16,"ip":"1.1.1.1"}`,
      "",
    ].join("\n");
    const r = await cli(["replay", "-", ...TB, ...json], input);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const reason = "(outside the representable date range, ±8.64e15 ms)";
    if (json.length === 0) {
      expect(r.stdout).toContain("lines     4 read, 1 parsed, 3 skipped");
      expect(r.stdout).toContain(`    line 1: bad time ts=10000000000000000 ${reason}\n`);
      expect(r.stdout).toContain(`    line 3: bad time ts=1e+308 ${reason}\n`);
      expect(r.stdout).toContain("1970-01-01T00:00:01Z .. 1970-01-01T00:00:01Z");
    } else {
      const report = JSON.parse(r.stdout);
      expect(report.lines).toMatchObject({ read: 4, parsed: 1, skipped: 3 });
      expect(report.lines.skippedSamples.map((b: { line: number }) => b.line)).toEqual([1, 3, 4]);
      expect(report.lines.skippedSamples[2].reason).toBe(
        `bad time ts=-10000000000000000 ${reason}`,
      );
    }
  });

  // Regression: an empty input exited 0 with a report of zeros, though --help says exit 2
  // when no line is parsed.
  test("empty input exits 2 with no line parsed: empty stdin", async () => {
    const r = await cli(["replay", "-", ...TB], "");
    expect(r.code).toBe(2);
    expect(r.stdout).toContain("lines     0 read, 0 parsed, 0 skipped");
    expect(r.stderr).toBe("tollgate replay: no line parsed: - is empty\n");
  });

  test("empty input exits 2 with no line parsed: empty file", async () => {
    const file = join(dir, "empty.log");
    writeFileSync(file, "");
    const r = await cli(["replay", file, ...TB, "--json"]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).lines).toMatchObject({ read: 0, parsed: 0 });
    expect(r.stderr).toBe(`tollgate replay: no line parsed: ${file} is empty\n`);
  });

  test("the help states exit 2 when no line is parsed, or no request replayed", () => {
    expect(HELP).toMatch(/no line parsed \(an empty input included\)/);
    expect(HELP).toMatch(/or no request replayed\s+\(no parsed line had a --key\)/);
  });

  test("the chart cannot be written: exit 2", async () => {
    const r = await cli(["replay", excerptPath, ...TB, "--svg", join(dir, "no/such/dir/out.svg")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^tollgate replay: cannot write .*out\.svg: ENOENT/);
  });

  test.each([
    { name: "a closed pipe (| head) ends quietly", code: "EPIPE", exit: 0, stderr: /^$/ },
    {
      name: "any other failure is a bug: exit 1",
      code: undefined,
      exit: 1,
      stderr: /^tollgate: unexpected error: Error: disk full/,
    },
  ])("stdout fails: $name", async ({ code, exit, stderr }) => {
    const stdout = new Writable({
      write(_chunk, _encoding, callback) {
        callback(Object.assign(new Error("disk full"), code === undefined ? {} : { code }));
      },
    });
    stdout.on("error", () => {});
    let errText = "";
    const err = new PassThrough();
    err.on("data", (c: Buffer) => {
      errText += c.toString();
    });
    const result = await run(["replay", excerptPath, ...TB], {
      stdin: Readable.from([]),
      stdout,
      stderr: err,
    });
    expect(result).toBe(exit);
    expect(errText).toMatch(stderr);
  });
});

describe("policy options are the constructors' business", () => {
  // The CLI does no range checks of its own: each value is handed to the algorithm's
  // constructor, and the CLI refuses exactly what the constructor refuses, with its
  // message. (`--window-ms 0.01` with `ts: 1e15` allowed 3 of 3 at --limit 1: a float
  // issue of the window algorithms, not of the CLI, which must pass the value through.)
  let nowMs = 0;
  const clock = () => nowMs;
  const classes = {
    "token-bucket": (a: number, b: number) => new TokenBucket({ capacity: a, refillPerSecond: b }),
    "leaky-bucket": (a: number, b: number) => new LeakyBucket({ capacity: a, leakPerSecond: b }),
    "fixed-window": (a: number, b: number) => new FixedWindow({ limit: a, windowMs: b, clock }),
    "sliding-window-log": (a: number, b: number) =>
      new SlidingWindowLog({ limit: a, windowMs: b, clock }),
    "sliding-window-counter": (a: number, b: number) =>
      new SlidingWindowCounter({ limit: a, windowMs: b, clock }),
  } as const;
  const flags = {
    "token-bucket": ["--capacity", "--refill-per-second"],
    "leaky-bucket": ["--capacity", "--leak-per-second"],
    "fixed-window": ["--limit", "--window-ms"],
    "sliding-window-log": ["--limit", "--window-ms"],
    "sliding-window-counter": ["--limit", "--window-ms"],
  } as const;
  const values = ["0", "-1", "0.01", "1e-300", "1e300", "NaN", "Infinity"];
  const cases = Object.keys(classes).flatMap((algorithm) =>
    values.flatMap((value) => [
      { algorithm, first: value, second: "1" },
      { algorithm, first: "1", second: value },
    ]),
  ) as { algorithm: keyof typeof classes; first: string; second: string }[];

  test.each(cases)(
    "$algorithm $first $second: the CLI refuses iff the limiter does, with its message",
    async ({ algorithm, first, second }) => {
      let message: string | undefined;
      nowMs = 1000; // the line's time: a window limiter may refuse it (below its float step)
      try {
        classes[algorithm](Number(first), Number(second)).allow();
      } catch (error) {
        message = (error as Error).message;
      }
      const [f1, f2] = flags[algorithm];
      const input = `{"ts":1000,"ip":"1.1.1.1"}\n`;
      const r = await cli(
        ["replay", "-", "-a", algorithm, `${f1}=${first}`, `${f2}=${second}`],
        input,
      );
      if (message === undefined) {
        // Nothing but the note a duration under a second gets (seconds meant?).
        expect(r.stderr.replace(/^tollgate replay: note: .*\n/gm, "")).toBe("");
        expect(r.code).toBe(0);
      } else {
        expect(r.code).toBe(2);
        expect(r.stderr.startsWith(`tollgate replay: ${message}\n${algorithm} `)).toBe(true);
      }
    },
  );

  // Since 7f07e4f the window limiters refuse (RangeError) a clock reading where windowMs
  // is below the float step: the CLI then exits 2 with the limiter's message, not 1 with
  // a stack trace; where they decide, the CLI decides as they do.
  test.each(["fixed-window", "sliding-window-log", "sliding-window-counter"] as const)(
    "%s --limit 1 --window-ms 0.01 at ts 1e15: the CLI decides, or refuses, as the limiter does",
    async (algorithm) => {
      const times = [1e15, 1e15, 1e15];
      nowMs = 0;
      const direct = classes[algorithm](1, 0.01);
      let message: string | undefined;
      const expected: boolean[] = [];
      try {
        for (const t of times) {
          nowMs = t;
          expected.push(direct.allow());
        }
      } catch (error) {
        message = (error as Error).message;
      }
      const input = times.map((t) => `{"ts":${t},"ip":"1.1.1.1"}\n`).join("");
      const r = await cli(
        ["replay", "-", "-a", algorithm, "--limit", "1", "--window-ms", "0.01", "--json"],
        input,
      );
      if (message !== undefined) {
        expect(r.code).toBe(2);
        expect(r.stderr).toBe(
          `tollgate replay: ${message}\n${algorithm} (limit 1, windowMs 0.01) cannot decide at the log time 1000000000000000 ms; use a larger --window-ms\n`,
        );
      } else {
        expect(r.code).toBe(0);
        const allowed = expected.filter(Boolean).length;
        expect(JSON.parse(r.stdout).results[0]).toMatchObject({
          allowed,
          denied: times.length - allowed,
        });
      }
    },
  );
});

// Regression: `--key nope` on a Combined log replayed 0 of its lines "without a nope (not
// replayed)" and exited 0; a JSON-lines run where no line had the field did too.
describe("a --key that supplies no key is an error, not an empty success", () => {
  test("--key <typo> on a Combined log (format guessed) exits 2 before replaying", async () => {
    const r = await cli(["replay", excerptPath, ...TB, "--key", "nope"]);
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr:
        'tollgate replay: --key "nope": combined lines (guessed from line 1; set --format if it is wrong) have no named fields; the key is one of ip, ip24, ip64, user (a field name applies to --format jsonl only)\n',
    });
  });

  test("--key <typo> with --format common exits 2 before reading", async () => {
    const r = await cli([
      "replay",
      "/nonexistent/x.log",
      ...TB,
      "--format",
      "common",
      "--key",
      "ip4",
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^tollgate replay: --key "ip4": common lines have no named fields/);
  });

  test("JSON lines of which none has the --key field exit 2 after the report", async () => {
    const input = '{"ts":1,"ip":"192.0.2.1"}\n{"ts":2,"ip":"192.0.2.2","nope":""}\n';
    const r = await cli(["replay", "-", ...TB, "--key", "nope"], input);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain("2 without a nope (not replayed)");
    expect(r.stderr).toBe(
      'tollgate replay: no request replayed: none of the 2 parsed lines has a field "nope" (a non-empty string or a finite number); check --key\n',
    );
  });

  test("--key user on a log with every user logged as - exits 2", async () => {
    const r = await cli(["replay", excerptPath, ...TB, "--key", "user"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "tollgate replay: no request replayed: none of the 424 parsed lines has a user (all logged as -); use another --key\n",
    );
  });

  test("JSON lines of which some have the field replay those and exit 0", async () => {
    const input = '{"ts":1,"ip":"192.0.2.1"}\n{"ts":2,"ip":"192.0.2.2","api_key":"k1"}\n';
    const r = await cli(["replay", "-", ...TB, "--key", "api_key", "--json"], input);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).lines).toMatchObject({ parsed: 2, unkeyed: 1 });
  });
});

// Regression: `tollgate` and `tollgate bogus` spoke as `tollgate replay:`.
describe("top-level errors speak as tollgate, not as the replay", () => {
  test.each([
    { name: "no command", argv: [], stderr: /^tollgate: missing command\n\nUsage: tollgate/ },
    {
      name: "unknown command",
      argv: ["bogus"],
      stderr:
        /^tollgate: unknown command "bogus" \(the command is replay; see tollgate --help\)\n$/,
    },
    {
      name: "unknown option first",
      argv: ["--bogus"],
      stderr: /^tollgate: unknown command "--bogus"/,
    },
  ])("$name", async ({ argv, stderr }) => {
    const r = await cli(argv);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(stderr);
  });

  test("a replay's own usage error still speaks as tollgate replay", async () => {
    const r = await cli(["replay", excerptPath]);
    expect(r.stderr).toMatch(/^tollgate replay: missing --algorithm/);
  });
});

/** A fresh symbolic link to `path`, in the test's directory. */
let links = 0;
function linked(path: string): string {
  links += 1;
  const link = join(dir, `link-${links}.svg`);
  symlinkSync(path, link);
  return link;
}

// Regression: `--svg /nonexistent-dir/x.svg` replayed the whole log before failing.
describe("the gzip peek of standard input", () => {
  /** Runs `replay -` on `stdin`; an 'error' it emits with no listener is kept, not thrown. */
  async function replayStdin(stdin: Readable) {
    const unheard: unknown[] = [];
    const emit = stdin.emit.bind(stdin);
    stdin.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event === "error" && stdin.listenerCount("error") === 0) {
        unheard.push(args[0]);
        return false;
      }
      return emit(event, ...args);
    }) as typeof stdin.emit;
    let text = "";
    const sink = new PassThrough();
    sink.on("data", (chunk: Buffer) => {
      text += chunk.toString();
    });
    const code = await run(["replay", "-", ...TB], { stdin, stdout: sink, stderr: sink });
    return { code, text, unheard };
  }

  // Regression: the gzip peek's read() set off the next read, whose error came a tick later,
  // after the peek stopped listening and before the replay did: an unhandled 'error' event,
  // which ends the process.
  test.each([
    { name: "text", first: "203.0.113.9 - - " },
    { name: "gzip", first: gzipSync("203.0.113.9 - - ").subarray(0, 8) },
  ])(
    "a read error of standard input just after its first chunk is heard: $name",
    async ({ first }) => {
      let reads = 0;
      const stdin = new Readable({
        read() {
          if (reads++ === 0) this.push(Buffer.from(first));
          else this.destroy(Object.assign(new Error("EIO: i/o error, read"), { code: "EIO" }));
        },
      });
      const r = await replayStdin(stdin);
      expect(r.unheard).toEqual([]);
      expect(r.code).toBe(2);
      expect(r.text).toBe("tollgate replay: cannot read -: EIO: i/o error, read\n");
    },
  );

  // Regression: the peek read the first chunk only, so gzip whose first chunk was one byte
  // (a slow pipe) was read as text: no line parsed, "check --format".
  test("gzip on standard input whose first chunk is one byte is decompressed", async () => {
    const packed = gzipSync(readFileSync(excerptPath));
    let reads = 0;
    const stdin = new Readable({
      read() {
        reads++;
        if (reads === 1) this.push(packed.subarray(0, 1));
        // The rest a turn of the event loop later, as a slow pipe's next chunk comes.
        else if (reads === 2) setImmediate(() => this.push(packed.subarray(1)));
        else this.push(null);
      },
    });
    const r = await replayStdin(stdin);
    const plain = await cli(["replay", "-", ...TB], readFileSync(excerptPath));
    expect(r.code).toBe(0);
    expect(r.text).toBe(plain.stdout);
  });

  // Regression: an error without a system code, met by the gzip peek, was reported as the
  // input's (exit 2) where met later it is a bug (exit 1).
  test("an error of standard input without a code is a bug, from its first read", async () => {
    const stdin = new Readable({
      read() {
        this.destroy(new Error("boom"));
      },
    });
    const r = await replayStdin(stdin);
    expect(r.code).toBe(1);
    expect(r.text.startsWith("tollgate: unexpected error: Error: boom")).toBe(true);
  });
});

describe("an unwritable --svg path fails before the log is read", () => {
  const file = join(dir, "a-file");
  writeFileSync(file, "");
  test.each([
    { name: "missing directory", svg: "/nonexistent-dir/x.svg", why: /ENOENT/ },
    { name: "a directory", svg: dir, why: /it is a directory/ },
    { name: "below a file", svg: join(file, "x.svg"), why: /ENOTDIR/ },
    { name: "empty path", svg: "", why: /the path is empty/ },
  ])("$name", async ({ svg, why }) => {
    // The log does not exist: the --svg error must come first, so nothing was read.
    const r = await cli(["replay", "/nonexistent/access.log", ...TB, "--svg", svg]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.startsWith(`tollgate replay: cannot write ${svg}: `)).toBe(true);
    expect(r.stderr).toMatch(why);
  });

  test("standard input is not read when --svg cannot be written", async () => {
    let read = false;
    const stdin = new Readable({
      read() {
        read = true;
        this.push(null);
      },
    });
    const sink = new PassThrough();
    sink.resume();
    const code = await run(["replay", "-", ...TB, "--svg", "/nonexistent-dir/x.svg"], {
      stdin,
      stdout: sink,
      stderr: sink,
    });
    expect(code).toBe(2);
    expect(read).toBe(false);
  });

  // Regression: `--svg access.log` (a typo for access.svg) replaced the log with the chart.
  test.each([
    { name: "the same path", svg: (log: string) => log },
    { name: "another spelling of it", svg: (log: string) => `${dirname(log)}/./${basename(log)}` },
    { name: "a link to it", svg: (log: string) => linked(log) },
  ])(
    "--svg naming the log being replayed is refused, and the log is kept: $name",
    async ({ svg }) => {
      const log = join(dir, "own-log.log");
      const text = readFileSync(excerptPath, "utf8");
      writeFileSync(log, text);
      const target = svg(log);
      const r = await cli(["replay", log, ...TB, "--svg", target]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `tollgate replay: cannot write ${target}: it is the log being replayed (the chart would overwrite it)\n`,
      );
      expect(readFileSync(log, "utf8")).toBe(text);
    },
  );

  test("a writable new file in an existing directory is accepted", async () => {
    const svg = join(dir, "new-chart.svg");
    const r = await cli(["replay", excerptPath, ...TB, "--svg", svg]);
    expect(r.code).toBe(0);
    expect(readFileSync(svg, "utf8").startsWith("<svg")).toBe(true);
  });
});
