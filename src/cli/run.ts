import { open, writeFile } from "node:fs/promises";
import { pipeline, type Readable, type Writable } from "node:stream";
import { createGunzip } from "node:zlib";
import { parseCommand, type ReplayCommand } from "./args.js";
import { keySpecName } from "./keys.js";
import { outputProblem } from "./output.js";
import {
  CommandUsageError,
  describeOptions,
  descriptor,
  limitPerMinute,
  UsageError,
} from "./policy.js";
import { type ReplayReport, replay } from "./replay.js";
import { isoTime, jsonReport, textReport } from "./report.js";
import { replayChart } from "./svg.js";
import { packageVersion } from "./version.js";

/** The streams the CLI talks to (the process's, or test doubles). */
export interface CliIo {
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly stderr: Writable & { readonly isTTY?: boolean | undefined };
}

/** A failure to read the input or write the chart (exit code 2). */
class InputError extends Error {
  override readonly name = "InputError";
}

/**
 * `input` decompressed. A pipeline, not pipe: when gunzip fails (bad data) the input is
 * destroyed too, closing a file's descriptor; a read error of the input reaches gunzip,
 * which the replay reads.
 */
function gunzipped(input: Readable): Readable {
  const gunzip = createGunzip();
  pipeline(input, gunzip, () => {});
  return gunzip;
}

/** `input` (a file or standard input), decompressed when its first two bytes are gzip's. */
async function sniffed(input: Readable, file: string): Promise<Readable> {
  const head = await new Promise<unknown>((resolve, reject) => {
    // The error listener stays: an error that the peek's read() set off comes a tick later,
    // before the replay listens, and would be thrown as unhandled; the replay still meets it
    // (the stream is errored).
    const done = (value: unknown) => {
      input.off("readable", onReadable).off("end", onEnd);
      resolve(value);
    };
    // Two bytes (fewer only at the end), put back at once, before the stream can end: a
    // peek. A first chunk of one byte (a slow pipe) waits for the next.
    const onReadable = () => {
      const chunk: unknown = input.read(2);
      if (chunk === null) return; // more to come, or the end
      input.unshift(chunk as Buffer);
      done(chunk);
    };
    const onEnd = () => done(null);
    // As the replay's read errors: a system error is the input's fault, anything else a bug.
    const onError = (error: Error) =>
      reject(
        typeof (error as { code?: unknown }).code === "string" ? cannotRead(file, error) : error,
      );
    input.on("readable", onReadable).once("end", onEnd).once("error", onError);
  });
  // A gzip stream's magic number (RFC 1952).
  const gzip = head instanceof Uint8Array && head[0] === 0x1f && head[1] === 0x8b;
  return gzip ? gunzipped(input) : input;
}

/** The {@link InputError} of an unreadable `file`. */
function cannotRead(file: string, error: Error): InputError {
  return new InputError(`cannot read ${file}: ${error.message}`);
}

/**
 * Opens the log: `-` is standard input; input that starts as gzip does (a `.gz` path, or any
 * file or standard input whose first bytes are gzip's) is decompressed.
 */
async function openInput(file: string, io: CliIo): Promise<{ stream: Readable; size: number }> {
  if (file === "-") return { stream: await sniffed(io.stdin, file), size: 0 };
  const handle = await open(file, "r").catch((error: Error) => {
    throw cannotRead(file, error);
  });
  const stat = await handle.stat();
  if (stat.isDirectory()) {
    await handle.close();
    throw new InputError(`cannot read ${file}: it is a directory`);
  }
  const raw = handle.createReadStream();
  if (file.endsWith(".gz")) return { stream: gunzipped(raw), size: 0 };
  const stream = await sniffed(raw, file);
  return { stream, size: stream === raw ? stat.size : 0 };
}

function write(stream: Writable, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(text, (error) => (error ? reject(error) : resolve()));
  });
}

