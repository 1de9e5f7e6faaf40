// `npm run pack:check`: the package as a user gets it. Packs the tarball with `npm pack`
// (its `prepack` hook builds dist/), lints it (publint --strict, attw on the tarball),
// installs it with npm into an empty project in the system's temporary directory,
// outside the repository, and there:
// - imports all three entry points as ESM and as CommonJS, with real decisions
//   (scripts/smoke/esm.mjs and cjs.cjs, copied in, resolve "tollgate" to the install);
// - type-checks strict TypeScript against the installed types, as ESM (.mts) and as
//   CommonJS (.cts), with --module nodenext;
// - runs the bin as npm links it: `npx tollgate --version` and a replay of
//   examples/data/access-excerpt.log;
// - runs every code block of the README as a reader pasting it would (scripts/readme-check.mjs).
// `--no-build` packs without lifecycle scripts (the dist/ already there, as it is).
// `--keep` leaves the temporary directory for inspection. Exits 1 on the first failure.

import { spawn, spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { packReportOf } from "./pack-json.mjs";
import { checkReadme } from "./readme-check.mjs";

// Strict TypeScript that a user writes against the main API, as ESM.
const TS_ESM = `import {
  allOf,
  type Decision,
  FixedWindow,
  KeyedLimiter,
  type Limiter,
  RateLimitError,
  TokenBucket,
} from "tollgate";
import { type RateLimitMiddleware, rateLimit } from "tollgate/http";
import { fromIoredis, type RedisLike, RedisTokenBucket } from "tollgate/redis";
import { type ManualClock, manualClock } from "tollgate/testing";

const bucket: Limiter = new TokenBucket({ capacity: 10, refillPerSecond: 5 });
const decision: Decision = bucket.consume(2);
const retry: number = decision.retryAfterMs;
const perKey = new KeyedLimiter(
  allOf(
    new TokenBucket({ capacity: 10, refillPerSecond: 10 }),
    new FixedWindow({ limit: 1000, windowMs: 3_600_000 }),
  ),
  { maxKeys: 10_000 },
);
const allowed: boolean = perKey.allow("user:42");
const middleware: RateLimitMiddleware = rateLimit({ limiter: perKey });
const client: RedisLike = {
  evalSha: async () => [1, "9"],
  evalScript: async () => [1, "9"],
};
const shared = new RedisTokenBucket({ client, capacity: 10, refillPerSecond: 1 });
const pending: Promise<{ allowed: boolean; source: string }> = shared.consume("ip");
const wrap: typeof fromIoredis = fromIoredis;
const waited: Promise<Decision> = bucket.wait(1, { maxWaitMs: 100, jitterMs: 10 });
const testClock: ManualClock = manualClock(1000);
const tested = new TokenBucket({ capacity: 1, refillPerSecond: 1, initialTokens: 0, clock: testClock });
testClock.advance(1000);
const refilled: boolean = tested.allow();
waited.catch((e: unknown) => e instanceof RateLimitError);
// @ts-expect-error capacity is a number
new TokenBucket({ capacity: "10", refillPerSecond: 1 });
export { allowed, middleware, pending, refilled, retry, wrap };
`;

// The same package required from CommonJS TypeScript (resolved through "require").
const TS_CJS = `import tollgate = require("tollgate");
import http = require("tollgate/http");
import redis = require("tollgate/redis");
import testing = require("tollgate/testing");

const bucket = new tollgate.TokenBucket({ capacity: 1, refillPerSecond: 2 });
const d: tollgate.Decision = bucket.consume();
const middleware: http.RateLimitMiddleware = http.rateLimit({
  limiter: new tollgate.KeyedLimiter(bucket),
});
const make: typeof redis.fromNodeRedis = redis.fromNodeRedis;
const clock: testing.ManualClock = testing.manualClock();
export = { d, middleware, make, clock };
`;

const WINDOWS = process.platform === "win32";
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/**
 * The algorithm classes, each of which a bundler must be able to drop when unused: what
 * src/index.ts exports from src/algorithms/ (test/catalog.test.ts holds that list equal to
 * the catalog's, src/algorithms/catalog.ts).
 */
const ALGORITHMS = [
  ...readFileSync(join(root, "src", "index.ts"), "utf8").matchAll(
    /export\s*\{([^}]*)\}\s*from\s*"\.\/algorithms\/[^"]+"/g,
  ),
].flatMap((m) =>
  m[1]
    .split(",")
    .map((part) => part.trim())
    .filter((name) => name !== "" && !name.startsWith("type ")),
);
if (ALGORITHMS.length < 2) throw new Error(`pack-check: algorithms not found in src/index.ts`);
const bin = (name) => join(root, "node_modules", ".bin", name);
const args = new Set(process.argv.slice(2));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const started = performance.now();
const work = mkdtempSync(join(tmpdir(), "tollgate-pack-check-"));
const app = join(work, "app");
let failed = false;

