import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  daysFromCivil,
  detectFormat,
  jsonLineParser,
  type LogRecord,
  parseClfTime,
  parseCombined,
  parseCommon,
  parseJsonTime,
} from "../../src/cli/parse-log.js";

const T = Date.UTC(2015, 4, 17, 10, 5, 3); // 17/May/2015:10:05:03 +0000

const UA = "Mozilla/5.0 (X11; Linux x86_64; rv:26.0) Gecko/20100101 Firefox/26.0";

describe("parseClfTime", () => {
  test.each([
    { name: "UTC", text: "17/May/2015:10:05:03 +0000", ms: T },
    { name: "east of UTC", text: "17/May/2015:12:05:03 +0200", ms: T },
    { name: "west of UTC, half-hour zone", text: "17/May/2015:06:35:03 -0330", ms: T },
    { name: "fraction of a second", text: "17/May/2015:10:05:03.250 +0000", ms: T + 250 },
    {
      name: "across midnight",
      text: "01/Jan/2016:00:30:00 +0100",
      ms: Date.UTC(2015, 11, 31, 23, 30),
    },
    {
      name: "29 Feb of a leap year",
      text: "29/Feb/2016:00:00:00 +0000",
      ms: Date.UTC(2016, 1, 29),
    },
  ])("$name", ({ text, ms }) => {
    expect(parseClfTime(text)).toBe(ms);
  });

  // Regression: Date.UTC reads years 0-99 as 1900-1999, so [10/Oct/0050:…] was
  // reported as 1950-10-10.
  test.each([
    { name: "year 0000", text: "01/Jan/0000:00:00:00 +0000", iso: "0000-01-01T00:00:00.000Z" },
    {
      name: "29 Feb 0000 (a leap year)",
      text: "29/Feb/0000:00:00:00 +0000",
      iso: "0000-02-29T00:00:00.000Z",
    },
    { name: "year 0050", text: "10/Oct/0050:13:55:36 -0700", iso: "0050-10-10T20:55:36.000Z" },
    { name: "year 0099", text: "31/Dec/0099:23:59:59 +0000", iso: "0099-12-31T23:59:59.000Z" },
    { name: "year 0100", text: "01/Jan/0100:00:00:00 +0000", iso: "0100-01-01T00:00:00.000Z" },
    {
      name: "1969 (before the epoch)",
      text: "31/Dec/1969:23:59:59 +0000",
      iso: "1969-12-31T23:59:59.000Z",
    },
    { name: "year 9999", text: "31/Dec/9999:23:59:59 +0000", iso: "9999-12-31T23:59:59.000Z" },
  ])("two-digit-year rule does not apply: $name", ({ text, iso }) => {
    expect(new Date(parseClfTime(text)).toISOString()).toBe(iso);
  });

  test("daysFromCivil matches Date.setUTCFullYear for every year 0-9999", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9999 }),
        fc.integer({ min: 0, max: 11 }),
        fc.integer({ min: 1, max: 28 }),
        (year, month, day) => {
          const oracle = new Date(0);
          oracle.setUTCFullYear(year, month, day);
          expect(daysFromCivil(year, month, day) * 86_400_000).toBe(oracle.getTime());
        },
      ),
    );
  });

  test.each([
    { name: "29 Feb 0100 (not a leap year)", text: "29/Feb/0100:00:00:00 +0000" },
    { name: "31 Feb", text: "31/Feb/2015:10:05:03 +0000" },
    { name: "29 Feb of a common year", text: "29/Feb/2015:10:05:03 +0000" },
    { name: "day 0", text: "00/May/2015:10:05:03 +0000" },
    { name: "hour 24", text: "17/May/2015:24:00:00 +0000" },
    { name: "minute 60", text: "17/May/2015:10:60:00 +0000" },
    { name: "unknown month", text: "17/Mai/2015:10:05:03 +0000" },
    { name: "month in capitals", text: "17/MAY/2015:10:05:03 +0000" },
    { name: "no zone", text: "17/May/2015:10:05:03" },
    { name: "zone +2400", text: "17/May/2015:10:05:03 +2400" },
    { name: "ISO instead of CLF", text: "2015-05-17T10:05:03Z" },
    { name: "empty", text: "" },
  ])("$name is NaN", ({ text }) => {
    expect(parseClfTime(text)).toBeNaN();
  });
});

