import type { Readable } from "node:stream";
import { KeyedLimiter } from "../keyed/keyed-limiter.js";
import { KEY_NAMES, type KeySpec, keyFunction, keySpecName } from "./keys.js";
import { DEFAULT_MAX_LINE_BYTES, LineSplitter } from "./lines.js";
import { type NodesOptions, type NodesReport, NodesSimulation } from "./nodes.js";
import { detectFormat, type LineParser, type LogFormat, parserFor } from "./parse-log.js";
import {
  type AlgorithmName,
  buildLimiter,
  describeOptions,
  type PolicySpec,
  UsageError,
} from "./policy.js";
import { ReorderBuffer } from "./reorder.js";
import { MINUTE_MS, type MinuteSeries, SeriesBuilder } from "./series.js";
import { ClientTally, type KeyReport } from "./tally.js";

/** Options of {@link replay}. */
export interface ReplayOptions {
  /** The policies to run side by side on the same lines (one, or five for `--compare`). */
  readonly policies: readonly PolicySpec[];
  /** The line format; `auto` guesses it from the first non-blank line. @default "auto" */
  readonly format?: LogFormat | "auto" | undefined;
  /** JSON lines: the time field (default: the first of time, timestamp, @timestamp, ts). */
  readonly timeField?: string | undefined;
  /** How lines are grouped into clients. @default "ip" */
  readonly key?: KeySpec | undefined;
  /** How far (log time, ms) a line may trail the latest one and be put in order. @default 60_000 */
  readonly reorderWindowMs?: number | undefined;
  /** Keys listed in `top`, by denials. @default 10 */
  readonly topN?: number | undefined;
  /** Collect requests and each policy's denials per minute (for the chart). */
  readonly series?: boolean | undefined;
  /**
   * Buckets the series holds at most (an integer >= 2); a log with more minutes with
   * requests is kept in coarser buckets (see {@link SeriesBuilder}).
   * @default 4096 (MAX_SERIES_BUCKETS)
   */
  readonly maxSeriesBuckets?: number | undefined;
  /**
   * Bound of each registry (`KeyedLimiter` `maxKeys`); a replay that reaches it evicts keys in use,
   * which changes decisions (counted in `lossyEvictions`). It bounds the per-client tallies of the
   * top list too ({@link ClientTally}: exact up to this many distinct keys, approximate beyond).
   * @default 1_000_000
   */
  readonly maxKeys?: number | undefined;
  /**
   * The longest line read, in bytes (without the newline); a longer line is skipped
   * (counted, reported) and its bytes are dropped as they arrive, so memory stays bounded.
   * @default 1_048_576 (1 MiB)
   */
  readonly maxLineBytes?: number | undefined;
  /** Skipped lines kept as examples, with line number and reason. @default 5 */
  readonly badLineSamples?: number | undefined;
  /**
   * Also simulate N processes sharing the (one, token-bucket) policy through `LeasedTokenBucket`
   * leases (see {@link NodesSimulation}); its decisions are a second lane of the tally and the
   * series, after the policy's. Everything except the capacity and refill, which are the policy's.
   */
  readonly nodes?: Omit<NodesOptions, "capacity" | "refillPerSecond" | "maxKeys"> | undefined;
  /** Called every `progressEvery` lines (for a progress display). */
  readonly onProgress?: ((linesRead: number) => void) | undefined;
  /** @default 65_536 */
  readonly progressEvery?: number | undefined;
}

/** A line that was skipped: its 1-based number, why, and its start. */
export interface BadLine {
  readonly line: number;
  readonly reason: string;
  /** The line's first 160 characters. */
  readonly text: string;
}

/** What one policy decided over the whole log. */
export interface PolicyResult {
  readonly algorithm: AlgorithmName;
  readonly options: Readonly<Record<string, number>>;
  readonly derived: boolean;
  readonly allowed: number;
  readonly denied: number;
  /** Most keys the registry held at once (idle keys swept every simulated minute). */
  readonly peakLiveKeys: number;
  /** Keys dropped while in use because `maxKeys` was reached (each may change decisions). */
  readonly lossyEvictions: number;
}

