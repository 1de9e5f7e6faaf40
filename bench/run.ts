/**
 * `npm run bench`: the whole benchmark in one run. Prints a Markdown report to stdout (the
 * machine line first), writes the raw numbers to bench/results/<timestamp>.json, and shows
 * progress on stderr when it is a terminal.
 *
 *   npm run bench                  sections 1-5 and 7 (floors, algorithms, peers, memory,
 *                                  Redis, the global limit of 4 processes), timing rows in
 *                                  3 rounds
 *   npm run bench -- --quick       sections 1-7 briefly, smaller key sets, 1 round (CI smoke)
 *   npm run bench -- --rounds 5    more rounds of the timing rows (median, min–max)
 *   npm run bench -- --stability 3 the bench 3 times in a row, then each target figure's
 *                                  spread over the runs and whether it is within ±10%
 *   npm run bench -- --only TokenBucket,TokenBucket.coarse
 *                                  only these timing groups (no memory, Redis, global):
 *                                  a focused run, with --rounds or --stability
 *   npm run bench -- --compare a.json b.json c.json
 *                                  the same stability table from saved results
 *   npm run bench:http             section 6, the HTTP experiment (autocannon, about 5 min)
 *   npm run bench -- --http        the same as bench:http (add --quick for a short one)
 *   npm run bench -- --all         sections 1-7
 *
 * Every comparison is a ratio to a reference row measured in the same run and round (a
 * bare `performance.now()`, the naive `Map` token bucket, a bare Redis `PING`, the server
 * with no limiter). Each timing group runs in a fresh child process per round.
 * @module
 */
import { GROUPS } from "./support/groups.js";
import { type BenchOptions, runBench } from "./support/runner.js";
import { loadRun, renderStability } from "./support/stability-report.js";

const argv = process.argv.slice(2);

function fail(message: string): never {
  console.error(`bench: ${message}`);
  process.exit(2);
}

/** The integer after `flag` (>= 1), or undefined when the flag is absent. */
function count(flag: string): number | undefined {
  const i = argv.indexOf(flag);
  if (i === -1) return undefined;
  const n = Number(argv[i + 1]);
  if (!Number.isInteger(n) || n < 1 || n > 100)
    fail(`${flag} takes an integer from 1 to 100, got ${argv[i + 1]}`);
  return n;
}

const compare = argv.indexOf("--compare");
if (compare !== -1) {
  const files = argv.slice(compare + 1);
  if (files.length < 2) fail("--compare takes two or more bench/results/*.json files");
  process.stdout.write(renderStability(files.map(loadRun), files));
  process.exit(0);
}

const quick = argv.includes("--quick");
const all = argv.includes("--all");
const httpOnly = argv.includes("--http") && !all;
const rounds = count("--rounds");
const runs = count("--stability");
const onlyAt = argv.indexOf("--only");
const only = onlyAt === -1 ? undefined : (argv[onlyAt + 1] ?? "").split(",").filter(Boolean);
if (only !== undefined) {
  const known = new Set(GROUPS.map((g) => g.id));
  const bad = only.filter((id) => !known.has(id));
  if (only.length === 0 || bad.length > 0) {
    fail(`--only takes timing group ids (${[...known].join(", ")}), got ${argv[onlyAt + 1]}`);
  }
}
const valued = new Set(
  ["--rounds", "--stability", "--only"].flatMap((f) => {
    const i = argv.indexOf(f);
    return i === -1 ? [] : [i, i + 1];
  }),
);
const unknown = argv.filter(
  (a, i) => !valued.has(i) && !["--quick", "--http", "--all"].includes(a),
);
if (unknown.length > 0) {
  fail(
    `unknown option ${unknown.join(" ")} (use --quick, --http, --all, --rounds N, --only GROUPS, --stability N, --compare FILES)`,
  );
}
const options: BenchOptions = {
  quick,
  core: !httpOnly,
  // The quick smoke test covers every section; a full HTTP run is its own command.
  http: httpOnly || all || quick,
  ...(rounds === undefined ? {} : { rounds }),
  ...(only === undefined ? {} : { only, http: false }),
};
if (runs === undefined) {
  await runBench(options);
} else {
  const results = [];
  for (let i = 0; i < runs; i++) {
    process.stderr.write(`bench: run ${i + 1} of ${runs}\n`);
    results.push(await runBench({ ...options, print: i === runs - 1 }));
  }
  process.stdout.write(
    `\n${renderStability(
      results,
      results.map((r) => r.file),
    )}`,
  );
}
