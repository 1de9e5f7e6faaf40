/**
 * Parsers for one access-log line: Apache/nginx Common and Combined Log Format, and
 * JSON lines. Each returns a {@link LogRecord} or, for a line it cannot read, a short
 * reason (a string) that the replay reports with the line number.
 *
 * Formats (Apache `mod_log_config`, nginx `log_format combined`):
 * - common:   `host ident user [dd/Mon/yyyy:HH:MM:SS +hhmm] "request" status bytes`
 * - combined: common followed by ` "referer" "user-agent"`, then optionally more
 *   fields (nginx and Apache setups often append some); they are ignored.
 * Quoted fields may hold spaces and escaped quotes (`\"`, Apache's escaping). A request line that
 * itself holds a raw quote (attack traffic) is read up to the quote that is followed by a status
 * and a size. The time may carry a fraction of a second (`10:05:03.123`).
 */

/** One parsed line: what the replay needs from it. */
export interface LogRecord {
  /** The request time, epoch milliseconds (UTC). */
  readonly timeMs: number;
  /** The client address or host name as logged (`%h`, `$remote_addr`); undefined if absent. */
  readonly host: string | undefined;
  /** The authenticated user (`%u`, `$remote_user`); undefined when logged as `-`. */
  readonly user: string | undefined;
  /** JSON lines only: the whole object, for `--key <field>`. */
  readonly fields: Readonly<Record<string, unknown>> | undefined;
}

/**
 * The largest magnitude of a request time, epoch ms: ±8.64e15 (±100,000,000 days around
 * 1970, ECMA-262 "Time Values and Time Range"), the range a `Date` can represent. The
 * parsers skip a line whose time lies outside it, so no later stage (clock, report,
 * chart) ever sees a time that `toISOString` would throw on.
 */
export const MAX_TIME_MS = 8.64e15;

/** The input formats `tollgate replay --format` accepts. */
export const LOG_FORMATS = ["combined", "common", "jsonl"] as const;
/** One of {@link LOG_FORMATS}. */
export type LogFormat = (typeof LOG_FORMATS)[number];

/** A parser: a record, or the reason the line was skipped. */
export type LineParser = (line: string) => LogRecord | string;

/** Month abbreviations of CLF times to their index (`Jan` 0 … `Dec` 11). */
const MONTHS: Readonly<Record<string, number>> = Object.fromEntries(
  "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(" ").map((name, i) => [name, i]),
);

/**
 * Days from 1970-01-01 to `year`-`month` (0-11)-`day`, proleptic Gregorian, for any
 * year (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms", `days_from_civil`);
 * `month` 12 is January of the next year. Not `Date.UTC`: it takes years 0-99 as 1900-1999.
 */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month < 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400; // 0-399
  const dayOfYear = Math.floor((153 * ((month + 10) % 12) + 2) / 5) + day - 1; // from 1 Mar
  const dayOfEra =
    yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

const CLF_TIME =
  /^(\d{2})\/([A-Z][a-z]{2})\/(\d{4}):(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})? ([+-])(\d{2})(\d{2})$/;

/**
 * Parses a CLF time, `17/May/2015:10:05:03 +0000` (optionally with a fraction of a
 * second), to epoch milliseconds. NaN when it is not one, or names no real instant
 * (31 Feb, hour 24, zone +2400).
 */
export function parseClfTime(text: string): number {
  const m = CLF_TIME.exec(text);
  if (m === null) return Number.NaN;
  const month = MONTHS[m[2]!];
  // Field by field, not through a mapped array: this runs once per log line.
  const day = Number(m[1]);
  const year = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  const zoneHours = Number(m[9]);
  const zoneMinutes = Number(m[10]);
  if (month === undefined || hour > 23 || minute > 59 || second > 60) return Number.NaN;
  if (zoneHours > 23 || zoneMinutes > 59) return Number.NaN;
  const days = daysFromCivil(year, month, 1);
  // Past the month's last day (31 Feb): the days to the next month's first.
  if (day < 1 || day > daysFromCivil(year, month + 1, 1) - days) return Number.NaN;
  const fractionMs = m[7] === undefined ? 0 : Number(m[7]) * 1000;
  const offsetMs = (m[8] === "-" ? -1 : 1) * (zoneHours * 60 + zoneMinutes) * 60_000;
  const seconds = (days + day - 1) * 86_400 + hour * 3600 + minute * 60 + second;
  const timeMs = seconds * 1000 + fractionMs - offsetMs;
  return Math.abs(timeMs) <= MAX_TIME_MS ? timeMs : Number.NaN;
}

