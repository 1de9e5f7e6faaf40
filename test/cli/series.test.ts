import { Readable } from "node:stream";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { comparePolicies, singlePolicy } from "../../src/cli/policy.js";
import { replay } from "../../src/cli/replay.js";
import { bucketText, MAX_SERIES_BUCKETS, SeriesBuilder } from "../../src/cli/series.js";
import { replayChart } from "../../src/cli/svg.js";

const M = 60_000;

/** One Combined Log Format line at `ms` from `host`. */
function clf(ms: number, host: string): string {
  const d = new Date(ms);
  const mon = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(" ")[d.getUTCMonth()]!;
  const p = (n: number) => String(n).padStart(2, "0");
  return `${host} - - [${p(d.getUTCDate())}/${mon}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000] "GET / HTTP/1.1" 200 5 "-" "t"`;
}

/**
 * The reference: exact per-minute counts, then each minute into the bucket of the
 * builder's final size by maximum (what a bucket holds: its busiest minute's values).
 */
function reference(
  requests: readonly { minute: number; client: number; denied: readonly number[] }[],
  bucketMinutes: number,
  policies: number,
) {
  const perMinute = new Map<number, number[]>();
  for (const r of requests) {
    let row = perMinute.get(r.minute);
    if (row === undefined) perMinute.set(r.minute, (row = new Array(2 + policies).fill(0)));
    row[0]! += 1;
    row[1] = Math.max(row[1]!, r.client);
    for (let i = 0; i < policies; i++) row[2 + i]! += r.denied[i]!;
  }
  const buckets = new Map<number, number[]>();
  for (const [minute, row] of perMinute) {
    const b = Math.floor(minute / bucketMinutes);
    const held = buckets.get(b);
    buckets.set(b, held === undefined ? row : held.map((v, i) => Math.max(v, row[i]!)));
  }
  const keys = [...buckets.keys()].sort((a, b) => a - b);
  return {
    minuteMs: keys.map((b) => b * bucketMinutes * M),
    requests: keys.map((b) => buckets.get(b)![0]),
    busiestClient: keys.map((b) => buckets.get(b)![1]),
    denied: Array.from({ length: policies }, (_, i) => keys.map((b) => buckets.get(b)![2 + i])),
  };
}

describe("SeriesBuilder", () => {
  test("property: bounded, and equal to per-minute counts folded into its buckets by maximum", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.array(
          fc.record({
            step: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 }), fc.nat(200_000)),
            client: fc.integer({ min: 1, max: 9 }),
            denied: fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 1 })),
          }),
          { maxLength: 120 },
        ),
        fc.integer({ min: -3_000_000, max: 3_000_000 }),
        (maxBuckets, steps, start) => {
          const builder = new SeriesBuilder(2, maxBuckets);
          let minute = start;
          const requests = [];
          for (const s of steps) {
            minute += s.step;
            builder.add(minute, s.client, Uint8Array.from(s.denied));
            expect(builder.size).toBeLessThanOrEqual(maxBuckets);
            requests.push({ minute, client: s.client, denied: s.denied });
          }
          const series = builder.finish();
          expect(series.minuteMs.length).toBeLessThanOrEqual(maxBuckets);
          const { bucketMinutes } = series;
          expect(bucketMinutes).toBe(builder.minutesPerBucket);
          expect(series).toEqual({ ...reference(requests, bucketMinutes!, 2), bucketMinutes });
        },
      ),
      { numRuns: 300 },
    );
  });

  test("bucket sizes grow 1, 5, 15, 60, 360, 1440, 10080 minutes, then double", () => {
    const sizes: number[] = [];
    const builder = new SeriesBuilder(1, 2);
    // A request every minute for 60 days, two buckets at most.
    for (let minute = 0; minute < 60 * 1440; minute++) {
      builder.add(minute, 1, Uint8Array.of(0));
      if (sizes.at(-1) !== builder.minutesPerBucket) sizes.push(builder.minutesPerBucket);
    }
    expect(sizes).toEqual([1, 5, 15, 60, 360, 1440, 10_080, 20_160, 40_320, 80_640]);
    expect(bucketText(5)).toBe("5 min");
    expect(bucketText(360)).toBe("6 h");
    expect(bucketText(10_080)).toBe("7 d");
  });

  test("maxBuckets below 2 is a RangeError", () => {
    expect(() => new SeriesBuilder(1, 1)).toThrow(
      "SeriesBuilder: maxBuckets must be an integer >= 2, got 1",
    );
  });
});

// Regression: the series behind --svg held one entry per minute with requests, so a log
// of a year with a request every minute or so held hundreds of thousands of entries.
describe("the chart's series is bounded whatever the span of the log", () => {
  test("a log of lines far apart over years keeps at most MAX_SERIES_BUCKETS buckets", async () => {
    // 6,000 lines, one every 97 minutes: 6,000 minutes with requests over 1.1 years.
    const t0 = Date.UTC(2020, 0, 1);
    const text = Array.from({ length: 6000 }, (_, i) =>
      clf(t0 + i * 97 * M, `192.0.2.${i % 3}`),
    ).join("\n");
    const policies = [singlePolicy("fixed-window", { limit: 1, windowMs: 60_000 })];
    const report = await replay(Readable.from([text]), { policies, series: true });
    const series = report.series!;
    expect(report.lines.parsed).toBe(6000);
    expect(series.minuteMs.length).toBeLessThanOrEqual(MAX_SERIES_BUCKETS);
    expect(series.bucketMinutes).toBe(360);
    // Each bucket holds its busiest minute: here one request, never denied.
    expect(new Set(series.requests)).toEqual(new Set([1]));
    expect(series.denied[0]!.every((d) => d === 0)).toBe(true);
    // The chart says what a bar is, bucket size included.
    const svg = replayChart(series, {
      title: "t",
      policies: [
        { algorithm: "fixed-window", options: "", requests: 6000, denied: 0, limitPerMinute: 1 },
      ],
      top: [],
      keyName: "ip",
    });
    expect(svg).toMatch(
      /each bar is the busiest minute of \d+ minutes; the series was kept in 6 h buckets/,
    );
  });

  test("a few lines millennia apart: a handful of buckets, drawn without error", async () => {
    const times = [-5e15, -1e12, 0, 1, 7 * M, 3e12, 8.6e15];
    const text = times.map((t) => clf(t, "192.0.2.1")).join("\n");
    const policies = comparePolicies({ capacity: 1, refillPerSecond: 1 });
    const report = await replay(Readable.from([text]), {
      policies,
      series: true,
      maxSeriesBuckets: 4,
    });
    const series = report.series!;
    expect(series.minuteMs.length).toBeLessThanOrEqual(4);
    expect(series.requests.length).toBe(series.minuteMs.length);
    const svg = replayChart(series, {
      title: "t",
      policies: report.results.map((r) => ({
        algorithm: r.algorithm,
        options: "",
        requests: r.allowed + r.denied,
        denied: r.denied,
        limitPerMinute: undefined,
      })),
      top: [],
      keyName: "ip",
    });
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).not.toContain("NaN");
  });
});