/** Runs a command to completion; resolves with its output, rejects with it on failure. */
function run(label, cmd, argv, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, {
      cwd: app,
      shell: WINDOWS, // npm and npx are .cmd files there
      env: { ...process.env, NO_COLOR: "1", npm_config_update_notifier: "false" },
      ...options,
    });
    let out = "";
    child.stdout.on("data", (b) => (out += b));
    child.stderr.on("data", (b) => (out += b));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${label}: exit ${code}\n${out}`));
    });
  });
}

async function check(label, body) {
  const t = performance.now();
  try {
    const detail = await body();
    console.log(`pack-check: ${label}: ok${detail ? ` (${detail})` : ""}, ${ms(t)}`);
  } catch (error) {
    failed = true;
    console.error(
      `pack-check: ${label}: FAILED\n${error instanceof Error ? error.message : error}`,
    );
  }
}

const ms = (t) => `${Math.round(performance.now() - t)} ms`;

try {
  // 1. Pack, as a user or `npm publish` would (prepack builds dist/ from a clean slate).
  const packArgs = ["pack", "--json", "--pack-destination", work];
  if (args.has("--no-build")) packArgs.push("--ignore-scripts");
  const t = performance.now();
  const packed = spawnSync("npm", packArgs, { cwd: root, encoding: "utf8", shell: WINDOWS });
  if (packed.status !== 0) throw new Error(`npm pack: exit ${packed.status}\n${packed.stderr}`);
  const info = packReportOf(packed.stdout);
  const files = new Set(info.files.map((f) => f.path));
  const needed = ["package.json", "dist/cli.js"];
  for (const entry of ["index", "http", "redis", "testing"]) {
    for (const ext of [".js", ".cjs", ".d.ts", ".d.cts"]) needed.push(`dist/${entry}${ext}`);
  }
  const missing = needed.filter((f) => !files.has(f));
  if (missing.length > 0) {
    throw new Error(
      `the tarball lacks ${missing.join(", ")} (it holds ${[...files].join(", ")}); was dist/ built?`,
    );
  }
  const tarball = join(work, info.filename);
  console.log(
    `pack-check: packed ${info.filename}: ${info.entryCount} files, ${info.size} bytes, ${ms(t)}`,
  );

  // 2. An empty project outside the repository, with the tarball installed by npm.
  mkdirSync(app);
  writeFileSync(
    join(app, "package.json"),
    `${JSON.stringify({ name: "pack-check-app", version: "1.0.0", private: true }, null, 2)}\n`,
  );
  // Silently: npm >= 11.16 listed the tarball's `prepare` as an install script to review
  // on every install, until prepack took it out of the packed package.json
  // (scripts/pack-manifest.mjs). Any warning now fails the check.
  await check("npm install of the tarball, without a warning", async () => {
    const out = await run("npm install", "npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--offline",
      tarball,
    ]);
    const warnings = out.split("\n").filter((line) => /\b(warn|WARN)\b/.test(line));
    if (warnings.length > 0) throw new Error(`npm warned:\n${warnings.join("\n")}`);
    const packed = JSON.parse(
      readFileSync(join(app, "node_modules", "tollgate", "package.json"), "utf8"),
    );
    if (packed.scripts?.prepare !== undefined) {
      throw new Error("the packed package.json still has a prepare script");
    }
  });
  if (failed) throw new Error("cannot go on without the install");
  copyFileSync(join(root, "scripts", "smoke", "esm.mjs"), join(app, "esm.mjs"));
  copyFileSync(join(root, "scripts", "smoke", "cjs.cjs"), join(app, "cjs.cjs"));
  copyFileSync(join(root, "examples", "data", "access-excerpt.log"), join(app, "access.log"));
  writeFileSync(join(app, "main.mts"), TS_ESM);
  writeFileSync(join(app, "main.cts"), TS_CJS);

  // 3. The checks, concurrently: each is a separate process.
  const tsc = [
    join(root, "node_modules", "typescript", "bin", "tsc"),
    "--strict",
    "--noEmit",
    "--exactOptionalPropertyTypes",
    "--noUncheckedIndexedAccess",
    "--module",
    "nodenext",
    "--moduleResolution",
    "nodenext",
    "--target",
    "es2022",
    "--lib",
    "es2022,dom",
    // The shipped .d.ts are checked too (no skipLibCheck); tollgate/http and
    // tollgate/redis name Node's types, which a Node project has.
    "--typeRoots",
    join(root, "node_modules", "@types"),
    "--types",
    "node",
    "main.mts",
    "main.cts",
  ];
  await Promise.all([
    check("the published types hold only the documented API", async () => {
      // Machinery is marked @internal and stripped (tsup.config.ts): no private or
      // protected member, and none of the registry's old state hooks, may reach a user.
      const installed = join(app, "node_modules", "tollgate", "dist");
      const found = [];
      for (const file of readdirSync(installed).filter((f) => /\.d\.c?ts$/.test(f))) {
        const text = readFileSync(join(installed, file), "utf8");
        for (const [n, line] of text.split("\n").entries()) {
          if (
            /^\s*(private|protected)\b|\b(exportState|importState|seenClockMs|waitAs)\b/.test(line)
          ) {
            found.push(`${file}:${n + 1}: ${line.trim()}`);
          }
        }
      }
      if (found.length > 0) throw new Error(`internal members in the types:\n${found.join("\n")}`);
    }),
    check("publint --strict", async () => {
      await run("publint", bin("publint"), ["--strict"], { cwd: root });
    }),
    check("attw on the tarball", async () => {
      await run("attw", bin("attw"), [tarball]);
    }),
    check("ESM import of tollgate, tollgate/http, tollgate/redis, tollgate/testing", async () =>
      (await run("esm", process.execPath, ["esm.mjs"])).trim(),
    ),
    check("CommonJS require of the four", async () =>
      (await run("cjs", process.execPath, ["cjs.cjs"])).trim(),
    ),
    check("strict TypeScript (nodenext, ESM and CJS) against the installed types", () =>
      run("tsc", process.execPath, tsc),
    ),
    check("a bundle of one algorithm leaves the others out (tree shaking)", async () => {
      const { build } = await import("esbuild");
      const sizes = [];
      for (const only of ALGORITHMS) {
        const result = await build({
          stdin: { contents: `export { ${only} } from "tollgate";`, resolveDir: app },
          bundle: true,
          format: "esm",
          platform: "node",
          write: false,
          logLevel: "silent",
        });
        // Unminified, a kept class reads `var FixedWindow = class ...` (`_FixedWindow` when
        // it refers to itself), or `class FixedWindow`.
        const text = result.outputFiles[0]?.text ?? "";
        const defines = (a) => new RegExp(`\\b_?${a} = class\\b|\\bclass _?${a}\\b`).test(text);
        if (!defines(only)) throw new Error(`the bundle of ${only} does not define it`);
        const kept = ALGORITHMS.filter((a) => a !== only && defines(a));
        if (kept.length > 0)
          throw new Error(`importing only ${only} also bundles ${kept.join(", ")}`);
        // Each class's module-level option hints must go with it: a bucket's bundle holds no
        // window hints, a window's no bucket hints.
        const otherHints = only.endsWith("Bucket") ? "windowHints" : "bucketHints";
        if (text.includes(`function ${otherHints}(`)) {
          throw new Error(`importing only ${only} also bundles ${otherHints}`);
        }
        sizes.push(`${only} ${(text.length / 1024).toFixed(1)} KB unminified`);
      }
      return sizes.join(", ");
    }),
    check("npx tollgate --version", async () => {
      const out = (await run("npx", "npx", ["--no-install", "tollgate", "--version"])).trim();
      if (!out.includes(pkg.version)) throw new Error(`expected ${pkg.version}, got ${out}`);
      return out;
    }),
    check("npx tollgate replay of the access log excerpt", async () => {
      const out = await run("npx", "npx", [
        "--no-install",
        "tollgate",
        "replay",
        "access.log",
        "--algorithm",
        "token-bucket",
        "--capacity",
        "2",
        "--refill-per-second",
        "0.05",
        "--json",
      ]);
      const report = JSON.parse(out);
      const result = report.results?.[0];
      if (!(report.lines?.parsed > 0) || !(result?.denied > 0)) {
        throw new Error(`expected parsed lines and denials, got ${out.slice(0, 400)}`);
      }
      return `${report.lines.parsed} lines, ${result.denied} denied`;
    }),
  ]);
  // Last, alone: it installs the packages the README imports into the same project.
  await check("the README's code blocks, pasted into the project", () => checkReadme(root, app));
} catch (error) {
  failed = true;
  console.error(`pack-check: FAILED: ${error instanceof Error ? error.message : error}`);
} finally {
  if (args.has("--keep")) console.log(`pack-check: kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
console.log(`pack-check: ${failed ? "FAILED" : "passed"} in ${ms(started)}`);
process.exit(failed ? 1 : 0);