/** Index just past the space-free token starting at `from` (never past the line). */
function tokenEnd(line: string, from: number): number {
  const space = line.indexOf(" ", from);
  return space === -1 ? line.length : space;
}

/**
 * Index of the quote closing the quoted field that starts at `open` (the opening quote),
 * skipping backslash escapes; -1 when unterminated. `accept(i)` may reject a candidate
 * closing quote at `i` (it is then taken as part of the field).
 */
function closingQuote(line: string, open: number, accept: (i: number) => boolean): number {
  for (let i = open + 1; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 92)
      i++; // backslash: the next character is escaped
    else if (c === 34 && accept(i)) return i;
  }
  return -1;
}

const STATUS_AND_SIZE = / (\d{3}|-) (\d+|-)(?= |$)/y;

/** Reads ` status size` at `at`; returns the index after it, or -1. */
function statusAndSizeEnd(line: string, at: number): number {
  STATUS_AND_SIZE.lastIndex = at;
  const m = STATUS_AND_SIZE.exec(line);
  return m === null ? -1 : at + m[0].length;
}

/** Reads ` "…"` at `at`; returns the index after the closing quote, or -1. */
function quotedEnd(line: string, at: number): number {
  if (line.charCodeAt(at) !== 32 || line.charCodeAt(at + 1) !== 34) return -1;
  const close = closingQuote(line, at + 1, (i) => i + 1 === line.length || line[i + 1] === " ");
  return close === -1 ? -1 : close + 1;
}

/** True when `line` is empty or only white space (without copying it). */
function isBlank(line: string): boolean {
  return line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim() === "");
}

// Lines of one second share their time text: the last one parsed is remembered.
let lastTimeText = "";
let lastTimeMs = Number.NaN;

/**
 * The reason for an unclosed quote: the field, the 1-based column of its opening quote,
 * and the likely cause (a line cut off by a full disk, a crash or a size limit).
 */
function unclosed(field: string, open: number): string {
  return `unclosed quote: the "${field}" field opened at column ${open + 1} has no closing quote (the line looks cut off)`;
}

/**
 * Why a Combined line has no valid ` "referer" "user-agent"` after its size (at
 * `afterStatus`; `afterReferer` is past the referer, or -1). Proposes `--format common`
 * only when the line ends at the size, i.e. when it does read as Common Log Format.
 * The field at which {@link quotedEnd} failed, when it opens with ` "`, is unclosed.
 */
function missingRefererOrAgent(line: string, afterStatus: number, afterReferer: number): string {
  if (afterStatus === line.length) {
    return 'the line ends after the size: no "referer" "user-agent" (it reads as Common Log Format: try --format common)';
  }
  const field = afterReferer === -1 ? "referer" : "user-agent";
  const at = afterReferer === -1 ? afterStatus : afterReferer;
  if (at === line.length) return `the line ends after the "referer": no "user-agent"`;
  if (line.charCodeAt(at) === 32 && line.charCodeAt(at + 1) === 34) return unclosed(field, at + 1);
  // The column of what stands where the field should (past the separating space).
  const column = line.charCodeAt(at) === 32 ? at + 2 : at + 1;
  return `expected a quoted "${field}" at column ${column}`;
}

function parseClf(line: string, combined: boolean): LogRecord | string {
  if (isBlank(line)) return "blank line";
  const hostEnd = tokenEnd(line, 0);
  if (hostEnd === 0) return "line starts with a space (no host field)";
  const identEnd = tokenEnd(line, hostEnd + 1);
  const userEnd = tokenEnd(line, identEnd + 1);
  if (userEnd >= line.length || line[userEnd + 1] !== "[") {
    return "expected `host ident user [time]` at the start";
  }
  const timeEnd = line.indexOf("]", userEnd + 2);
  if (timeEnd === -1) return "unterminated [time] field";
  const timeText = line.slice(userEnd + 2, timeEnd);
  if (timeText !== lastTimeText) {
    lastTimeText = timeText;
    lastTimeMs = parseClfTime(timeText);
  }
  const timeMs = lastTimeMs;
  if (Number.isNaN(timeMs)) {
    return `bad time [${timeText}] (expected dd/Mon/yyyy:HH:MM:SS +hhmm)`;
  }
  if (line.charCodeAt(timeEnd + 1) !== 32 || line.charCodeAt(timeEnd + 2) !== 34) {
    return 'expected a quoted "request" after the time';
  }
  let afterStatus = -1;
  const requestClose = closingQuote(line, timeEnd + 2, (i) => {
    afterStatus = statusAndSizeEnd(line, i + 1);
    return afterStatus !== -1;
  });
  if (requestClose === -1) {
    return closingQuote(line, timeEnd + 2, () => true) === -1
      ? unclosed("request", timeEnd + 2)
      : 'expected a quoted "request" followed by status and size';
  }
  if (combined) {
    const afterReferer = quotedEnd(line, afterStatus);
    const afterAgent = afterReferer === -1 ? -1 : quotedEnd(line, afterReferer);
    if (afterAgent === -1) return missingRefererOrAgent(line, afterStatus, afterReferer);
  } else if (afterStatus !== line.length) {
    const hint =
      typeof parseClf(line, true) === "string"
        ? ""
        : " (it reads as Combined Log Format: try --format combined)";
    return `text after the size field at column ${afterStatus + 2}${hint}`;
  }
  const user = line.slice(identEnd + 1, userEnd);
  return {
    timeMs,
    host: line.slice(0, hostEnd),
    user: user === "-" || user === "" ? undefined : user,
    fields: undefined,
  };
}