const record = (host: string | undefined, user: string | undefined, timeMs = T): LogRecord => ({
  timeMs,
  host,
  user,
  fields: undefined,
});

describe("parseCombined", () => {
  test.each([
    {
      name: "a line of the excerpt",
      line: `100.64.0.216 - - [17/May/2015:10:05:03 +0000] "GET /presentations/logstash-monitorama-2013/images/kibana-search.png HTTP/1.1" 200 203023 "http://semicomplete.com/presentations/logstash-monitorama-2013/" "${UA}"`,
      want: record("100.64.0.216", undefined),
    },
    {
      name: "authenticated user, size -",
      line: `192.0.2.7 - alice [17/May/2015:10:05:03 +0000] "GET /robots.txt HTTP/1.1" 304 - "-" "curl/8.0"`,
      want: record("192.0.2.7", "alice"),
    },
    {
      name: "IPv6 host",
      line: `2001:db8::1 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/2.0" 200 5 "-" "${UA}"`,
      want: record("2001:db8::1", undefined),
    },
    {
      name: "IPv4-mapped IPv6 host",
      line: `::ffff:192.0.2.1 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      want: record("::ffff:192.0.2.1", undefined),
    },
    {
      name: "host name (HostnameLookups On)",
      line: `crawl-66-249-73-135.googlebot.com - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      want: record("crawl-66-249-73-135.googlebot.com", undefined),
    },
    {
      name: "escaped quotes and spaces in the user agent",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "Evil \\"quoted\\" agent (with spaces)"`,
      want: record("192.0.2.7", undefined),
    },
    {
      name: "escaped quote in the request",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET /search?q=\\"a b\\" HTTP/1.1" 200 5 "-" "-"`,
      want: record("192.0.2.7", undefined),
    },
    {
      name: "raw quote in the request (attack traffic)",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET /x" onmouseover="alert(1) HTTP/1.1" 400 226 "-" "-"`,
      want: record("192.0.2.7", undefined),
    },
    {
      name: "empty request (a client that sent nothing)",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "-" 408 - "-" "-"`,
      want: record("192.0.2.7", undefined),
    },
    {
      name: "extra trailing fields (nginx with request time)",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "${UA}" "198.51.100.4" 0.004`,
      want: record("192.0.2.7", undefined),
    },
    {
      name: "user with an escaped-looking name",
      line: `192.0.2.7 - bob@example.com [17/May/2015:10:05:03 +0200] "POST /login HTTP/1.1" 302 0 "https://example.com/" "-"`,
      want: record("192.0.2.7", "bob@example.com", T - 2 * 3_600_000),
    },
  ])("$name", ({ line, want }) => {
    expect(parseCombined(line)).toEqual(want);
  });

  test.each([
    { name: "blank line", line: "   ", reason: "blank line" },
    {
      name: "leading space",
      line: ` 192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      reason: "line starts with a space (no host field)",
    },
    {
      name: "no time",
      line: `192.0.2.7 - - "GET / HTTP/1.1" 200 5 "-" "-"`,
      reason: "expected `host ident user [time]` at the start",
    },
    {
      name: "truncated in the time",
      line: "192.0.2.7 - - [17/May/2015:10:05",
      reason: "unterminated [time] field",
    },
    {
      name: "bad time",
      line: `192.0.2.7 - - [31/Feb/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      reason: "bad time [31/Feb/2015:10:05:03 +0000] (expected dd/Mon/yyyy:HH:MM:SS +hhmm)",
    },
    {
      name: "request not quoted",
      line: "192.0.2.7 - - [17/May/2015:10:05:03 +0000] GET / 200 5",
      reason: 'expected a quoted "request" after the time',
    },
    {
      name: "status not a number",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" OK 5 "-" "-"`,
      reason: 'expected a quoted "request" followed by status and size',
    },
    {
      name: "truncated in the request",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET /very/long`,
      reason:
        'unclosed quote: the "request" field opened at column 44 has no closing quote (the line looks cut off)',
    },
    {
      name: "common line read as combined",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5`,
      reason:
        'the line ends after the size: no "referer" "user-agent" (it reads as Common Log Format: try --format common)',
    },
    {
      // Regression: "try --format common" was proposed, which then skipped every line.
      name: "cut off in the user agent (line 8899 of the shared log)",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "Mozilla`,
      reason:
        'unclosed quote: the "user-agent" field opened at column 71 has no closing quote (the line looks cut off)',
    },
    {
      name: "cut off in the referer",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "http://exa`,
      reason:
        'unclosed quote: the "referer" field opened at column 67 has no closing quote (the line looks cut off)',
    },
    {
      name: "cut off after the referer",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-"`,
      reason: 'the line ends after the "referer": no "user-agent"',
    },
    {
      name: "an unquoted referer",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 - "-"`,
      reason: 'expected a quoted "referer" at column 67',
    },
    {
      name: "JSON line",
      line: `{"time":"2015-05-17T10:05:03Z","ip":"192.0.2.7"}`,
      reason: "expected `host ident user [time]` at the start",
    },
  ])("$name is skipped: $reason", ({ line, reason }) => {
    expect(parseCombined(line)).toBe(reason);
  });
});

// A proposed --format must read the line: checked on every reason that proposes one.
describe("a parse error proposes a format only when that format parses the line", () => {
  const base = `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5`;
  test.each([
    base,
    `${base} "-" "-"`,
    `${base} "-" "Mozilla`,
    `${base} "-`,
    `${base} "-"`,
    `${base} junk`,
    `${base} "-" "-" extra`,
    `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET /`,
  ])("%s", (line) => {
    for (const [parse, other] of [
      [parseCombined, parseCommon],
      [parseCommon, parseCombined],
    ] as const) {
      const reason = parse(line);
      if (typeof reason !== "string") continue;
      const proposed = /try --format (\w+)/.exec(reason)?.[1];
      if (proposed !== undefined) {
        expect(proposed).toBe(other === parseCommon ? "common" : "combined");
        expect(typeof other(line)).toBe("object");
      } else {
        expect(typeof other(line), `${reason} proposes nothing`).toBe("string");
      }
    }
  });
});

describe("parseCommon", () => {
  test.each([
    {
      name: "Common Log Format",
      line: `192.0.2.7 - frank [17/May/2015:10:05:03 +0000] "GET /apache_pb.gif HTTP/1.0" 200 2326`,
      want: record("192.0.2.7", "frank"),
    },
    {
      name: "IPv6 host, size -",
      line: `[2001:db8::1] - - [17/May/2015:10:05:03 +0000] "HEAD / HTTP/1.1" 304 -`,
      want: record("[2001:db8::1]", undefined),
    },
    {
      name: "request with spaces in the path",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET /a b c HTTP/1.1" 404 12`,
      want: record("192.0.2.7", undefined),
    },
  ])("$name", ({ line, want }) => {
    expect(parseCommon(line)).toEqual(want);
  });

  test("a combined line is refused with a hint", () => {
    expect(
      parseCommon(`192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`),
    ).toBe(
      "text after the size field at column 67 (it reads as Combined Log Format: try --format combined)",
    );
  });

  test("a line that is not combined either gets no hint", () => {
    expect(
      parseCommon(`192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "Mozilla`),
    ).toBe("text after the size field at column 67");
  });
});

describe("JSON lines", () => {
  const parse = jsonLineParser();
  test.each([
    {
      name: "ISO time with Z",
      line: `{"time":"2015-05-17T10:05:03Z","ip":"192.0.2.7","user":"alice"}`,
      timeMs: T,
      host: "192.0.2.7",
      user: "alice",
    },
    {
      name: "ISO time with offset and fraction",
      line: `{"timestamp":"2015-05-17T12:05:03.5+02:00","remote_addr":"2001:db8::1"}`,
      timeMs: T + 500,
      host: "2001:db8::1",
      user: undefined,
    },
    {
      name: "epoch milliseconds, @timestamp",
      line: `{"@timestamp":${T},"clientip":"192.0.2.7","remote_user":"-"}`,
      timeMs: T,
      host: "192.0.2.7",
      user: undefined,
    },
  ])("$name", ({ line, timeMs, host, user }) => {
    const r = parse(line);
    expect(r).toMatchObject({ timeMs, host, user });
    expect(typeof r !== "string" && r.fields).toEqual(JSON.parse(line));
  });

  test("--time-field picks the field", () => {
    const r = jsonLineParser("start")(`{"time":"garbage","start":${T}}`);
    expect(r).toMatchObject({ timeMs: T });
  });

  test.each([
    { name: "not JSON", line: "{oops", reason: /^not JSON \(/ },
    { name: "an array", line: "[1,2]", reason: /^not a JSON object$/ },
    {
      name: "no time",
      line: `{"ip":"192.0.2.7"}`,
      reason: /^no time field \(time, timestamp, @timestamp, ts\)$/,
    },
    {
      name: "time without zone",
      line: `{"time":"2015-05-17T10:05:03"}`,
      reason:
        /^bad time time="2015-05-17T10:05:03" \(expected ISO 8601 with a zone, or epoch ms\)$/,
    },
    {
      name: "time as a loose date string",
      line: `{"time":"May 17 2015"}`,
      reason: /^bad time time="May 17 2015"/,
    },
    { name: "time as a numeric string", line: `{"time":"1431857103000"}`, reason: /^bad time/ },
    { name: "time null", line: `{"time":null}`, reason: /^bad time time=null/ },
    { name: "blank", line: "", reason: /^blank line$/ },
  ])("$name is skipped", ({ line, reason }) => {
    expect(parse(line)).toMatch(reason);
  });

  // Regression: `{"ts": 1e16}` parsed, and the report crashed in isoTime with
  // "RangeError: Invalid time value"; the parser now refuses what no Date can hold.
  test.each([
    { name: "1e16", text: "1e16", shown: "10000000000000000" },
    { name: "1e308", text: "1e308", shown: "1e+308" },
    { name: "-1e16", text: "-1e16", shown: "-10000000000000000" },
    { name: "just above 8.64e15", text: "8640000000000001", shown: "8640000000000001" },
  ])("time out of the Date range ($name) is skipped with the reason", ({ text, shown }) => {
    expect(parse(`{"ts":${text},"ip":"1.1.1.1"}`)).toBe(
      `bad time ts=${shown} (outside the representable date range, ±8.64e15 ms)`,
    );
  });

  test.each([
    { name: "+8.64e15", ms: 8.64e15 },
    { name: "-8.64e15", ms: -8.64e15 },
  ])("time at the edge of the Date range ($name) parses", ({ ms }) => {
    expect(parse(`{"ts":${ms},"ip":"1.1.1.1"}`)).toMatchObject({ timeMs: ms });
    expect(new Date(ms).toISOString()).toMatch(/Z$/);
  });

  test("parseJsonTime refuses non-finite numbers", () => {
    expect(parseJsonTime(Number.POSITIVE_INFINITY)).toBeNaN();
    expect(parseJsonTime(Number.NaN)).toBeNaN();
    expect(parseJsonTime(0)).toBe(0);
  });
});

describe("detectFormat", () => {
  test.each([
    {
      name: "combined",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      format: "combined",
    },
    {
      name: "common",
      line: `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5`,
      format: "common",
    },
    { name: "jsonl", line: `  {"time": 0}`, format: "jsonl" },
    { name: "garbage defaults to combined", line: "hello world", format: "combined" },
  ])("$name", ({ line, format }) => {
    expect(detectFormat(line)).toBe(format);
  });
});
