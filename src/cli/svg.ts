import { CATALOG } from "../algorithms/catalog.js";
import { daysFromCivil, MAX_TIME_MS } from "./parse-log.js";
import { printable } from "./printable.js";
import { percent } from "./report.js";
import { bucketText, MINUTE_MS, type MinuteSeries } from "./series.js";
import type { KeyReport } from "./tally.js";

/** One policy as the chart shows it. */
export interface ChartPolicy {
  /** The algorithm (its colour is fixed per algorithm, see {@link ALGORITHM_COLORS}). */
  readonly algorithm: string;
  /** Its options, for the label (`capacity 5, refillPerSecond 0.1`). */
  readonly options: string;
  readonly requests: number;
  readonly denied: number;
  /**
   * The long-run rate the policy admits per client, in requests per minute (drawn as the
   * reference line); undefined for none.
   */
  readonly limitPerMinute: number | undefined;
}

/** Options of {@link replayChart}. */
export interface ChartOptions {
  /** The heading (the policy, say). */
  readonly title: string;
  /** A smaller second line (the input, say). */
  readonly subtitle?: string | undefined;
  /** The policies, in the order of the series' `denied` arrays. */
  readonly policies: readonly ChartPolicy[];
  /** The most limited clients (the replay's top list), at most the first 10 are drawn. */
  readonly top: readonly KeyReport[];
  /** What a client is (`ip`, `user`…), for the labels. */
  readonly keyName: string;
  /**
   * With `replay --nodes`: the series' second lane is the leased nodes, the first the exact
   * shared bucket; a panel shows their difference per minute (overshoot above the axis,
   * unused capacity below), headed by the totals.
   */
  readonly leased?:
    | {
        readonly nodes: number;
        readonly utilisation: number;
        readonly overshoot: number;
        readonly overshootBound: number;
      }
    | undefined;
  /** @default 1000 */
  readonly width?: number | undefined;
  /** Most bars drawn; a longer span puts several minutes in one bar (its busiest). @default 440 */
  readonly maxBars?: number | undefined;
}

/** Colours per algorithm (distinct in hue, readable on white), from the catalog. */
export const ALGORITHM_COLORS: Readonly<Record<string, string>> = Object.fromEntries(
  CATALOG.map((d) => [d.id, d.cli.color]),
);
const OTHER_COLOR = "#8c564b";
/** The leased panel: admitted above the exact bucket, and below it. */
const OVERSHOOT_COLOR = "#c0392b";
const UNUSED_COLOR = "#8aa1b4";
const REQUESTS_COLOR = "#c3c9d0";
const BUSIEST_COLOR = "#2b2b2b";
const TEXT = "#333";
const MUTED = "#666";
const GRID = "#e6e6e6";
/** The strokes of the busiest client's marks and of a policy's limit line. */
const BUSIEST_STROKE = `stroke="${BUSIEST_COLOR}" stroke-width="2.5"`;
const LIMIT_STROKE = `stroke="#000" stroke-width="1.2" stroke-dasharray="6 4"`;
/** Candidate x-tick intervals, in minutes: 1 min to 2 weeks. */
const TICK_MINUTES = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10_080, 20_160];
/** Candidate x-tick intervals beyond that, in calendar months. */
const TICK_MONTHS = [1, 2, 3, 6, 12, 24, 60, 120, 240, 600, 1200];
const MAX_TICKS = 7;

/**
 * Escapes text for an SVG text node or attribute: control characters and bidi overrides
 * as visible escapes ({@link printable}; raw C0 characters would also make the file
 * invalid XML), then the XML specials.
 */
function xml(text: string): string {
  return xmlSpecials(printable(text));
}

/**
 * The XML specials of `shown` escaped: for text already passed through {@link printable}
 * (which doubles backslashes, so it must be applied once only).
 */
