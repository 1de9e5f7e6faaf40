import { describe, expect, test } from "vitest";
import type { MinuteSeries } from "../../src/cli/series.js";
import { type ChartPolicy, logTicks, niceCeil, replayChart, timeTicks } from "../../src/cli/svg.js";
import type { KeyReport } from "../../src/cli/tally.js";

const M = 60_000;
const T0 = Date.UTC(2015, 4, 17, 10, 5);

/** A chart's policy row for `algorithm`. */
const policy = (algorithm: string, denied = 0, limitPerMinute?: number): ChartPolicy => ({
  algorithm,
  options: "limit 5, windowMs 60000",
  requests: 100,
  denied,
  limitPerMinute,
});

const key = (name: string, denied: number[], requests = 50): KeyReport => ({
  key: name,
  requests,
  peakPerMinute: 9,
  denied,
  approximate: false,
  deniedErrorMax: 0,
});

/** The bars of one group of a chart (`class="…"`): [x, y, width, height]. */
function bars(svg: string, group: string) {
  const start = svg.indexOf(`class="${group}"`);
  if (start === -1) return [];
  const body = svg.slice(start, svg.indexOf("</g>", start));
  return [
    ...body.matchAll(/<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"\/>/g),
  ].map((m) => ({ x: Number(m[1]), y: Number(m[2]), w: Number(m[3]), h: Number(m[4]) }));
}

/** The denial strips: algorithm and bar heights. */
function strips(svg: string) {
  return [...svg.matchAll(/class="denied" data-algorithm="([\w-]+)"/g)].map((m) => m[1]);
}

/** The control and bidi characters in `text` (C0 but newline, DEL, C1, U+2028/9, U+202A-E). */
function unsafeChars(text: string): string[] {
  return [...text].filter((c) => {
    const n = c.charCodeAt(0);
    return (n < 0x20 && n !== 10) || (n >= 0x7f && n <= 0x9f) || (n >= 0x2028 && n <= 0x202e);
  });
}

describe("replayChart", () => {
  const series: MinuteSeries = {
    minuteMs: [T0, T0 + M, T0 + 3 * M],
    requests: [10, 60, 10],
    busiestClient: [4, 30, 10],
    denied: [
      [0, 20, 5],
      [0, 25, 9],
    ],
  };
  const two = [policy("token-bucket", 25, 6), policy("fixed-window", 34, 6)];

  test("compare svg draws every algorithm: one strip of denials per policy, in its colour", () => {
    const svg = replayChart(series, { title: "t", policies: two, top: [], keyName: "ip" });
    expect(strips(svg)).toEqual(["token-bucket", "fixed-window"]);
    expect(svg).toContain('data-algorithm="token-bucket" fill="#1f77b4"');
    expect(svg).toContain('data-algorithm="fixed-window" fill="#ff7f0e"');
    // Each strip has the bars of its own policy (minutes 2 and 4), the second taller.
    const s = svg.split('class="denied"');
    const heights = (part: string) =>
      [...part.slice(0, part.indexOf("</g>")).matchAll(/height="([\d.]+)"/g)].map((m) =>
        Number(m[1]),
      );
    const first = heights(s[1]!);
    const second = heights(s[2]!);
    expect(first).toHaveLength(2);
    expect(second).toHaveLength(2);
    expect(second[0]!).toBeGreaterThan(first[0]!);
    expect(second[1]!).toBeGreaterThan(first[1]!);
    expect(svg).toContain("token-bucket (limit 5, windowMs 60000): 25 denied of 100 (25.0%)");
  });

  test("requests per minute on a log scale, with the busiest client and the limit line", () => {
    const svg = replayChart(series, { title: "t", policies: two, top: [], keyName: "ip" });
    const req = bars(svg, "requests");
    expect(req).toHaveLength(3);
    // log10(1 + v): 60 requests stand log10(61) / log10(11) ≈ 1.71 times as high as 10.
    expect(req[1]!.h / req[0]!.h).toBeCloseTo(Math.log10(61) / Math.log10(11), 1);
    const base = req[0]!.y + req[0]!.h;
    expect(req.every((b) => Math.abs(b.y + b.h - base) < 0.2)).toBe(true);
    // The busiest client: one mark per minute.
    const marks = svg.match(/class="busiest" d="([^"]+)"/)![1]!.match(/M/g)!;
    expect(marks).toHaveLength(3);
    // One limit line (both policies allow 6/min), labelled, between the 1 and 10 grid lines.
    const limits = [...svg.matchAll(/class="limit" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"/g)];
    expect(limits).toHaveLength(1);
    expect(svg).toContain("limit per ip: 6/min long-run (+ burst)");
    const y = (v: string) =>
      Number(svg.match(new RegExp(`y="([\\d.]+)" text-anchor="end" fill="#666">${v}<`))![1]) - 4;
    const limitY = Number(limits[0]![1]);
    expect(limitY).toBeLessThan(y("1"));
    expect(limitY).toBeGreaterThan(y("10"));
  });

  test("the most limited clients: a labelled bar per policy, to scale", () => {
    const top = [key("192.0.2.7", [40, 80], 200), key("192.0.2.9", [10, 20])];
    const svg = replayChart(series, { title: "t", policies: two, top, keyName: "ip" });
    expect(svg).toContain(">192.0.2.7</text>");
    expect(svg).toContain(">40 of 200 denied (20.0%), peak 9/min</text>");
    const widths = [...svg.matchAll(/class="top-bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"/g)].map(
      (m) => Number(m[1]),
    );
    expect(widths).toHaveLength(4);
    expect(widths[1]! / widths[0]!).toBeCloseTo(2, 1);
    expect(widths[0]! / widths[2]!).toBeCloseTo(4, 1);
    expect(svg).toContain("Most limited clients: top 2 by token-bucket denials");
  });

  test("no client denied: the panel says so", () => {
    const svg = replayChart(series, { title: "t", policies: two, top: [], keyName: "user" });
    expect(svg).toContain("Most limited clients: no user was denied");
  });

  test("escape sequences in a key are escaped in the SVG text, which stays well-formed XML", () => {
    const top = [key("\x1b[2J<b>&\u202e", [3, 3])];
    const svg = replayChart(series, { title: "t\x07", policies: two, top, keyName: "ip" });
    expect(svg).toContain(">\\x1b[2J&lt;b&gt;&amp;\\u{202e}</text>");
    expect(svg).toContain("<title>t\\x07</title>");
    // XML 1.0 allows no C0 character but tab, newline and carriage return.
    expect(unsafeChars(svg)).toEqual([]);
  });

  // Regression: a literal `\x1b` (four characters) in a key looked like an escaped ESC.
  test("a literal backslash sequence in a key is escaped once, unlike a real ESC", () => {
    const top = [key("lit\\x1b", [3, 3]), key("esc\x1b", [2, 2])];
    const svg = replayChart(series, { title: "t", policies: two, top, keyName: "ip" });
    expect(svg).toContain(">lit\\\\x1b</text>");
    expect(svg).toContain(">esc\\x1b</text>");
  });

  test("a sparse log (one minute an hour) is drawn minute by minute, idle time left out", () => {
    const hours = Array.from({ length: 84 }, (_, h) => T0 + h * 60 * M);
    const sparse: MinuteSeries = {
      minuteMs: hours,
      requests: hours.map(() => 100),
      busiestClient: hours.map(() => 20),
      denied: [hours.map(() => 5)],
    };
    const svg = replayChart(sparse, {
      title: "t",
      policies: [policy("token-bucket", 420, 6)],
      top: [],
      keyName: "ip",
    });
    const req = bars(svg, "requests");
    expect(req).toHaveLength(84);
    // Side by side, evenly: bars of several pixels, not one-pixel teeth of a comb.
    expect(req[0]!.w).toBeGreaterThan(5);
    expect(req[1]!.x - req[0]!.x).toBeCloseTo(req[83]!.x - req[82]!.x, 1);
    expect(svg).toContain("only the 84 minutes with requests, side by side");
    const labels = [...svg.matchAll(/>(05-\d\d \d\d:05)</g)].map((m) => m[1]);
    expect(labels.length).toBeGreaterThan(2);
    expect(labels.length).toBeLessThanOrEqual(7);
  });

  test("a long busy span is binned: each bar is the busiest minute of its bin", () => {
    const minutes = Array.from({ length: 1440 }, (_, i) => T0 + i * M);
    const day: MinuteSeries = {
      minuteMs: minutes,
      requests: minutes.map((_, i) => (i === 2 ? 51 : 3)),
      busiestClient: minutes.map(() => 1),
      denied: [minutes.map((_, i) => (i === 2 ? 50 : 0))],
    };
    const svg = replayChart(day, {
      title: "t",
      policies: [policy("fixed-window")],
      top: [],
      keyName: "ip",
      maxBars: 144,
    });
    expect(svg).toContain("each bar is the busiest minute of 10 minutes");
    const req = bars(svg, "requests");
    expect(req).toHaveLength(144);
    expect(req[0]!.h).toBeGreaterThan(req[1]!.h);
    expect(bars(svg, "denied")).toHaveLength(1);
  });

  test("five years of minutes: at most seven x labels (regression: 260 overlapping labels)", () => {
    // One minute a day for five years: too many for one bar each, so time is continuous.
    const days = Array.from({ length: 1820 }, (_, d) => T0 + d * 1440 * M);
    const years: MinuteSeries = {
      minuteMs: days,
      requests: days.map(() => 1),
      busiestClient: days.map(() => 1),
      denied: [days.map(() => 0)],
    };
    const svg = replayChart(years, {
      title: "t",
      policies: [policy("fixed-window")],
      top: [],
      keyName: "ip",
    });
    const labels = [...svg.matchAll(/text-anchor="\w+" fill="#666">([^<]+)<\/text>/g)]
      .map((m) => m[1])
      .filter((l) => /^\d{4}$/.test(l!));
    expect(labels).toEqual(["2016", "2017", "2018", "2019", "2020"]);
  });

  test("two minutes five years apart: labelled with their years", () => {
    const two: MinuteSeries = {
      minuteMs: [T0, Date.UTC(2020, 4, 10, 21, 40)],
      requests: [1, 1],
      busiestClient: [1, 1],
      denied: [[0, 0]],
    };
    const svg = replayChart(two, {
      title: "t",
      policies: [policy("fixed-window")],
      top: [],
      keyName: "ip",
    });
    const labels = [...svg.matchAll(/fill="#666">(\d{4}-\d\d-\d\d \d\d:\d\d)<\/text>/g)].map(
      (m) => m[1],
    );
    expect(labels).toEqual(["2015-05-17 10:05", "2020-05-10 21:40"]);
  });

  test("an empty series is a valid empty chart", () => {
    const svg = replayChart(
      { minuteMs: [], requests: [], busiestClient: [], denied: [[]] },
      { title: "nothing", policies: [policy("token-bucket")], top: [], keyName: "ip" },
    );
    expect(bars(svg, "requests")).toEqual([]);
    expect(svg).toContain("<title>nothing</title>");
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
  });
});

describe("logTicks", () => {
  test.each([
    { peak: 0, ticks: [0, 1, 2], top: 2 },
    { peak: 7, ticks: [0, 1, 2, 5, 10], top: 10 },
    { peak: 30, ticks: [0, 1, 2, 5, 10, 20, 50], top: 50 },
    { peak: 136, ticks: [0, 1, 10, 100, 1000], top: 1000 },
    { peak: 5000, ticks: [0, 1, 10, 100, 1000, 10000], top: 10000 },
  ])("peak $peak", ({ peak, ticks, top }) => {
    expect(logTicks(peak)).toEqual({ ticks, top });
  });
});

describe("niceCeil", () => {
  test.each([
    [0, 1],
    [0.3, 0.5],
    [1, 1],
    [1.5, 2],
    [3, 5],
    [7, 10],
    [12, 20],
    [23.6, 50],
    [100, 100],
    [101, 200],
  ])("%d -> %d", (value, want) => {
    expect(niceCeil(value)).toBeCloseTo(want, 10);
  });
});

describe("timeTicks", () => {
  const at = (y: number, mo: number, d: number, h = 0, mi = 0) => Date.UTC(y, mo - 1, d, h, mi);
  test.each([
    {
      name: "ten minutes: every 2 min",
      from: at(2015, 5, 17, 10, 5),
      to: at(2015, 5, 17, 10, 15),
      labels: ["05-17 10:06", "05-17 10:08", "05-17 10:10", "05-17 10:12", "05-17 10:14"],
    },
    {
      name: "three days: every 12 h",
      from: at(2015, 5, 17, 10, 5),
      to: at(2015, 5, 20, 10, 5),
      labels: [
        "05-17 12:00",
        "05-18 00:00",
        "05-18 12:00",
        "05-19 00:00",
        "05-19 12:00",
        "05-20 00:00",
      ],
    },
    {
      name: "a month: weekly, dates only",
      from: at(2015, 5, 1),
      to: at(2015, 5, 31),
      labels: ["05-07", "05-14", "05-21", "05-28"],
    },
    {
      name: "across new year: with the year",
      from: at(2015, 12, 31, 20),
      to: at(2016, 1, 1, 4),
      labels: [
        "2015-12-31 20:00",
        "2015-12-31 22:00",
        "2016-01-01 00:00",
        "2016-01-01 02:00",
        "2016-01-01 04:00",
      ],
    },
    {
      name: "a year: every 2 months",
      from: at(2015, 5, 17),
      to: at(2016, 5, 17),
      labels: ["2015-07", "2015-09", "2015-11", "2016-01", "2016-03", "2016-05"],
    },
  ])("$name", ({ from, to, labels }) => {
    const ticks = timeTicks(from, to);
    expect(ticks.map((t) => t.label)).toEqual(labels);
    expect(ticks.every((t) => t.atMs >= from && t.atMs <= to)).toBe(true);
  });
});

// Regression: a chart whose span reached the end of the Date range hung (Date.UTC gave
// NaN, and `NaN > toMs` never ended the month loop) or threw in toISOString; month ticks
// of years 0-99 were placed in 1900-1999 by Date.UTC.
describe("timeTicks at the edges of the Date range", () => {
  const MAX = 8.64e15;
  test.each([
    { name: "the whole range", from: -MAX, to: MAX },
    {
      name: "a span ending past the last instant (minutes)",
      from: MAX - 120_000,
      to: MAX + 60_000,
    },
    { name: "a span ending past the last instant (years)", from: MAX - 1e13, to: MAX + 1e12 },
    { name: "a span starting before the first instant", from: -MAX - 60_000, to: -MAX + 120_000 },
  ])("$name: at most seven ticks, all representable", ({ from, to }) => {
    const ticks = timeTicks(from, to);
    expect(ticks.length).toBeGreaterThan(0);
    expect(ticks.length).toBeLessThanOrEqual(7);
    for (const t of ticks) {
      expect(Math.abs(t.atMs)).toBeLessThanOrEqual(MAX);
      expect(t.atMs >= from && t.atMs <= to).toBe(true);
    }
  });

  test("the whole range is labelled in years (ISO 8601 expanded years past 9999)", () => {
    expect(timeTicks(-MAX, MAX).map((t) => t.label)).toEqual([
      "-200000",
      "-100000",
      "0000",
      "+100000",
      "+200000",
    ]);
  });

  test("years 0050-0053 are labelled as such, not 1950-1953", () => {
    const from = new Date(0);
    from.setUTCFullYear(50, 0, 15);
    const to = new Date(0);
    to.setUTCFullYear(53, 11, 15);
    const ticks = timeTicks(from.getTime(), to.getTime());
    expect(ticks.map((t) => t.label)).toEqual(["0051", "0052", "0053"]);
    for (const t of ticks)
      expect(new Date(t.atMs).toISOString()).toBe(`${t.label}-01-01T00:00:00.000Z`);
  });

  test("month ticks in year 0050 are in 0050", () => {
    const from = new Date(0);
    from.setUTCFullYear(50, 0, 15);
    const to = new Date(0);
    to.setUTCFullYear(50, 11, 15);
    const ticks = timeTicks(from.getTime(), to.getTime());
    expect(ticks.map((t) => t.label)).toEqual([
      "0050-03",
      "0050-05",
      "0050-07",
      "0050-09",
      "0050-11",
    ]);
    for (const t of ticks)
      expect(new Date(t.atMs).toISOString()).toBe(`${t.label}-01T00:00:00.000Z`);
  });

  test("a chart from the first to the last instant is drawn (it hung)", () => {
    const svg = replayChart(
      { minuteMs: [-MAX, MAX], requests: [1, 2], busiestClient: [1, 2], denied: [[0, 1]] },
      { title: "edges", policies: [policy("token-bucket", 1)], top: [], keyName: "ip" },
    );
    expect(svg).toContain("</svg>");
    expect(svg).toContain(">-271821-04-20 00:00</text>");
    expect(svg).toContain(">+275760-09-13 00:00</text>");
  });
});
