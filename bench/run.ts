/**
 * `npm run bench`: the whole benchmark in one run. Prints a Markdown report to stdout (the
 * machine line first), writes the raw numbers to bench/results/<timestamp>.json, and shows
 * progress on stderr when it is a terminal.
 *
 *   npm run bench                  sections 1-5 and 7 (floors, algorithms, peers, memory,
 *                                  Redis, the global limit of 4 processes)
 *   npm run bench -- --quick       sections 1-7 briefly, smaller key sets (CI smoke test)
 *   npm run bench:http             section 6, the HTTP experiment (autocannon, about 70 s)
 *   npm run bench -- --http        the same as bench:http (add --quick for a short one)
 *   npm run bench -- --all         sections 1-7
 *
 * Every comparison is a ratio to a reference row measured in the same run (a bare
 * `performance.now()`, the naive `Map` token bucket, a bare Redis `PING`, the server with
 * no limiter). Each timing group and each memory variant runs in a fresh child process.
 * @module
 */
import { type BenchOptions, runBench } from "./support/runner.js";

const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const all = argv.includes("--all");
const httpOnly = argv.includes("--http") && !all;
const options: BenchOptions = {
  quick,
  core: !httpOnly,
  // The quick smoke test covers every section; a full HTTP run is its own command.
  http: httpOnly || all || quick,
};
const unknown = argv.filter((a) => !["--quick", "--http", "--all"].includes(a));
if (unknown.length > 0) {
  console.error(`bench: unknown option ${unknown.join(" ")} (use --quick, --http, --all)`);
  process.exit(2);
}
await runBench(options);
