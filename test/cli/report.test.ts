import { describe, expect, test } from "vitest";
import { printable } from "../../src/cli/printable.js";
import type { ReplayReport } from "../../src/cli/replay.js";
import { humanDuration, isoTime, jsonReport, percent, textReport } from "../../src/cli/report.js";

const base: ReplayReport = {
  format: "combined",
  key: "user",
  lines: {
    read: 12,
    parsed: 10,
    skipped: 2,
    unkeyed: 4,
    samples: [{ line: 7, reason: "blank line", text: "" }],
  },
  firstMs: Date.UTC(2015, 4, 17, 10, 5),
  lastMs: Date.UTC(2015, 4, 17, 10, 6, 30),
  reorder: { windowMs: 60_000, reordered: 3, late: 1, peakBuffered: 5 },
  distinctKeys: 2,
  distinctKeysExact: true,
  untalliedRequests: 0,
  results: [
    {
      algorithm: "token-bucket",
      options: { capacity: 2, refillPerSecond: 0.5 },
      derived: false,
      allowed: 6,
      denied: 0,
      peakLiveKeys: 2,
      lossyEvictions: 3,
    },
  ],
  top: [],
  series: undefined,
};

describe("textReport", () => {
  test("summary lines, unkeyed lines, lossy warning, no denials, skipped samples", () => {
    expect(textReport(base, "in.log")).toBe(
      [
        "tollgate replay in.log",
        "  format combined, key user",
        "  lines     12 read, 10 parsed, 2 skipped, 4 without a user (not replayed)",
        "  time      2015-05-17T10:05:00Z .. 2015-05-17T10:06:30Z (1m 30s)",
        "  reorder   window 60000 ms: 3 lines put back in order, 1 too late (decided at the latest time)",
        "  keys      2 distinct",
        "",
        "  algorithm     options                          requests     allowed    denied  peak live keys",
        "  token-bucket  capacity 2, refillPerSecond 0.5         6  6 (100.0%)  0 (0.0%)               2",
        "  warning: token-bucket evicted 3 keys in use at --max-keys; raise it for exact results",
        "",
        "  no request was denied",
        "",
        "  skipped lines (first 1 of 2)",
        "    line 7: blank line",
        "",
      ].join("\n"),
    );
  });

  test("top keys of one policy show denials with their share", () => {
    const report: ReplayReport = {
      ...base,
      results: [{ ...base.results[0]!, allowed: 4, denied: 2, lossyEvictions: 0 }],
      top: [
        {
          key: "alice",
          requests: 5,
          peakPerMinute: 5,
          denied: [2],
          approximate: false,
          deniedErrorMax: 0,
        },
      ],
      lines: { ...base.lines, unkeyed: 0, samples: [] },
    };
    const text = textReport(report, "in.log");
    expect(text).toContain(
      "  top 1 keys by denials (token-bucket)\n  key    requests  peak/min     denied\n  alice         5         5  2 (40.0%)\n",
    );
    expect(text).not.toContain("warning");
  });
});

describe("jsonReport", () => {
  test("shape and percentages", () => {
    const json = JSON.parse(jsonReport(base, "in.log"));
    expect(json.time).toEqual({
      first: "2015-05-17T10:05:00Z",
      last: "2015-05-17T10:06:30Z",
      spanMs: 90_000,
    });
    expect(json.results[0]).toEqual({
      algorithm: "token-bucket",
      options: { capacity: 2, refillPerSecond: 0.5 },
      derived: false,
      requests: 6,
      allowed: 6,
      denied: 0,
      allowedPercent: 100,
      deniedPercent: 0,
      peakLiveKeys: 2,
      lossyEvictions: 3,
    });
    expect(json.lines.skippedSamples).toEqual([{ line: 7, reason: "blank line", text: "" }]);
  });

  test("no parsed line: time is null", () => {
    const json = JSON.parse(jsonReport({ ...base, firstMs: undefined, lastMs: undefined }, "-"));
    expect(json.time).toBeNull();
  });
});

describe("formatting helpers", () => {
  test.each([
    [0, "0s"],
    [59_400, "59s"],
    [61_000, "1m 1s"],
    [14_456_000, "4h 0m 56s"],
    [3 * 86_400_000 + 20 * 3_600_000 + 59 * 60_000, "3d 20h 59m"],
  ])("humanDuration(%d) = %s", (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });

  test("percent and isoTime", () => {
    expect(percent(1, 3)).toBe("33.3%");
    expect(percent(0, 0)).toBe("0.0%");
    expect(isoTime(Date.UTC(2015, 4, 17, 10, 5, 3))).toBe("2015-05-17T10:05:03Z");
    expect(isoTime(Date.UTC(2015, 4, 17, 10, 5, 3, 250))).toBe("2015-05-17T10:05:03.250Z");
  });
});