/** The outcome of a replay: the numbers behind the text and JSON reports. */
export interface ReplayReport {
  readonly format: LogFormat;
  readonly key: string;
  readonly lines: {
    readonly read: number;
    readonly parsed: number;
    /** Lines that did not parse (blank lines included). */
    readonly skipped: number;
    /** Parsed lines without a key (user `-`, JSON field missing): not replayed. */
    readonly unkeyed: number;
    readonly samples: readonly BadLine[];
  };
  /** First and last request time (epoch ms) of the parsed lines; undefined if none. */
  readonly firstMs: number | undefined;
  readonly lastMs: number | undefined;
  readonly reorder: {
    readonly windowMs: number;
    readonly reordered: number;
    readonly late: number;
    readonly peakBuffered: number;
  };
  /** Distinct client keys: exact when `distinctKeysExact`, else an estimate (≈0.8%). */
  readonly distinctKeys: number;
  /** False when there were more distinct keys than `maxKeys` (the tally's bound). */
  readonly distinctKeysExact: boolean;
  /** Requests of clients the tally did not hold (allowed ones, once it was full). */
  readonly untalliedRequests: number;
  readonly results: readonly PolicyResult[];
  readonly top: readonly KeyReport[];
  readonly series: MinuteSeries | undefined;
  /** The leased simulation against the exact shared bucket (the policy), with `nodes`. */
  readonly nodes?: NodesReport | undefined;
}

/**
 * The default reorder window, in ms: one minute, since servers that log at request end
 * step back by the longest request time, and some logs shuffle lines within a minute (the
 * elastic/examples sample does, by up to 59 s).
 */
export const DEFAULT_REORDER_WINDOW_MS = 60_000;

/** The default bound of each registry and of the per-client tallies, in keys. */
export const DEFAULT_MAX_KEYS = 1_000_000;

/**
 * A copy of `text` that does not share memory with the string it was cut from. V8 cuts
 * substrings of 13 characters or more as views of their parent (here the whole line), so
 * a key held in the reorder window, a registry or the tally would keep its line alive
 * (150,000 lines with 8 KiB user agents in one window: 1.2 GB). Slicing a concatenation
 * flattens it into a new string and cuts from that (measured: the lines are freed).
 */
export function ownString(text: string): string {
  return ` ${text}`.slice(1);
}

interface Lane {
  readonly spec: PolicySpec;
  readonly registry: KeyedLimiter;
  allowed: number;
  denied: number;
  peakLiveKeys: number;
}

/**
 * Replays an access log through rate-limit policies, offline: each request is decided at
 * its line's timestamp (`allowAt`), lines are put in time order within a bounded reorder window, and
 * every request (cost 1) is checked against each policy's `KeyedLimiter` under its client
 * key. Streaming, in bounded memory (one line, the reorder window, the live keys, the
 * tallies, at most `maxSeriesBuckets` chart buckets); each registry is swept once per
 * simulated minute. See docs/replay.md#how-it-works.
 *
 * @throws {RangeError} Synchronously, for a `maxLineBytes` that is not an integer from 1 to
 *   256 MiB; the constructors' errors for invalid policy options.
 * @throws {UsageError} When a limiter refuses a time of the log (a rejection:
 *   docs/semantics.md#the-float-step-bound), or for a `key` field the format cannot name
 *   ({@link checkKeyForFormat}). The input stream's error rejects too, destroying it.
 */
