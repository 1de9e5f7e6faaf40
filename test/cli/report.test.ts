import { describe, expect, test } from "vitest";
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
      top: [{ key: "alice", requests: 5, peakPerMinute: 5, denied: [2] }],
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
