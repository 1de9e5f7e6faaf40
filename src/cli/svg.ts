import { daysFromCivil, MAX_TIME_MS } from "./parse-log.js";
import type { MinuteSeries } from "./replay.js";

/** Options of {@link minuteChart}. */
export interface ChartOptions {
  /** The heading (the policy, say). */
  readonly title: string;
  /** A smaller second line (the input, say). */
  readonly subtitle?: string | undefined;
  /** @default 960 */
  readonly width?: number | undefined;
  /** @default 360 */
  readonly height?: number | undefined;
  /**
   * Most bars drawn; longer spans put several minutes in one bar.
   * @default 480
   */
  readonly maxBars?: number | undefined;
}

const MINUTE_MS = 60_000;
const ALLOWED_COLOR = "#4c78a8";
const DENIED_COLOR = "#e45756";
/** Candidate x-tick intervals, in minutes: 1 min to 2 weeks. */
const TICK_MINUTES = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10_080, 20_160];
/** Candidate x-tick intervals beyond that, in calendar months. */
const TICK_MONTHS = [1, 2, 3, 6, 12, 24, 60, 120, 240, 600, 1200];
const MAX_TICKS = 7;

/** Escapes text for an SVG text node or attribute. */
function xml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** Rounds a coordinate to 0.1 px so the file stays small and stable. */
function px(n: number): string {
  return String(Math.round(n * 10) / 10);
}

/** The smallest of 1, 2, 5 times a power of ten that is >= `value` (1 for 0). */
export function niceCeil(value: number): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/** The UTC parts of an instant for labels: year (`2015`, `0050`, `-000050`), `MM-DD`, `HH:MM`. */
function utcParts(ms: number): { year: string; monthDay: string; time: string } {
  const iso = new Date(ms).toISOString(); // `YYYY-…`, or `±YYYYYY-…` outside 0-9999
  const t = iso.indexOf("T");
  return {
    year: iso.slice(0, t - 6),
    monthDay: iso.slice(t - 5, t),
    time: iso.slice(t + 1, t + 6),
  };
}

/**
 * X ticks over `[fromMs, toMs]`, at most {@link MAX_TICKS}, at round UTC times: every few
 * minutes, hours or days (`05-17 10:05`, `05-17`), or calendar months and years
 * (`2015-06`); the year is added to day labels when the span crosses a year. Ticks lie
 * within the `Date` range (±{@link MAX_TIME_MS}) even when the span reaches past it.
 */
export function timeTicks(fromMs: number, toMs: number): { atMs: number; label: string }[] {
  // The chart's span is whole bins of minutes, so it can end past the last representable
  // instant; a tick there would make toISOString throw (or Date.UTC return NaN forever).
  const from = Math.max(fromMs, -MAX_TIME_MS);
  const to = Math.min(toMs, MAX_TIME_MS);
  const ticks: { atMs: number; label: string }[] = [];
  if (!(from <= to)) return ticks;
  const spanMs = to - from;
  const stepMinutes = TICK_MINUTES.find((m) => spanMs / (m * MINUTE_MS) <= MAX_TICKS);
  if (stepMinutes !== undefined) {
    const step = stepMinutes * MINUTE_MS;
    const crossesYear = utcParts(from).year !== utcParts(to).year;
    for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
      const p = utcParts(t);
      const day = `${crossesYear ? `${p.year}-` : ""}${p.monthDay}`;
      ticks.push({ atMs: t, label: step >= 1440 * MINUTE_MS ? day : `${day} ${p.time}` });
    }
    return ticks;
  }
  const start = utcParts(from);
  const firstMonth = Number(start.year) * 12 + Number(start.monthDay.slice(0, 2)) - 1;
  const spanMonths = spanMs / (30 * 1440 * MINUTE_MS);
  const stepMonths =
    TICK_MONTHS.find((m) => spanMonths / m <= MAX_TICKS) ??
    1200 * niceCeil(spanMonths / 1200 / MAX_TICKS);
  for (let m = Math.ceil(firstMonth / stepMonths) * stepMonths; ; m += stepMonths) {
    const year = Math.floor(m / 12);
    // Not Date.UTC: it takes years 0-99 as 1900-1999.
    const t = daysFromCivil(year, m - year * 12, 1) * 86_400_000;
    if (t > to) break;
    if (t >= from) {
      const p = utcParts(t);
      ticks.push({
        atMs: t,
        label: stepMonths % 12 === 0 ? p.year : `${p.year}-${p.monthDay.slice(0, 2)}`,
      });
    }
  }
  return ticks;
}

/**
 * A stacked bar chart of allowed (blue) and denied (red) requests per minute over the
 * log's time span, as a standalone SVG document (no scripts, no external resources).
 *
 * The x axis is continuous UTC time from the first to the last minute with requests;
 * minutes without requests stay empty. When the span has more minutes than `maxBars`,
 * each bar covers a bin of whole minutes and shows the busiest minute of the bin (so the
 * y axis is always requests per minute), and the caption says so.
 */