export function replay(input: Readable, options: ReplayOptions): Promise<ReplayReport> {
  const keySpec = options.key ?? "ip";
  const keyOf = keyFunction(keySpec);
  const topN = options.topN ?? 10;
  const sampleLimit = options.badLineSamples ?? 5;
  const progressEvery = options.progressEvery ?? 65_536;
  let format: LogFormat | undefined = options.format === "auto" ? undefined : options.format;
  if (format !== undefined) checkKeyForFormat(keySpec, format);
  let parse: LineParser | undefined =
    format === undefined ? undefined : parserFor(format, options.timeField);

  let nowMs = Number.NEGATIVE_INFINITY;
  // Every call passes the line's time (allowAt, sweepAt): the registries never read a
  // clock, and a key's state starts at its first request's time.
  const lanes: Lane[] = options.policies.map((spec) => ({
    spec,
    registry: new KeyedLimiter(buildLimiter(spec.algorithm, spec.options), {
      maxKeys: options.maxKeys,
      sweepIntervalMs: Number.POSITIVE_INFINITY,
    }),
    allowed: 0,
    denied: 0,
    peakLiveKeys: 0,
  }));
  const nodes = nodesOf(options, lanes);
  // With nodes, the leased decisions are one more lane of the tally and the series.
  const width = lanes.length + (nodes === undefined ? 0 : 1);
  const tally = new ClientTally(options.maxKeys ?? DEFAULT_MAX_KEYS, width);
  const deniedNow = new Uint8Array(width);
  const series = options.series ? new SeriesBuilder(width, options.maxSeriesBuckets) : undefined;
  /** Requests decided by the policies, waiting for the (asynchronous) leased simulation. */
  let pending: { timeMs: number; key: string; denied: Uint8Array }[] = [];
  let sweptMinute = Number.NaN;

  const lines = { read: 0, parsed: 0, skipped: 0, unkeyed: 0, samples: [] as BadLine[] };
  let firstMs = Number.POSITIVE_INFINITY;
  let lastMs = Number.NEGATIVE_INFINITY;

  // `key` is the line's own copy (see ownString), so no kept key pins its line.
  const decide = (timeMs: number, key: string): void => {
    if (timeMs > nowMs) nowMs = timeMs;
    const minute = Math.floor(nowMs / MINUTE_MS);
    if (minute !== sweptMinute) {
      for (const lane of lanes) atLogTime(lane, nowMs, () => lane.registry.sweepAt(nowMs));
      sweptMinute = minute;
    }
    for (let i = 0; i < lanes.length; i++) {
      const lane = lanes[i]!;
      const allowed = atLogTime(lane, nowMs, () => lane.registry.allowAt(key, nowMs));
      if (allowed) lane.allowed++;
      else lane.denied++;
      deniedNow[i] = allowed ? 0 : 1;
      const size = lane.registry.size;
      if (size > lane.peakLiveKeys) lane.peakLiveKeys = size;
    }
    if (nodes === undefined) record(minute, key);
    else pending.push({ timeMs: nowMs, key, denied: deniedNow.slice(0, lanes.length) });
  };
  const record = (minute: number, key: string): void => {
    const inMinute = tally.count(key, minute, deniedNow);
    series?.add(minute, inMinute, deniedNow);
  };
  /** Runs the leased simulation over the pending requests, in order. */
  const drain = async (): Promise<void> => {
    if (nodes === undefined) return;
    const batch = pending;
    pending = [];
    for (const p of batch) {
      const allowed = await nodes.allow(p.timeMs, p.key, p.denied[0] === 0);
      deniedNow.set(p.denied);
      deniedNow[lanes.length] = allowed ? 0 : 1;
      record(Math.floor(p.timeMs / MINUTE_MS), p.key);
    }
  };

  const buffer = new ReorderBuffer<string>(
    options.reorderWindowMs ?? DEFAULT_REORDER_WINDOW_MS,
    decide,
  );

  const nextLine = (): number => {
    const number = ++lines.read;
    if (number % progressEvery === 0) options.onProgress?.(number);
    return number;
  };
  const onLine = (line: string): void => {
    const number = nextLine();
    if (parse === undefined) {
      if (line.trim() === "") {
        skip(number, "blank line", line);
        return;
      }
      format = detectFormat(line);
      checkKeyForFormat(keySpec, format, " (guessed from line 1; set --format if it is wrong)");
      parse = parserFor(format, options.timeField);
    }
    const record = parse(line);
    if (typeof record === "string") {
      skip(number, record, line);
      return;
    }
    lines.parsed++;
    if (record.timeMs < firstMs) firstMs = record.timeMs;
    if (record.timeMs > lastMs) lastMs = record.timeMs;
    const key = keyOf(record);
    if (key === undefined) {
      lines.unkeyed++;
      return;
    }
    buffer.push(record.timeMs, ownString(key));
  };
  const skip = (number: number, reason: string, line: string): void => {
    lines.skipped++;
    if (lines.samples.length < sampleLimit) {
      lines.samples.push({ line: number, reason, text: line.slice(0, 160) });
    }
  };

  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const splitter = new LineSplitter(maxLineBytes, {
    line: onLine,
    overlong: (head, bytes) =>
      skip(
        nextLine(),
        `line of ${bytes} bytes, longer than ${maxLineBytes} (--max-line-bytes)`,
        head,
      ),
  });

  // `for await` destroys the input when the loop throws (a bug in a later stage), and
  // rejects with the input's own error (unreadable file, bad gzip data).
  return (async () => {
    for await (const chunk of input) {
      splitter.push(chunk as Buffer | string);
      await drain();
    }
    splitter.end();
    buffer.flush();
    await drain();
    return finish();
  })();

  function finish(): ReplayReport {
    const results: PolicyResult[] = lanes.map((lane) => ({
      ...lane.spec,
      allowed: lane.allowed,
      denied: lane.denied,
      peakLiveKeys: lane.peakLiveKeys,
      lossyEvictions: lane.registry.stats.evictedLossy,
    }));
    return {
      format: format ?? "combined",
      key: keySpecName(keySpec),
      lines,
      firstMs: lines.parsed > 0 ? firstMs : undefined,
      lastMs: lines.parsed > 0 ? lastMs : undefined,
      reorder: {
        windowMs: buffer.windowMs,
        reordered: buffer.reordered,
        late: buffer.late,
        peakBuffered: buffer.peakSize,
      },
      distinctKeys: tally.distinct,
      distinctKeysExact: tally.distinctExact,
      untalliedRequests: tally.untallied,
      results,
      top: tally.top(topN),
      series: series?.finish(),
      ...(nodes === undefined ? {} : { nodes: nodes.finish() }),
    };
  }
}

