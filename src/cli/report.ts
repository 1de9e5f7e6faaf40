import { CATALOG } from "../algorithms/catalog.js";
import type { NodesReport } from "./nodes.js";
import { describeOptions } from "./policy.js";
import { asciiSafeJson, printable } from "./printable.js";
import type { PolicyResult, ReplayReport } from "./replay.js";

/** An epoch-ms instant as ISO 8601 UTC, without `.000` when whole seconds. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

/** A duration for humans: `59s`, `4h 0m 56s`, `3d 20h 59m`. */
export function humanDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d > 0) return `${d}d ${h}h ${m}m`;
  if (h > 0) return `${h}h ${m}m ${sec}s`;
  if (m > 0) return `${m}m ${sec}s`;
  return `${sec}s`;
}

/** `part` of `whole` in percent with one decimal (`0.0%` when `whole` is 0). */
export function percent(part: number, whole: number): string {
  return `${whole === 0 ? "0.0" : ((part * 100) / whole).toFixed(1)}%`;
}

/** Each algorithm's short column name in the top-keys table, from the catalog. */
const SHORT_NAMES: Readonly<Record<string, string>> = Object.fromEntries(
  CATALOG.map((d) => [d.id, d.cli.column]),
);

/** Lays out rows as columns, indented by two spaces: left-aligned where `right[i]` is false. */
function table(rows: readonly (readonly string[])[], right: readonly boolean[]): string[] {
  const widths = right.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows.map(
    (r) =>
      `  ${r
        .map((cell, c) => (right[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
        .join("  ")
        .trimEnd()}`,
  );
}

function requestsOf(result: PolicyResult): number {
  return result.allowed + result.denied;
}

/**
 * The plain-text report: input summary, one row per policy, the top keys by denials,
 * and the first skipped lines. `source` names the input (a path or `-`). Text from the
 * log (keys, skipped lines and their reasons) and the source are passed through
 * {@link printable}, so control characters and bidi overrides show as escapes.
 */
export function textReport(report: ReplayReport, source: string): string {
  const { lines, reorder } = report;
  const out = [
    `tollgate replay ${printable(source)}`,
    `  format ${report.format}, key ${report.key}`,
    `  lines     ${lines.read} read, ${lines.parsed} parsed, ${lines.skipped} skipped` +
      (lines.unkeyed > 0 ? `, ${lines.unkeyed} without a ${report.key} (not replayed)` : ""),
  ];
  if (report.firstMs !== undefined && report.lastMs !== undefined) {
    out.push(
      `  time      ${isoTime(report.firstMs)} .. ${isoTime(report.lastMs)} (${humanDuration(report.lastMs - report.firstMs)})`,
    );
  }
  out.push(
    `  reorder   window ${reorder.windowMs} ms: ${reorder.reordered} lines put back in order, ` +
      `${reorder.late} too late (decided at the latest time)`,
    report.distinctKeysExact
      ? `  keys      ${report.distinctKeys} distinct`
      : `  keys      about ${report.distinctKeys} distinct (estimated: more than --max-keys; the top list is approximate)`,
    "",
  );

  const rows = [["algorithm", "options", "requests", "allowed", "denied", "peak live keys"]];
  for (const r of report.results) {
    rows.push([
      r.algorithm + (r.derived ? "*" : ""),
      describeOptions(r),
      String(requestsOf(r)),
      `${r.allowed} (${percent(r.allowed, requestsOf(r))})`,
      `${r.denied} (${percent(r.denied, requestsOf(r))})`,
      String(r.peakLiveKeys),
    ]);
  }
  out.push(...table(rows, [false, false, true, true, true, true]));
  if (report.results.some((r) => r.derived)) {
    out.push(
      "  * options derived for --compare: limit = capacity, windowMs = capacity * 1000 / rate",
      "    (or capacity = limit, rate = limit * 1000 / windowMs): same burst, same long-run rate",
    );
  }
  if (report.nodes !== undefined) out.push(...nodesLines(report.nodes));
  for (const r of report.results.filter((r) => r.lossyEvictions > 0)) {
    out.push(
      `  warning: ${r.algorithm} evicted ${r.lossyEvictions} keys in use at --max-keys; raise it for exact results`,
    );
  }

  if (report.top.length > 0) {
    const many = report.results.length > 1;
    out.push(
      "",
      `  top ${report.top.length} keys by denials${many ? "" : ` (${report.results[0]!.algorithm})`}`,
    );
    const head = ["key", "requests", "peak/min"];
    if (many) head.push(...report.results.map((r) => SHORT_NAMES[r.algorithm] ?? r.algorithm));
    else head.push("denied");
    const leased = report.nodes !== undefined;
    if (leased) head.push(`leased x${report.nodes!.nodes}`);
    const topRows = [head];
    for (const k of report.top) {
      const row = [
        printable(k.key) + (k.approximate ? " ~" : ""),
        String(k.requests),
        String(k.peakPerMinute),
      ];
      if (many) row.push(...k.denied.map(String));
      else row.push(`${k.denied[0]} (${percent(k.denied[0]!, k.requests)})`);
      if (leased) row.push(`${k.denied[1]} (${percent(k.denied[1]!, k.requests)})`);
      topRows.push(row);
    }
    const right = head.map((_, i) => i > 0); // all but the key
    out.push(...table(topRows, right));
    const approximate = report.top.filter((k) => k.approximate);
    if (approximate.length > 0) {
      const error = Math.max(...approximate.map((k) => k.deniedErrorMax));
      out.push(
        "  ~ counted from its first denial after --max-keys clients were tallied: requests and",
        `    peak/min from then on; denials may be up to ${error} more`,
      );
    }
  } else if (report.results.some((r) => r.denied > 0) === false && lines.parsed > 0) {
    out.push("", "  no request was denied");
  }

  if (lines.samples.length > 0) {
    out.push("", `  skipped lines (first ${lines.samples.length} of ${lines.skipped})`);
    for (const s of lines.samples) {
      out.push(`    line ${s.line}: ${printable(s.reason)}`);
      if (s.text.trim() !== "") out.push(`      ${printable(s.text)}`);
    }
  }
  return `${out.join("\n")}\n`;
}