async function runReplay(command: ReplayCommand, io: CliIo): Promise<number> {
  if (command.svg !== undefined) {
    // Before reading: a mistyped --svg should not cost a whole replay first.
    const problem = await outputProblem(command.svg, command.file);
    if (problem !== undefined) throw new InputError(`cannot write ${command.svg}: ${problem}`);
  }
  const { stream, size } = await openInput(command.file, io);
  const tty = io.stderr.isTTY === true;
  const started = performance.now();
  let report: ReplayReport;
  try {
    report = await replay(stream, {
      ...command, // policies, format, timeField, key, reorderWindowMs, maxKeys, maxLineBytes, nodes
      // The chart draws the ten most limited clients whatever --top is.
      topN: command.svg === undefined ? command.top : Math.max(command.top, 10),
      series: command.svg !== undefined,
      onProgress: tty
        ? (lines) => {
            const read = (stream as { bytesRead?: number }).bytesRead;
            const share =
              size > 0 && read !== undefined ? ` (${((read * 100) / size).toFixed(0)}%)` : "";
            io.stderr.write(`\rtollgate replay: ${lines} lines${share}\x1b[K`);
          }
        : undefined,
    });
  } catch (error) {
    // A system or zlib error (ENOENT, EISDIR, EIO, Z_DATA_ERROR…) is the input's fault;
    // anything else is a bug and exits 1.
    if (typeof (error as { code?: unknown }).code !== "string") throw error;
    throw cannotRead(command.file, error as Error);
  }
  if (tty) {
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    io.stderr.write(`\rtollgate replay: ${report.lines.read} lines in ${seconds} s\x1b[K\n`);
  }
  const shown = { ...report, top: report.top.slice(0, command.top) };
  await write(
    io.stdout,
    command.json ? jsonReport(shown, command.file) : textReport(shown, command.file),
  );
  const short = shortDurations(command);
  if (short !== "") await write(io.stderr, short);
  if (command.svg !== undefined && report.series !== undefined) {
    const first = report.results[0]!;
    const many = report.results.length > 1;
    const svg = replayChart(report.series, {
      title: many
        ? `${report.results.length} algorithms per ${report.key}, same burst and long-run rate`
        : `${first.algorithm} (${describeOptions(first)}) per ${report.key}`,
      subtitle:
        report.firstMs === undefined || report.lastMs === undefined
          ? `${command.file}: no request`
          : `${command.file}: ${report.lines.parsed} requests, ${isoTime(report.firstMs)} .. ${isoTime(report.lastMs)} UTC, ${report.distinctKeysExact ? "" : "about "}${report.distinctKeys} distinct ${report.key}`,
      policies: [
        ...report.results.map((r, i) => ({
          algorithm: r.algorithm,
          options: describeOptions(r),
          requests: r.allowed + r.denied,
          denied: r.denied,
          limitPerMinute: limitPerMinute(command.policies[i]!),
        })),
        ...(report.nodes === undefined
          ? []
          : [
              {
                algorithm: `leased x${report.nodes.nodes}`,
                options: `spread ${report.nodes.spread}, round trip ${report.nodes.rttMs} ms, initialCredit ${report.nodes.initialCredit}`,
                requests: first.allowed + first.denied,
                denied: first.allowed + first.denied - report.nodes.admitted,
                limitPerMinute: undefined,
              },
            ]),
      ],
      leased: report.nodes,
      top: report.top,
      keyName: report.key,
    });
    await writeFile(command.svg, svg).catch((error: Error) => {
      throw new InputError(`cannot write ${command.svg}: ${error.message}`);
    });
  }
  if (report.lines.parsed === 0) {
    // Nothing was replayed: a mistake (wrong file, wrong format, an empty pipe), not a result.
    const { read } = report.lines;
    const why =
      read === 0
        ? `${command.file} is empty`
        : `none of the ${read} line${read === 1 ? "" : "s"} of ${command.file} reads as ${report.format}; check --format`;
    await write(io.stderr, `tollgate replay: no line parsed: ${why}\n`);
    return 2;
  }
  if (report.lines.unkeyed === report.lines.parsed) {
    // Every line was without a key: nothing was decided, so the report says nothing.
    await write(
      io.stderr,
      `tollgate replay: no request replayed: ${noKeyReason(command, report)}\n`,
    );
    return 2;
  }
  return 0;
}

/**
 * A note for each duration flag given under a second (`--window-ms 60`): a legal value, but
 * more often seconds written where milliseconds are meant. "" when there is none.
 */
function shortDurations(command: ReplayCommand): string {
  const notes = new Set<string>();
  for (const policy of command.policies) {
    if (policy.derived) continue;
    const flags: Readonly<Record<string, string>> = descriptor(policy.algorithm).cli.flags;
    for (const [name, value] of Object.entries(policy.options)) {
      const flag = flags[name];
      if (flag === undefined || !name.endsWith("Ms") || !(value < 1000)) continue;
      notes.add(
        `tollgate replay: note: ${flag} ${value} is ${value} milliseconds; for ${value} seconds, ${flag} ${value * 1000}\n`,
      );
    }
  }
  return [...notes].join("");
}

/** Why none of the parsed lines had a key, in the words of `--key`. */
function noKeyReason(command: ReplayCommand, report: ReplayReport): string {
  const { parsed } = report.lines;
  const none = `none of the ${parsed} parsed line${parsed === 1 ? "" : "s"} has`;
  const spec = command.key;
  if (typeof spec !== "string") {
    return `${none} a field ${JSON.stringify(spec.field)} (a non-empty string or a finite number); check --key`;
  }
  if (spec === "user") return `${none} a user (all logged as -); use another --key`;
  return `${none} a client address; use another --key than ${keySpecName(spec)}`;
}

/**
 * Runs the `tollgate` command line and resolves with its exit code: 0 done; 2 bad usage, an invalid
 * policy option (the constructor's message), an unreadable input or unwritable `--svg` path
 * (checked before reading), an input of which no line parsed (an empty input included; the report
 * is still printed), or one of which no parsed line had a key (no request replayed; the report is
 * still printed); 1 an unexpected error (a bug).
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const command = parseCommand(argv);
    if (command.kind === "help") {
      await write(io.stdout, command.text);
      return 0;
    }
    if (command.kind === "version") {
      await write(io.stdout, `${packageVersion()}\n`);
      return 0;
    }
    return await runReplay(command, io);
  } catch (error) {
    if ((error as { code?: unknown }).code === "EPIPE") return 0; // `| head` closed the pipe
    if (error instanceof UsageError || error instanceof InputError) {
      // A replay's errors speak as the replay; no command or an unknown one as tollgate.
      const who = error instanceof CommandUsageError ? "tollgate" : "tollgate replay";
      await write(io.stderr, `${who}: ${error.message}\n`);
      return 2;
    }
    await write(io.stderr, `tollgate: unexpected error: ${(error as Error).stack ?? error}\n`);
    return 1;
  }
}
