// The public surface, one API report per entry point (etc/<entry>.api.md), written by API
// Extractor from the built declarations (dist/*.d.ts), so that the surface changes only on
// purpose: a new, removed or changed export shows as a diff of these files in review.
//
//   node scripts/api-report.mjs           check (a step of `npm test`): fails, printing what
//                                         changed, when a report is not what dist/ declares
//   node scripts/api-report.mjs --update  rewrite the reports (`npm run api` builds first)
//
// dist/ is built first (`npm run build`) when it is missing or older than any file of src/,
// so the check never reads stale declarations.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Extractor, ExtractorConfig } from "@microsoft/api-extractor";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const update = process.argv.includes("--update");

/** Entry point (the package.json `exports` key) → its declaration file in dist/ and report. */
const ENTRIES = [
  { subpath: ".", dts: "index.d.ts", report: "tollgate.api.md" },
  { subpath: "./http", dts: "http.d.ts", report: "tollgate-http.api.md" },
  { subpath: "./redis", dts: "redis.d.ts", report: "tollgate-redis.api.md" },
  { subpath: "./testing", dts: "testing.d.ts", report: "tollgate-testing.api.md" },
];

// Every entry point of package.json has a report, and no report is left for one that went.
const exported = Object.keys(JSON.parse(readFileSync(join(root, "package.json"), "utf8")).exports);
const missing = exported.filter(
  (s) => s !== "./package.json" && !ENTRIES.some((e) => e.subpath === s),
);
if (missing.length > 0) {
  console.error(`api-report: no report configured for the entry points ${missing.join(", ")}`);
  process.exit(1);
}

/** The newest modification time of any file under `dir`. */
function newest(dir) {
  let t = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return t;
}

const dist = join(root, "dist");
const built = ENTRIES.map((e) => join(dist, e.dts));
const stale =
  built.some((f) => !existsSync(f)) ||
  Math.min(...built.map((f) => statSync(f).mtimeMs)) < newest(join(root, "src"));
if (stale) {
  console.log("api-report: dist/ is missing or older than src/: npm run build");
  const r = spawnSync("npm", ["run", "--silent", "build"], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    shell: process.platform === "win32",
  });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** API Extractor's console messages this script says in its own words (or not at all). */
const QUIET = new Set([
  "console-preamble",
  "console-api-report-not-copied",
  "console-api-report-copied",
  "console-api-report-created",
]);

const temp = mkdtempSync(join(tmpdir(), "tollgate-api-"));
const changed = [];
let failed = false;
try {
  for (const entry of ENTRIES) {
    const config = ExtractorConfig.prepare({
      configObject: {
        projectFolder: root,
        mainEntryPointFilePath: join(dist, entry.dts),
        compiler: {
          overrideTsconfig: {
            compilerOptions: {
              target: "ES2022",
              lib: ["ES2022", "DOM"],
              module: "ESNext",
              moduleResolution: "Bundler",
              strict: true,
              types: ["node"],
              skipLibCheck: true,
            },
            files: [join(dist, entry.dts)],
          },
        },
        apiReport: {
          enabled: true,
          reportFileName: entry.report,
          reportFolder: join(root, "etc"),
          reportTempFolder: temp,
        },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        newlineKind: "lf",
        messages: {
          // The doc comments are JSDoc (`@throws {TypeError}`, `@default 'local'`), read by
          // editors; TSDoc's stricter grammar is not the contract here.
          tsdocMessageReporting: { default: { logLevel: "none" } },
          extractorMessageReporting: {
            default: { logLevel: "warning" },
            // No release tags (@public, @beta): everything exported is public.
            "ae-missing-release-tag": { logLevel: "none" },
            // A type a public signature uses but the entry point does not export: listed
            // in the report, so a reader sees it (and it shows in review when it changes).
            "ae-forgotten-export": { logLevel: "none", addToApiReportFile: true },
            // An export without a doc comment is marked "(undocumented)" in the report.
            "ae-undocumented": { logLevel: "none" },
            // `{@link charge}` to a member of the same class is JSDoc, not TSDoc's grammar.
            "ae-unresolved-link": { logLevel: "none" },
          },
          compilerMessageReporting: { default: { logLevel: "warning" } },
        },
      },
      configObjectFullPath: undefined,
      packageJsonFullPath: join(root, "package.json"),
    });
    const result = Extractor.invoke(config, {
      localBuild: update,
      messageCallback: (message) => {
        // The version preamble is noise; the report's "please copy the file" advice is
        // replaced by the diff and the summary below.
        if (QUIET.has(message.messageId)) message.handled = true;
      },
    });
    if (result.apiReportChanged) changed.push(entry);
    if (!result.succeeded) failed = true;
  }
  if (changed.length > 0 && !update) {
    for (const entry of changed) {
      const diff = spawnSync(
        "git",
        ["diff", "--no-index", "--", join("etc", entry.report), join(temp, entry.report)],
        { cwd: root, encoding: "utf8" },
      );
      process.stdout.write(diff.stdout);
    }
    console.error(
      `api-report: the public surface of ${changed.map((e) => `tollgate${e.subpath.slice(1)}`).join(", ")} changed and etc/ does not say so. If the change is meant, run \`npm run api\` and commit etc/.`,
    );
    failed = true;
  } else if (changed.length > 0) {
    console.log(`api-report: updated ${changed.map((e) => `etc/${e.report}`).join(", ")}`);
  } else {
    console.log(`api-report: the ${ENTRIES.length} reports in etc/ match dist/`);
  }
} finally {
  rmSync(temp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