export function minuteChart(series: MinuteSeries, options: ChartOptions): string {
  const width = options.width ?? 960;
  const height = options.height ?? 360;
  const maxBars = options.maxBars ?? 480;
  const left = 64;
  const right = 20;
  const top = options.subtitle === undefined ? 48 : 64;
  const bottom = 56;
  const plotW = width - left - right;
  const plotH = height - top - bottom;

  const n = series.minuteMs.length;
  const firstMs = n > 0 ? series.minuteMs[0]! : 0;
  const lastMs = n > 0 ? series.minuteMs[n - 1]! : 0;
  const spanMinutes = Math.round((lastMs - firstMs) / MINUTE_MS) + 1;
  const binMinutes = Math.max(1, Math.ceil(spanMinutes / maxBars));
  const bins = Math.ceil(spanMinutes / binMinutes);

  // The busiest minute of each bin.
  const binAllowed = new Map<number, number>();
  const binDenied = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const bin = Math.floor(Math.round((series.minuteMs[i]! - firstMs) / MINUTE_MS) / binMinutes);
    const allowed = series.allowed[i]!;
    const denied = series.denied[i]!;
    const before = (binAllowed.get(bin) ?? 0) + (binDenied.get(bin) ?? 0);
    if (allowed + denied > before) {
      binAllowed.set(bin, allowed);
      binDenied.set(bin, denied);
    }
  }
  let peak = 0;
  for (const [bin, allowed] of binAllowed) peak = Math.max(peak, allowed + binDenied.get(bin)!);
  const yStep = niceCeil(peak / 5);
  const yMax = Math.max(1, Math.ceil(peak / yStep)) * yStep;
  const y = (value: number) => top + plotH - (value / yMax) * plotH;
  const barStep = plotW / bins;
  const barW = Math.max(1, barStep * 0.8);

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`,
    `<title>${xml(options.title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${left}" y="24" font-size="15" font-weight="600" fill="#222">${xml(options.title)}</text>`,
  );
  if (options.subtitle !== undefined) {
    parts.push(`<text x="${left}" y="44" fill="#555">${xml(options.subtitle)}</text>`);
  }

  // Y grid and labels.
  const gridLines = Math.round(yMax / yStep);
  for (let i = 0; i <= gridLines; i++) {
    const value = i * yStep;
    const yy = px(y(value));
    parts.push(
      `<line x1="${left}" x2="${width - right}" y1="${yy}" y2="${yy}" stroke="${value === 0 ? "#888" : "#e5e5e5"}"/>`,
      `<text x="${left - 8}" y="${yy}" dy="4" text-anchor="end" fill="#555">${Number(value.toPrecision(6))}</text>`,
    );
  }
  parts.push(
    `<text transform="translate(16 ${px(top + plotH / 2)}) rotate(-90)" text-anchor="middle" fill="#555">requests per minute</text>`,
  );

  // X ticks: at most seven, at round UTC times.
  const spanMs = bins * binMinutes * MINUTE_MS;
  for (const tick of timeTicks(firstMs, firstMs + spanMs)) {
    const x = left + ((tick.atMs - firstMs) / spanMs) * plotW;
    const anchor = x < left + 40 ? "start" : x > width - right - 40 ? "end" : "middle";
    parts.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${top + plotH}" y2="${top + plotH + 5}" stroke="#888"/>`,
      `<text x="${px(x)}" y="${top + plotH + 18}" text-anchor="${anchor}" fill="#555">${xml(tick.label)}</text>`,
    );
  }
  const caption =
    binMinutes === 1
      ? "time (UTC), one bar per minute"
      : `time (UTC); each bar is the busiest minute of ${binMinutes} minutes`;
  parts.push(
    `<text x="${left + plotW / 2}" y="${height - 12}" text-anchor="middle" fill="#555">${xml(caption)}</text>`,
  );

  // Bars: allowed from the axis, denied stacked on top.
  const bars: string[] = [];
  for (const [bin, allowed] of [...binAllowed].sort((a, b) => a[0] - b[0])) {
    const denied = binDenied.get(bin)!;
    const x = px(left + bin * barStep);
    if (allowed > 0) {
      bars.push(
        `<rect x="${x}" y="${px(y(allowed))}" width="${px(barW)}" height="${px(y(0) - y(allowed))}" fill="${ALLOWED_COLOR}"/>`,
      );
    }
    if (denied > 0) {
      bars.push(
        `<rect x="${x}" y="${px(y(allowed + denied))}" width="${px(barW)}" height="${px(y(allowed) - y(allowed + denied))}" fill="${DENIED_COLOR}"/>`,
      );
    }
  }
  parts.push(`<g shape-rendering="crispEdges">`, ...bars, `</g>`);

  // Legend, top right.
  const lx = width - right - 170;
  parts.push(
    `<rect x="${lx}" y="${top - 22}" width="12" height="12" fill="${ALLOWED_COLOR}"/>`,
    `<text x="${lx + 18}" y="${top - 12}" fill="#333">allowed</text>`,
    `<rect x="${lx + 90}" y="${top - 22}" width="12" height="12" fill="${DENIED_COLOR}"/>`,
    `<text x="${lx + 108}" y="${top - 12}" fill="#333">denied</text>`,
    "</svg>",
  );
  return `${parts.join("\n")}\n`;
}