function xmlSpecials(shown: string): string {
  return shown
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
 * Ticks of a log scale from 0 to at least `peak`: 0, then 1, 10, 100… (with 2 and 5 in
 * between when the range spans at most two decades). Returns the ticks and the top value.
 */
export function logTicks(peak: number): { ticks: number[]; top: number } {
  const decades = Math.max(1, Math.ceil(Math.log10(Math.max(1, peak)) - 1e-9));
  const ticks = [0];
  for (let d = 0; d <= decades; d++) {
    const p = 10 ** d;
    ticks.push(p);
    if (decades <= 2 && d < decades) ticks.push(2 * p, 5 * p);
  }
  let top = 10 ** decades;
  // Trim the last decade when the peak is well below it (2 or 5 times the decade before).
  if (decades <= 2) {
    const below = 10 ** (decades - 1);
    for (const step of [2, 5]) {
      if (peak <= step * below) {
        top = step * below;
        break;
      }
    }
  }
  return { ticks: ticks.filter((t) => t <= top), top };
}

/** Shortens `text` to `max` characters with an ellipsis. */
function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** A whole number with thin thousands separators (`12 345`). */
function count(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009");
}

/** Where the bars of the time panels go: one slot per bin, or per minute with requests. */
interface TimeLayout {
  /** Slots in time order: left edge (px), values. */
  readonly x: number[];
  readonly requests: number[];
  readonly busiest: number[];
  /** Per policy, per slot. */
  readonly denied: number[][];
  readonly barW: number;
  /** Time ticks: x and label. */
  readonly ticks: { x: number; label: string }[];
  readonly caption: string;
}

/**
 * Lays the buckets out (minutes, unless the series was kept coarser: see {@link MinuteSeries}). A
 * log whose buckets with requests are few and far apart (a sample of one minute an hour, a night of
 * silence) is drawn with only those buckets, side by side (the idle time between them left out, and
 * said so); any other is drawn on continuous time, in bins of whole buckets when it has more than
 * `maxBars`, each bar the busiest minute of its bin. The caption says what a bar is.
 */
function layOut(
  series: MinuteSeries,
  policies: number,
  left: number,
  plotW: number,
  maxBars: number,
): TimeLayout {
  const n = series.minuteMs.length;
  const bucketMinutes = series.bucketMinutes ?? 1;
  const bucketMs = bucketMinutes * MINUTE_MS;
  const firstMs = n > 0 ? series.minuteMs[0]! : 0;
  const lastMs = n > 0 ? series.minuteMs[n - 1]! : 0;
  const spanBuckets = Math.round((lastMs - firstMs) / bucketMs) + 1;
  const layout: TimeLayout = {
    x: [],
    requests: [],
    busiest: [],
    denied: Array.from({ length: policies }, () => []),
    barW: 0,
    ticks: [],
    caption: "",
  };
  const coarse =
    bucketMinutes === 1
      ? ""
      : `; the series was kept in ${bucketText(bucketMinutes)} buckets (the log has too many minutes with requests to keep each)`;
  // Sparse: one slot per bucket with requests, side by side; else bins of whole buckets.
  const sparse = spanBuckets > maxBars && n <= maxBars && n * 4 <= spanBuckets;
  const binBuckets = sparse ? 1 : Math.max(1, Math.ceil(spanBuckets / maxBars));
  const bins = sparse ? n : Math.ceil(spanBuckets / binBuckets);
  const step = plotW / bins;
  const slotOf = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const bin = sparse
      ? i
      : Math.floor(Math.round((series.minuteMs[i]! - firstMs) / bucketMs) / binBuckets);
    let s = slotOf.get(bin);
    if (s === undefined) {
      s = layout.x.length;
      slotOf.set(bin, s);
      layout.x.push(sparse ? left + bin * step + step * 0.1 : left + bin * step);
      layout.requests.push(-1);
      layout.busiest.push(0);
      for (let p = 0; p < policies; p++) layout.denied[p]!.push(0);
    }
    // The busiest minute of the bin stands for it.
    if (series.requests[i]! > layout.requests[s]!) {
      layout.requests[s] = series.requests[i]!;
      layout.busiest[s] = series.busiestClient[i]!;
    }
    for (let p = 0; p < policies; p++) {
      const d = series.denied[p]?.[i] ?? 0;
      if (d > layout.denied[p]![s]!) layout.denied[p]![s] = d;
    }
  }
  if (sparse) {
    // Labels: the first bucket, then the first bucket at or after each round time, spaced.
    const withYear = utcParts(firstMs).year !== utcParts(lastMs).year;
    const spacing = withYear ? 150 : 90;
    const label = (slot: number) => {
      const p = utcParts(series.minuteMs[slot]!);
      return `${withYear ? `${p.year}-` : ""}${p.monthDay} ${p.time}`;
    };
    layout.ticks.push({ x: layout.x[0]! + step * 0.4, label: label(0) });
    let slot = 0;
    for (const tick of timeTicks(firstMs, lastMs)) {
      while (slot < n && series.minuteMs[slot]! < tick.atMs) slot++;
      if (slot >= n) break;
      const x = layout.x[slot]! + step * 0.4;
      if (x - layout.ticks[layout.ticks.length - 1]!.x < spacing) continue;
      layout.ticks.push({ x, label: label(slot) });
    }
    return {
      ...layout,
      barW: Math.max(1, step * 0.8),
      caption:
        bucketMinutes === 1
          ? `time (UTC): only the ${n} minutes with requests, side by side (${spanBuckets - n} idle minutes between them left out)`
          : `time (UTC): only the ${n} ${bucketText(bucketMinutes)} buckets with requests, side by side (${spanBuckets - n} idle ones left out), each bar the busiest minute of its bucket${coarse}`,
    };
  }
  const binMinutes = binBuckets * bucketMinutes;
  const spanMs = bins * binBuckets * bucketMs;
  for (const tick of timeTicks(firstMs, firstMs + spanMs)) {
    layout.ticks.push({ x: left + ((tick.atMs - firstMs) / spanMs) * plotW, label: tick.label });
  }
  return {
    ...layout,
    barW: Math.max(1, step * (bins < 120 ? 0.8 : 1)),
    caption:
      binMinutes === 1
        ? "time (UTC), one bar per minute"
        : `time (UTC); each bar is the busiest minute of ${binMinutes} minutes${coarse}`,
  };
}