/** Up to two decimals, without trailing zeros. */
function round(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** The text lines of `--nodes`: the leased nodes against the exact shared bucket. */
function nodesLines(n: NodesReport): string[] {
  const sources = Object.entries(n.sources)
    .map(([source, count]) => `${source} ${count}`)
    .join(", ");
  return [
    "",
    `  nodes     ${n.nodes} processes sharing it through LeasedTokenBucket leases (spread ${n.spread}, seed ${n.seed}, round trip ${n.rttMs} ms, initialCredit ${n.initialCredit})`,
    `            admitted ${n.admitted}, the exact shared bucket ${n.exactAdmitted}: utilisation ${percent(n.admitted, n.exactAdmitted)}`,
    `            overshoot ${n.overshoot} requests above the exact bucket's admissions (most for one key ${n.maxKeyOvershoot})`,
    `            above the bucket's own bound, capacity + refillPerSecond x T: worst key ${round(n.worstRunExcess)} from its first request (bound ${n.overshootBound} = nodes x initialCredit; keys over it: ${n.keysOverBound}), ${round(n.worstWindowExcess)} over any window`,
    `            keys admitted less than by the exact bucket: ${n.keysUnder}${n.perKeyExact ? "" : " (per-key counts cover the first --max-keys keys)"}`,
    `            lease round trips ${n.exchanges} (${n.exchangesPer1000.toFixed(1)} per 1,000 decisions), heartbeats ${n.heartbeats}; tokens taken ${round(n.tokensTaken)}, given back ${round(n.tokensGivenBack)}`,
    `            decisions by source: ${sources}`,
  ];
}

/**
 * The JSON report (the same numbers as the text one), pretty-printed; log text stays as
 * logged (JSON escapes), with the characters JSON.stringify leaves raw escaped too
 * ({@link asciiSafeJson}).
 */
export function jsonReport(report: ReplayReport, source: string): string {
  const ratio = (part: number, whole: number) =>
    whole === 0 ? 0 : Math.round((part * 10_000) / whole) / 100;
  const { samples, ...counts } = report.lines; // read, parsed, skipped, unkeyed
  const json = {
    source,
    format: report.format,
    key: report.key,
    lines: { ...counts, skippedSamples: samples },
    time:
      report.firstMs === undefined || report.lastMs === undefined
        ? null
        : {
            first: isoTime(report.firstMs),
            last: isoTime(report.lastMs),
            spanMs: report.lastMs - report.firstMs,
          },
    reorder: report.reorder,
    distinctKeys: report.distinctKeys,
    distinctKeysExact: report.distinctKeysExact,
    untalliedRequests: report.untalliedRequests,
    results: report.results.map((r) => ({
      algorithm: r.algorithm,
      options: r.options,
      derived: r.derived,
      requests: requestsOf(r),
      allowed: r.allowed,
      denied: r.denied,
      allowedPercent: ratio(r.allowed, requestsOf(r)),
      deniedPercent: ratio(r.denied, requestsOf(r)),
      peakLiveKeys: r.peakLiveKeys,
      lossyEvictions: r.lossyEvictions,
    })),
    ...(report.nodes === undefined ? {} : { nodes: report.nodes }),
    // Each KeyReport as is (its fields in their order), its denials by algorithm.
    top: report.top.map((k) => ({
      ...k,
      denied: Object.fromEntries([
        ...report.results.map((r, i) => [r.algorithm, k.denied[i]]),
        ...(report.nodes === undefined ? [] : [["leased", k.denied[report.results.length]]]),
      ]),
    })),
  };
  return `${asciiSafeJson(JSON.stringify(json, null, 2))}\n`;
}
