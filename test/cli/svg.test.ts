import { describe, expect, test } from "vitest";
import type { MinuteSeries } from "../../src/cli/replay.js";
import { minuteChart, niceCeil, timeTicks } from "../../src/cli/svg.js";

const M = 60_000;
const T0 = Date.UTC(2015, 4, 17, 10, 5);

/** The bars of a chart: [x, y, width, height, fill]. */
function rects(svg: string) {
  const bars = svg.slice(svg.indexOf('<g shape-rendering="crispEdges">'), svg.indexOf("</g>"));
  return [
    ...bars.matchAll(
      /<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="(#\w+)"\/>/g,
    ),
  ].map((m) => ({
    x: Number(m[1]),
    y: Number(m[2]),
    w: Number(m[3]),
    h: Number(m[4]),
    fill: m[5],
  }));
}

describe("minuteChart", () => {
  const series: MinuteSeries = {
    minuteMs: [T0, T0 + M, T0 + 3 * M],
    allowed: [10, 40, 5],
    denied: [0, 20, 5],
  };

  test("one bar per minute: allowed from the axis, denied stacked on top, heights to scale", () => {
    const svg = minuteChart(series, { title: "t" });
    const bars = rects(svg);
    expect(bars.map((b) => b.fill)).toEqual([
      "#4c78a8",
      "#4c78a8",
      "#e45756",
      "#4c78a8",
      "#e45756",
    ]);
    // Peak 60 per minute: step niceCeil(12) = 20, y axis 0..60; plot height 360 - 48 - 56 = 256.
    const unit = 256 / 60;
    expect(bars[0]!.h).toBeCloseTo(10 * unit, 1);
    expect(bars[1]!.h).toBeCloseTo(40 * unit, 1);
    expect(bars[2]!.h).toBeCloseTo(20 * unit, 1);
    expect(bars[2]!.y + bars[2]!.h).toBeCloseTo(bars[1]!.y, 1); // stacked
    expect(bars[0]!.y + bars[0]!.h).toBe(304); // on the axis
    // Four minutes of span: the third bar is three steps right of the first.
    const step = bars[1]!.x - bars[0]!.x;
    expect(bars[3]!.x - bars[0]!.x).toBeCloseTo(3 * step, 0);
    expect(svg).toContain('text-anchor="end" fill="#555">60</text>');
    expect(svg).toContain("time (UTC), one bar per minute");
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
  });

  test("a long span is binned: each bar is the busiest minute of its bin", () => {
    const day: MinuteSeries = {
      minuteMs: [T0, T0 + M, T0 + 2 * M, T0 + 1439 * M],
      allowed: [3, 9, 1, 2],
      denied: [0, 1, 50, 0],
    };
    const svg = minuteChart(day, { title: "t", maxBars: 144 });
    expect(svg).toContain("each bar is the busiest minute of 10 minutes");
    const bars = rects(svg);
    // First bin: minute 2 (51 requests) beats minute 1 (10) and minute 0 (3).
    expect(bars.slice(0, 2).map((b) => b.fill)).toEqual(["#4c78a8", "#e45756"]);
    expect(bars[1]!.h / bars[0]!.h).toBeCloseTo(50, 0);
    expect(bars).toHaveLength(3);
  });

  test("text is escaped; the subtitle is drawn", () => {
    const svg = minuteChart(series, { title: 'a <b> & "c"', subtitle: "x<y" });
    expect(svg).toContain("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>");
    expect(svg).toContain(">x&lt;y</text>");
  });

  test("x ticks at round UTC times", () => {
    const hours: MinuteSeries = { minuteMs: [T0, T0 + 240 * M], allowed: [1, 1], denied: [0, 0] };
    const svg = minuteChart(hours, { title: "t" });
    const labels = [...svg.matchAll(/>(05-17 \d\d:\d\d)</g)].map((m) => m[1]);
    expect(labels).toEqual(["05-17 11:00", "05-17 12:00", "05-17 13:00", "05-17 14:00"]);
  });

  test("five years of minutes: at most seven x labels (regression: 260 overlapping labels)", () => {
    const years: MinuteSeries = {
      minuteMs: [T0, Date.UTC(2020, 4, 10, 21, 40)],
      allowed: [1, 1],
      denied: [0, 0],
    };
    const svg = minuteChart(years, { title: "t" });
    const labels = [...svg.matchAll(/text-anchor="\w+" fill="#555">([^<]+)<\/text>/g)]
      .map((m) => m[1])
      .filter((l) => /^\d{4}$/.test(l!));
    expect(labels).toEqual(["2016", "2017", "2018", "2019", "2020"]);
  });

  test("an empty series is a valid empty chart", () => {
    const svg = minuteChart({ minuteMs: [], allowed: [], denied: [] }, { title: "nothing" });
    expect(rects(svg)).toEqual([]);
    expect(svg).toContain("<title>nothing</title>");
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
    const svg = minuteChart(
      { minuteMs: [-MAX, MAX], allowed: [1, 1], denied: [0, 1] },
      { title: "edges" },
    );
    expect(svg).toContain("</svg>");
    expect(svg).toContain(">0000</text>");
  });
});