/**
 * The leased simulation of `options.nodes`, on the one policy's bucket (parseCommand
 * takes `--nodes` with one token bucket only).
 */
function nodesOf(options: ReplayOptions, lanes: readonly Lane[]): NodesSimulation | undefined {
  if (options.nodes === undefined) return undefined;
  const spec = lanes[0]!.spec;
  return new NodesSimulation({
    ...options.nodes,
    capacity: spec.options["capacity"]!,
    refillPerSecond: spec.options["refillPerSecond"]!,
    maxKeys: options.maxKeys,
  });
}

/**
 * Refuses a `--key <field>` for a format without named fields (Combined, Common): every
 * line would be without a key, and the replay would decide nothing.
 * @throws {UsageError} `--key nope: combined lines have no field "nope" …`.
 */
export function checkKeyForFormat(spec: KeySpec, format: LogFormat, guessed = ""): void {
  if (typeof spec === "string" || format === "jsonl") return;
  throw new UsageError(
    `--key ${JSON.stringify(spec.field)}: ${format} lines${guessed} have no named fields; the key is one of ${KEY_NAMES.join(", ")} (a field name applies to --format jsonl only)`,
  );
}

/**
 * Runs one registry call (a decision or a sweep, at an explicit time) at the log time
 * `nowMs`. A RangeError from the limiter here is the policy's, not the replay's: the window
 * limiters refuse a reading where `windowMs` is below the float step of the time
 * (`--window-ms 0.01` at 1e15 ms would make windows end where they start), so it becomes a
 * {@link UsageError} (exit 2) with the limiter's own message.
 */
function atLogTime<T>(lane: Lane, nowMs: number, call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    const hint = "windowMs" in lane.spec.options ? "; use a larger --window-ms" : "";
    throw new UsageError(
      `${error.message}\n${lane.spec.algorithm} (${describeOptions(lane.spec)}) cannot decide at the log time ${nowMs} ms${hint}`,
    );
  }
}