/** Parses one Common Log Format line. */
export const parseCommon: LineParser = (line) => parseClf(line, false);

/** Parses one Combined Log Format line (extra trailing fields allowed). */
export const parseCombined: LineParser = (line) => parseClf(line, true);

/** Field names tried, in order, for the time of a JSON line when `--time-field` is not given. */
export const JSON_TIME_FIELDS = ["time", "timestamp", "@timestamp", "ts"] as const;
/** Field names tried, in order, for the client address of a JSON line. */
export const JSON_HOST_FIELDS = ["ip", "remote_addr", "client_ip", "clientip"] as const;
/** Field names tried, in order, for the authenticated user of a JSON line. */
export const JSON_USER_FIELDS = ["user", "remote_user", "auth"] as const;

/** ISO 8601 date-time with a zone (`Z` or `±hh:mm`); a zone-less time would depend on TZ. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

/**
 * Reads a JSON time value: a finite number is epoch milliseconds; a string must be an
 * ISO 8601 date-time with a zone. NaN otherwise, and for a number outside
 * ±{@link MAX_TIME_MS} (`1e16`, `1e308`: no date has that time).
 */
export function parseJsonTime(value: unknown): number {
  if (typeof value === "number") return Math.abs(value) <= MAX_TIME_MS ? value : Number.NaN;
  if (typeof value !== "string" || !ISO_TIME.test(value)) return Number.NaN;
  return Date.parse(value);
}

function firstString(
  fields: Record<string, unknown>,
  names: readonly string[],
): string | undefined {
  for (const name of names) {
    const value = fields[name];
    if (typeof value === "string" && value !== "" && value !== "-") return value;
    if (typeof value === "number" && Number.isFinite(value)) return String(value);
  }
  return undefined;
}

/**
 * A parser for JSON lines: one object per line, its time in `timeField` (or the first of
 * {@link JSON_TIME_FIELDS} present) as an ISO 8601 string with a zone or epoch ms.
 */
export function jsonLineParser(timeField?: string): LineParser {
  const timeFields = timeField === undefined ? JSON_TIME_FIELDS : [timeField];
  return (line) => {
    if (isBlank(line)) return "blank line";
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      return `not JSON (${(error as Error).message})`;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return "not a JSON object";
    }
    const fields = value as Record<string, unknown>;
    const name = timeFields.find((f) => f in fields);
    if (name === undefined) return `no time field (${timeFields.join(", ")})`;
    const timeMs = parseJsonTime(fields[name]);
    if (Number.isNaN(timeMs)) {
      const raw = fields[name];
      const why =
        typeof raw === "number" && Number.isFinite(raw)
          ? `outside the representable date range, ±8.64e15 ms`
          : "expected ISO 8601 with a zone, or epoch ms";
      return `bad time ${name}=${JSON.stringify(raw)} (${why})`;
    }
    return {
      timeMs,
      host: firstString(fields, JSON_HOST_FIELDS),
      user: firstString(fields, JSON_USER_FIELDS),
      fields,
    };
  };
}

/** The parser for `format` (`timeField` applies to jsonl only). */
export function parserFor(format: LogFormat, timeField?: string): LineParser {
  if (format === "common") return parseCommon;
  if (format === "combined") return parseCombined;
  return jsonLineParser(timeField);
}

/**
 * Guesses the format from the first non-blank line: an object opening `{` is jsonl; a
 * line that parses as combined is combined; one that parses as common is common;
 * anything else is taken as combined (its lines are then reported as bad).
 */
export function detectFormat(line: string): LogFormat {
  const text = line.trimStart();
  if (text.startsWith("{")) return "jsonl";
  if (typeof parseCombined(text) !== "string") return "combined";
  if (typeof parseCommon(text) !== "string") return "common";
  return "combined";
}