/**
 * The replay chart, a standalone SVG document (no scripts, no external resources), in three panels:
 *
 * 1. requests per minute of all clients (grey bars), the busiest client's requests in
 *    that minute (a dark mark on each bar) and each policy's long-run limit per client (a
 *    dashed line), on a log scale so that spikes and quiet minutes both read;
 * 2. denials per minute, one strip per policy in its colour, on one shared log scale;
 * 3. the most limited clients: the first ten of `top`, one horizontal bar per policy
 *    each, labelled with the key, its denials, requests and peak per minute.
 *
 * Time runs left to right in UTC (see `layOut` for sparse logs and long spans). Text
 * from the log (keys) is escaped ({@link printable}).
 */
export function replayChart(series: MinuteSeries, options: ChartOptions): string {
  const width = options.width ?? 1000;
  const maxBars = options.maxBars ?? 440;
  const policies = options.policies;
  const left = 64;
  const right = 24;
  const plotW = width - left - right;
  const layout = layOut(series, policies.length, left, plotW, maxBars);
  const barW = layout.barW;

  const parts: string[] = [];
  /** A text node; `printed` when `body` was already passed through printable. */
  const text = (x: number, y: number, body: string, attrs = "", printed = false) =>
    `<text x="${px(x)}" y="${px(y)}"${attrs ? ` ${attrs}` : ""}>${printed ? xmlSpecials(body) : xml(body)}</text>`;
  const heading = (y: number, body: string) =>
    text(left, y, body, `font-size="13" font-weight="600" fill="${TEXT}"`);
  /** A line across the plot at `y`; `attrs` its stroke. */
  const hline = (y: number, attrs: string) =>
    `<line x1="${left}" x2="${width - right}" y1="${px(y)}" y2="${px(y)}" ${attrs}/>`;
  /** A vertical line at `x` from `y1` down to `y2`. */
  const vline = (x: number, y1: number, y2: number, stroke: string) =>
    `<line x1="${px(x)}" x2="${px(x)}" y1="${px(y1)}" y2="${px(y2)}" stroke="${stroke}"/>`;
  /** Muted text (a label, a caption), anchored at `anchor` when given. */
  const muted = (x: number, y: number, body: string, anchor?: string) =>
    text(x, y, body, `${anchor === undefined ? "" : `text-anchor="${anchor}" `}fill="${MUTED}"`);
  /** A small value label left of the axis. */
  const axisLabel = (y: number, body: string) =>
    text(left - 6, y, body, `text-anchor="end" fill="${MUTED}" font-size="10"`);
  /** An axis title, turned to run up the left edge, centred on `y`. */
  const yTitle = (y: number, body: string) =>
    `<text transform="translate(18 ${px(y)}) rotate(-90)" text-anchor="middle" fill="${MUTED}">${body}</text>`;
  /** A square of `color` and its label at (`x`, `y`). */
  const legend = (x: number, y: number, color: string, label: string) => [
    `<rect x="${px(x)}" y="${px(y - 10)}" width="11" height="11" fill="${color}"/>`,
    text(x + 16, y, label, `fill="${TEXT}"`),
  ];
  /** The bar of slot `s` from `y` down `height` px. */
  const bar = (s: number, y: number, height: number) =>
    `<rect x="${px(layout.x[s]!)}" y="${px(y)}" width="${px(barW)}" height="${px(height)}"/>`;
  /** The bars of the `values` that `keep` (one per slot), each from the scale `y`'s 0. */
  const columns = (
    values: readonly number[],
    y: (v: number) => number,
    keep = (v: number) => v > 0,
  ) =>
    values.flatMap((v, s) =>
      keep(v) ? [bar(s, Math.min(y(v), y(0)), Math.abs(y(v) - y(0)))] : [],
    );
  /** A group of bars, `attrs` its class and fill. */
  const bars = (attrs: string, rects: readonly string[]) => [
    `<g shape-rendering="crispEdges" ${attrs}>`,
    ...rects,
    "</g>",
  ];
  /** The y of a value on a log scale from 0 to `top` over `height` px from `y0` down. */
  const logY = (y0: number, height: number, top: number) => (v: number) =>
    y0 + height - (Math.log10(1 + v) / Math.log10(1 + top)) * height;
  const timeGrid = (top: number, height: number) => {
    for (const tick of layout.ticks) parts.push(vline(tick.x, top, top + height, GRID));
  };

  // Header.
  let y = 26;
  parts.push(text(left, y, options.title, `font-size="16" font-weight="600" fill="#111"`));
  if (options.subtitle !== undefined) {
    y += 20;
    parts.push(muted(left, y, options.subtitle));
  }

  // Panel 1: requests per minute, the busiest client, the limit.
  y += 34;
  parts.push(heading(y, "Requests per minute"));
  const legendY = y;
  const limits = [...new Set(policies.map((p) => p.limitPerMinute))].filter(
    (l): l is number => l !== undefined && l > 0 && Number.isFinite(l),
  );
  const scale1 = logTicks(Math.max(1, ...layout.requests, ...limits));
  const top1 = y + 16;
  const h1 = 190;
  const y1 = logY(top1, h1, scale1.top);
  for (const t of scale1.ticks) {
    parts.push(
      hline(y1(t), `stroke="${t === 0 ? "#999" : GRID}"`),
      muted(left - 6, y1(t) + 4, count(t), "end"),
    );
  }
  parts.push(yTitle(top1 + h1 / 2, "requests/min (log scale)"));
  timeGrid(top1, h1);
  const markW = Math.max(barW, 3);
  const marks = layout.busiest.flatMap((busiest, s) =>
    busiest > 0
      ? [`M${px(layout.x[s]! + (barW - markW) / 2)} ${px(y1(busiest))}h${px(markW)}`]
      : [],
  );
  parts.push(...bars(`class="requests" fill="${REQUESTS_COLOR}"`, columns(layout.requests, y1)));
  if (marks.length > 0) {
    parts.push(`<path class="busiest" d="${marks.join("")}" fill="none" ${BUSIEST_STROKE}/>`);
  }
  for (const limit of limits) {
    const yy = px(y1(limit));
    const who = policies
      .filter((p) => p.limitPerMinute === limit)
      .map((p) => p.algorithm)
      .join(", ");
    const label =
      limits.length === 1
        ? `limit per ${options.keyName}: ${formatRate(limit)}/min long-run (+ burst)`
        : `${formatRate(limit)}/min: ${who}`;
    parts.push(
      `<line class="limit" x1="${left}" x2="${width - right}" y1="${yy}" y2="${yy}" ${LIMIT_STROKE}/>`,
      text(
        width - right - 4,
        y1(limit) - 6,
        label,
        `text-anchor="end" fill="#000" stroke="#fff" stroke-width="4" paint-order="stroke"`,
      ),
    );
  }
  // Legend of panel 1, right of its heading.
  let lx = left + 160;
  /** A swatch (a rect, or a line in `stroke`) and its label, then room for the next. */
  const legendItem = (label: string, stroke?: string) => {
    parts.push(
      stroke === undefined
        ? `<rect x="${px(lx)}" y="${legendY - 10}" width="16" height="11" fill="${REQUESTS_COLOR}"/>`
        : `<line x1="${px(lx)}" x2="${px(lx + 16)}" y1="${legendY - 4}" y2="${legendY - 4}" ${stroke}/>`,
      text(lx + 22, legendY, label, `fill="${TEXT}"`),
    );
    lx += 22 + label.length * 6.4 + 20;
  };
  legendItem("all clients");
  legendItem(`the busiest ${options.keyName} in that minute`, BUSIEST_STROKE);
  if (limits.length > 0) legendItem(`policy limit per ${options.keyName}`, LIMIT_STROKE);

  // Panel 2: denials per minute, one strip per policy, one shared scale.
  y = top1 + h1 + 36;
  parts.push(heading(y, "Denied per minute, by algorithm"));
  const panel2Top = y;
  const scale2 = logTicks(Math.max(1, ...layout.denied.flat()));
  const stripH = 30;
  y += 6;
  for (let p = 0; p < policies.length; p++) {
    const policy = policies[p]!;
    const color = ALGORITHM_COLORS[policy.algorithm] ?? OTHER_COLOR;
    const labelY = y + 16;
    const top = labelY + 5;
    const yy = logY(top, stripH, scale2.top);
    parts.push(
      ...legend(
        left,
        labelY,
        color,
        `${policy.algorithm} (${policy.options}): ${count(policy.denied)} denied of ${count(policy.requests)} (${percent(policy.denied, policy.requests)})`,
      ),
      hline(top, `stroke="${GRID}"`),
      hline(top + stripH, `stroke="#999"`),
      axisLabel(top + 4, count(scale2.top)),
      axisLabel(top + stripH + 3, "0"),
    );
    timeGrid(top, stripH);
    const rects = columns(layout.denied[p]!, yy);
    parts.push(
      ...bars(`class="denied" data-algorithm="${xml(policy.algorithm)}" fill="${color}"`, rects),
    );
    y = top + stripH;
  }
  parts.push(yTitle((panel2Top + y) / 2, "denied/min (log)"));
  for (const tick of layout.ticks) {
    const anchor = tick.x < left + 40 ? "start" : tick.x > width - right - 40 ? "end" : "middle";
    parts.push(vline(tick.x, y, y + 5, "#999"), muted(tick.x, y + 18, tick.label, anchor));
  }
  y += 38;
  parts.push(muted(left + plotW / 2, y, layout.caption, "middle"));

  // With --nodes: the leased nodes against the exact shared bucket.
  const leased = options.leased;
  if (leased !== undefined && layout.denied.length >= 2) {
    y += 40;
    parts.push(
      heading(
        y,
        `${leased.nodes} leased nodes minus the exact shared bucket, admitted per minute: utilisation ${(leased.utilisation * 100).toFixed(1)}%, overshoot ${count(leased.overshoot)} (bound ${count(leased.overshootBound)} per ${options.keyName})`,
      ),
    );
    const exact = layout.denied[0]!;
    const nodes = layout.denied[1]!;
    // Exact denials minus leased denials: what the nodes admitted more (+) or less (-).
    const diff = exact.map((v, i) => v - nodes[i]!);
    const peak = niceCeil(Math.max(1, ...diff.map(Math.abs)));
    const top = y + 14;
    const half = 40;
    const mid = top + half;
    const yy = (v: number) => mid - (v / peak) * half;
    parts.push(
      hline(top, `stroke="${GRID}"`),
      hline(mid, `stroke="#999"`),
      hline(top + 2 * half, `stroke="${GRID}"`),
      axisLabel(top + 4, `+${count(peak)}`),
      axisLabel(mid + 4, "0"),
      axisLabel(top + 2 * half + 4, `-${count(peak)}`),
    );
    timeGrid(top, 2 * half);
    parts.push(
      ...bars(`class="overshoot" fill="${OVERSHOOT_COLOR}"`, columns(diff, yy)),
      ...bars(
        `class="unused" fill="${UNUSED_COLOR}"`,
        columns(diff, yy, (v) => v < 0),
      ),
    );
    y = top + 2 * half + 18;
    parts.push(
      ...legend(left, y, OVERSHOOT_COLOR, "admitted above the exact bucket (overshoot)"),
      ...legend(
        left + 330,
        y,
        UNUSED_COLOR,
        "denied where the exact bucket admitted (unused capacity)",
      ),
    );
  }

  // Panel 3: the most limited clients.
  y += 40;
  const rows = options.top.slice(0, 10);
  const first = policies[0];
  parts.push(
    heading(
      y,
      rows.length === 0
        ? `Most limited clients: no ${options.keyName} was denied`
        : `Most limited clients: top ${rows.length} by ${first === undefined || policies.length === 1 ? "" : `${first.algorithm} `}denials, whole log (key: ${options.keyName})`,
    ),
  );
  if (rows.length > 0) {
    const barLeft = left + 190;
    const barRight = width - right - 270;
    const most = Math.max(1, ...rows.flatMap((r) => r.denied));
    const barMax = Math.ceil(most / niceCeil(most / 5)) * niceCeil(most / 5);
    const xOf = (v: number) => barLeft + (v / barMax) * (barRight - barLeft);
    const sub = policies.length > 1 ? 4 : 12;
    const rowH = Math.max(22, policies.length * (sub + 1) + 9);
    const top = y + 14;
    const bottom = top + rows.length * rowH;
    const step = niceCeil(barMax / 5);
    for (let v = 0; v <= barMax + 1e-9; v += step) {
      parts.push(
        vline(xOf(v), top, bottom, v === 0 ? "#999" : GRID),
        muted(xOf(v), bottom + 15, count(v), "middle"),
      );
    }
    const legendText =
      "denied requests over the whole log (one bar per algorithm, colours as above)";
    parts.push(muted((barLeft + barRight) / 2, bottom + 32, legendText, "middle"));
    for (const [r, row] of rows.entries()) {
      const mid = top + r * rowH + rowH / 2;
      parts.push(
        text(
          barLeft - 10,
          mid + 4,
          `${clip(printable(row.key), 26)}${row.approximate ? " ~" : ""}`,
          `text-anchor="end" fill="${TEXT}" font-family="ui-monospace, 'DejaVu Sans Mono', monospace" font-size="12"`,
          true,
        ),
      );
      const barsTop = mid - (policies.length * (sub + 1) - 1) / 2;
      for (let p = 0; p < policies.length; p++) {
        const value = row.denied[p] ?? 0;
        if (value <= 0) continue;
        const color = ALGORITHM_COLORS[policies[p]!.algorithm] ?? OTHER_COLOR;
        parts.push(
          `<rect class="top-bar" x="${px(barLeft)}" y="${px(barsTop + p * (sub + 1))}" width="${px(Math.max(1, xOf(value) - barLeft))}" height="${sub}" fill="${color}"/>`,
        );
      }
      const d0 = row.denied[0] ?? 0;
      const line = `${count(d0)} of ${count(row.requests)} denied (${percent(d0, row.requests)}), peak ${count(row.peakPerMinute)}/min`;
      parts.push(muted(barRight + 12, mid + 4, line));
    }
    y = bottom + 32;
    if (rows.some((r) => r.approximate)) {
      y += 20;
      const note =
        "~ counted from its first denial, after --max-keys clients were already tallied: approximate";
      parts.push(muted(left, y, note));
    }
  }
  const height = Math.ceil(y + 22);
  return `${[
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif" font-size="12">`,
    `<title>${xml(options.title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    ...parts,
    "</svg>",
  ].join("\n")}\n`;
}

/** A rate for a label: up to three significant digits (`6`, `0.6`, `1.25`). */
function formatRate(value: number): string {
  return String(Number(value.toPrecision(3)));
}