/** The control and bidi characters in `text` (C0 but newline, DEL, C1, U+2028/9, U+202A-E). */
function unsafeChars(text: string): string[] {
  return [...text].filter((c) => {
    const n = c.charCodeAt(0);
    return (n < 0x20 && n !== 10) || (n >= 0x7f && n <= 0x9f) || (n >= 0x2028 && n <= 0x202e);
  });
}

describe("log content is escaped in human-readable output", () => {
  const ESC = "\x1b";
  const denied: ReplayReport = {
    ...base,
    results: [{ ...base.results[0]!, allowed: 4, denied: 2, lossyEvictions: 0 }],
    top: [
      {
        key: `${ESC}]0;pwned${ESC}\\${ESC}[2J\u202eevil`,
        requests: 5,
        peakPerMinute: 5,
        denied: [2],
        approximate: false,
        deniedErrorMax: 0,
      },
    ],
    lines: {
      ...base.lines,
      samples: [
        {
          line: 3,
          reason: `not JSON (Unexpected token ${ESC}[31m)`,
          text: `192.0.2.1 - - [17/May/2015:10:05:00 +0000] "GET /${ESC}[2J HTTP/1.1" 200 5 "-" "curl\x07\x7f\x9b\u2028"`,
        },
      ],
    },
  };

  test("escape sequences in a user agent are escaped in the skipped-line samples", () => {
    const text = textReport(denied, "in.log");
    expect(text).toContain(
      '      192.0.2.1 - - [17/May/2015:10:05:00 +0000] "GET /\\x1b[2J HTTP/1.1" 200 5 "-" "curl\\x07\\x7f\\x9b\\u{2028}"\n',
    );
    expect(text).toContain("    line 3: not JSON (Unexpected token \\x1b[31m)\n");
  });

  test("escape sequences and bidi overrides in a key are escaped in the text report", () => {
    const text = textReport(denied, "in.log");
    // The string terminator ESC \ shows its backslash doubled (see the backslash test).
    expect(text).toContain("\\x1b]0;pwned\\x1b\\\\\\x1b[2J\\u{202e}evil");
    // No control character reaches the terminal, except the report's own newlines.
    expect(unsafeChars(text)).toEqual([]);
  });

  // Regression: backslashes were left as logged, so the four characters `\x1b` in a log
  // printed exactly like a real ESC escaped.
  test("a literal backslash sequence and a real ESC print differently; JSON keeps both", () => {
    const literal = "agent\\x1b[2J"; // backslash, x, 1, b: text a client wrote
    const real = `agent${ESC}[2J`;
    const report: ReplayReport = {
      ...denied,
      top: [
        { ...denied.top[0]!, key: literal },
        { ...denied.top[0]!, key: real, denied: [1] },
      ],
    };
    const text = textReport(report, "in.log");
    expect(text).toContain("  agent\\\\x1b[2J ");
    expect(text).toContain("  agent\\x1b[2J ");
    expect(printable(literal)).not.toBe(printable(real));
    expect(printable("C:\\logs\\a.log")).toBe("C:\\\\logs\\\\a.log");
    // --json is unchanged: JSON.stringify's own escapes, parsing back to what was logged.
    const json = jsonReport(report, "in.log");
    expect(json).toContain('"key": "agent\\\\x1b[2J"');
    expect(json).toContain('"key": "agent\\u001b[2J"');
    expect(JSON.parse(json).top.map((k: { key: string }) => k.key)).toEqual([literal, real]);
  });

  test("a source path with control characters is escaped in the text report", () => {
    expect(textReport(base, `in${ESC}[2J.log`)).toContain("tollgate replay in\\x1b[2J.log\n");
  });

  test("--json stays valid JSON and keeps the text; DEL, C1, U+2028/2029 and bidi are escaped", () => {
    const json = jsonReport(denied, "in.log");
    const parsed = JSON.parse(json);
    expect(parsed.top[0].key).toBe(denied.top[0]!.key);
    expect(parsed.lines.skippedSamples[0].text).toBe(denied.lines.samples[0]!.text);
    expect(unsafeChars(json)).toEqual([]);
    expect(json).toContain("curl\\u0007\\u007f\\u009b\\u2028");
  });

  test("an approximate key is marked and explained", () => {
    const report: ReplayReport = {
      ...denied,
      distinctKeys: 123_456,
      distinctKeysExact: false,
      top: [{ ...denied.top[0]!, key: "alice", approximate: true, deniedErrorMax: 7 }],
    };
    const text = textReport(report, "in.log");
    expect(text).toContain("  keys      about 123456 distinct (estimated: more than --max-keys");
    expect(text).toContain("  alice ~");
    expect(text).toContain("denials may be up to 7 more");
  });
});
