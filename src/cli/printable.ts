/**
 * Log content made safe to show: a log line is written by whoever sent the request, so
 * its path, user agent or host may carry terminal escape sequences (`ESC [2J`, a title
 * change, an OSC 8 link), or bidirectional overrides that reorder what is shown. The
 * text report, the skipped-line samples and the chart's text pass everything taken from
 * the log through {@link printable}; the JSON report through {@link asciiSafeJson}.
 */

/**
 * True for C0 controls (U+0000–U+001F), DEL (U+007F), C1 controls (U+0080–U+009F), the
 * line and paragraph separators (U+2028, U+2029) and the bidirectional formatting
 * characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
 */
function unsafe(code: number): boolean {
  if (code < 0x20) return true;
  if (code < 0x7f) return false;
  if (code <= 0x9f) return true;
  if (code < 0x61c) return false;
  return (
    code === 0x61c ||
    code === 0x200e ||
    code === 0x200f ||
    (code >= 0x2028 && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069)
  );
}

/** `text` with each character for which `replace` gives a string replaced by it. */
function escapeWhere(text: string, replace: (code: number) => string | undefined): string {
  let out = "";
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const replacement = replace(text.charCodeAt(i));
    if (replacement === undefined) continue;
    out += text.slice(from, i) + replacement;
    from = i + 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

const hex = (code: number, digits: number) => code.toString(16).padStart(digits, "0");

const BACKSLASH = 0x5c;

/**
 * `text` with every control and bidirectional formatting character written as an escape:
 * `\xHH` below U+0100 (`\x1b`, `\x7f`, `\x9b`), `\u{HHHH}` above (`\u{202e}`), and each
 * backslash doubled (`\\`), so an escape written here never reads like text that was
 * logged: a real ESC shows as `\x1b`, the four characters `\x1b` in a log (Apache writes
 * control bytes so) as `\\x1b`. Other text is unchanged.
 */
export function printable(text: string): string {
  return escapeWhere(text, (code) =>
    code === BACKSLASH
      ? "\\\\"
      : !unsafe(code)
        ? undefined
        : code < 0x100
          ? `\\x${hex(code, 2)}`
          : `\\u{${hex(code, 4)}}`,
  );
}

/**
 * `json` (the output of JSON.stringify) with DEL, the C1 controls, U+2028/U+2029 and the
 * bidirectional formatting characters as `\uHHHH` escapes. JSON.stringify escapes the C0
 * controls but not these; outside strings its output is ASCII, so every match is inside
 * a string, where `\uHHHH` means the same character: the result parses to the same value.
 */
export function asciiSafeJson(json: string): string {
  // JSON.stringify already wrote the C0 controls as escapes: only the others remain.
  return escapeWhere(json, (code) =>
    code >= 0x7f && unsafe(code) ? `\\u${hex(code, 4)}` : undefined,
  );
}
