// The JSON that `npm pack --json` prints, out of its stdout: prepack's build log comes
// first (with colour codes, which hold "["), so the JSON starts at the first line that
// is a lone "[".

/**
 * The first entry of `npm pack --json`'s report (`filename`, `files`, `size`, ...).
 * @param {string} stdout
 * @throws {Error} when no line of `stdout` starts the JSON array.
 */
export function packReportOf(stdout) {
  const start = stdout.search(/^\[\s*$/m);
  if (start < 0) throw new Error(`npm pack --json printed no JSON:\n${stdout}`);
  return JSON.parse(stdout.slice(start))[0];
}
