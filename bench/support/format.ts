/**
 * Markdown formatting for the report: tables, nanoseconds, ratios, bytes.
 * @module
 */

/** A Markdown table; `align` has one letter per column: `l` (text) or `r` (numbers). */
export function table(
  headers: readonly string[],
  align: string,
  rows: readonly (readonly string[])[],
): string {
  const rule = headers.map((_, i) => (align[i] === "r" ? "---:" : "---"));
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(headers), line(rule), ...rows.map(line)].join("\n");
}

/** Nanoseconds: one decimal below 100, whole above, with thousands separators. */
export function ns(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  return value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString("en-US");
}

/** Microseconds from nanoseconds, one decimal below 100. */
export function us(nanoseconds: number | undefined): string {
  if (nanoseconds === undefined || !Number.isFinite(nanoseconds)) return "–";
  const v = nanoseconds / 1000;
  return v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US");
}

/** A ratio `a / b` as `0.42x`; a dash when either is missing. */
export function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !(b > 0) || !Number.isFinite(a)) return "–";
  const r = a / b;
  return `${r < 10 ? r.toFixed(2) : r < 100 ? r.toFixed(1) : int(r)}x`;
}

/** A whole number with thousands separators. */
export function int(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  return Math.round(value).toLocaleString("en-US");
}
