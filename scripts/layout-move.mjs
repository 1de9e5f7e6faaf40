// Moves src/ into the layout whose folders show the layers, and rewrites every path that
// names a moved file, so that the tree type-checks, lints and tests as before:
//
//   src/index.ts            the entry point (src/http/, src/redis/, src/testing/ hold theirs)
//   src/core/               Limiter, Decision, Clock, errors, numeric, option names,
//                           reconfigure, waiting, receipts, blocks: every loose root file
//   src/algorithms/         the algorithms, their math, and the catalog
//   src/composite/          allOf
//   src/keyed/              KeyedLimiter and its slab engine (was registry.ts + registry/)
//   src/http/, store/, redis/, metrics/, concurrency/, cli/   as they were
//
// It maps by rule, not by a list of today's files, so it can run again on a tree that
// other branches changed: MOVES below first, then any other file at the root of src/ goes
// to core/. A rule whose file is not there is skipped (and said); a file that appeared
// follows the rules. Then:
// 1. every relative import or re-export (`from`, `import()`, `require()`, `vi.mock()`) in
//    src/, test/, bench/, scripts/, examples/ and the root config files is rewritten from
//    where its file and its target were to where they are;
// 2. every path that names a moved file or folder (`src/registry/engine.ts`,
//    `../src/registry.ts`, `registry/layouts/` in src/ comments, Markdown links, test and
//    script paths, vitest/tsup/tsconfig/package.json) is rewritten, in every tracked text
//    file but this script and recorded bench results;
// 3. the region between `layout-move:begin` and `layout-move:end` in CONTRIBUTING.md is
//    replaced by its map; the layers and what each may not import are test/layers.json,
//    which test/layers.test.ts reads too, and every folder of src/ must be one of them;
// 4. `biome check --write` sorts the imports of the files it changed;
// 5. every relative import is checked to name a file that exists (exit 1 if not).
//
//   node scripts/layout-move.mjs            run it (no uncommitted change to a tracked file)
//   node scripts/layout-move.mjs --dry-run  print what it would move, change nothing
//
// Running it again on a moved tree moves nothing, and writes the regions again (after an
// edit of scripts/layout-move-map.md, say). Commit its result on its own.
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";

const root = execFileSync("git", ["rev-parse", "--show-toplevel"], {
  cwd: dirname(fileURLToPath(import.meta.url)),
  encoding: "utf8",
}).trim();
const dryRun = process.argv.includes("--dry-run");
const SELF = "scripts/layout-move.mjs";
/** The map of CONTRIBUTING.md in this layout, written into its region (step 3). */
const MAP = "scripts/layout-move-map.md";

/**
 * The moves, first match wins: `from` is a repository path, a folder when it ends in `/`
 * (everything under it moves, keeping its place below the folder). Anything at the root
 * of src/ that no row names goes to src/core/ (ENTRY_POINTS stay).
 */
const MOVES = [
  // One name for the keyed concept: KeyedLimiter and its engine live in keyed/.
  { from: "src/registry.ts", to: "src/keyed/keyed-limiter.ts" },
  // "store" means the shared-store seam (src/store/) only: the registry's counters are stats.
  { from: "src/registry/store.ts", to: "src/keyed/stats.ts" },
  { from: "src/registry/", to: "src/keyed/" },
  { from: "src/catalog.ts", to: "src/algorithms/catalog.ts" },
  { from: "src/composite.ts", to: "src/composite/all-of.ts" },
  // ... and the lease's seam with its shared bucket is the lease exchange (LeaseExchange).
  { from: "src/redis/leased/store.ts", to: "src/redis/leased/exchange.ts" },
  // test/ mirrors src/.
  { from: "test/registry.test.ts", to: "test/keyed/keyed-limiter.test.ts" },
  { from: "test/registry/", to: "test/keyed/" },
  { from: "test/composite.test.ts", to: "test/composite/all-of.test.ts" },
];
/** The layers and which each may not import: the one table, which test/layers.test.ts reads too. */
const LAYERS = JSON.parse(readFileSync(join(root, "test/layers.json"), "utf8"));
const ENTRY_POINTS = new Set(LAYERS.rootFiles.map((f) => `src/${f}`));
const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/;
const TEXT = /\.(ts|mts|cts|js|mjs|cjs|json|md|yml|yaml|txt)$|(^|\/)(run|\.gitignore)$/;

const git = (...args) => execFileSync("git", args, { cwd: root, encoding: "utf8" });

if (!dryRun && git("status", "--porcelain", "--untracked-files=no").trim() !== "") {
  console.error("layout-move: the work tree has changes; commit or stash them first");
  process.exit(1);
}

const tracked = git("ls-files", "-z").split("\0").filter(Boolean);
const trackedSet = new Set(tracked);

/** Where `file` goes, or undefined when it stays. */
function destination(file) {
  for (const { from, to } of MOVES) {
    if (from.endsWith("/") ? file.startsWith(from) : file === from) {
      return from.endsWith("/") ? to + file.slice(from.length) : to;
    }
  }
  if (/^src\/[^/]+\.ts$/.test(file) && !ENTRY_POINTS.has(file)) {
    return `src/core/${file.slice("src/".length)}`;
  }
  return undefined;
}

const moves = new Map(); // old path -> new path
for (const file of tracked) {
  const to = destination(file);
  if (to !== undefined && to !== file) moves.set(file, to);
}
const unused = MOVES.filter(({ from }) =>
  from.endsWith("/") ? !tracked.some((f) => f.startsWith(from)) : !trackedSet.has(from),
);
const clashes = [...moves].filter(([, to]) => trackedSet.has(to) && !moves.has(to));
if (clashes.length > 0) {
  console.error(
    `layout-move: these would overwrite a file: ${clashes.map(([f, t]) => `${f} -> ${t}`).join(", ")}`,
  );
  process.exit(1);
}

console.log(`layout-move: ${moves.size} files to move`);
for (const [from, to] of moves) console.log(`  ${from} -> ${to}`);
for (const { from } of unused) console.log(`  (no ${from} here: rule skipped)`);
if (moves.size === 0) {
  console.log("layout-move: nothing to move (already in this layout?): regions and checks only");
}
if (dryRun) process.exit(0);

// --- 0. Move. ---------------------------------------------------------------------------
for (const [from, to] of moves) {
  mkdirSync(join(root, dirname(to)), { recursive: true });
  git("mv", from, to);
}
// The folders the moves emptied go too (git tracks files, not folders).
for (const from of [...new Set([...moves.keys()].map((f) => dirname(f)))].sort().reverse()) {
  for (let dir = from; dir !== "." && dir !== "src" && dir !== "test"; dir = dirname(dir)) {
    const path = join(root, dir);
    if (!existsSync(path) || readdirSync(path).length > 0) break;
    rmdirSync(path);
  }
}
const oldOf = new Map([...moves].map(([from, to]) => [to, from]));
const after = tracked.map((f) => moves.get(f) ?? f);
const newOf = (oldPath) => moves.get(oldPath) ?? oldPath;

// --- 1. Relative imports. ---------------------------------------------------------------
/** The tracked file (before the move) a specifier written in `oldFile` names, if any. */
function targetOf(oldFile, spec) {
  const base = posix.normalize(posix.join(posix.dirname(oldFile), spec));
  const candidates = [base];
  if (/\.js$/.test(base)) candidates.unshift(base.replace(/\.js$/, ".ts"));
  if (/\.mjs$/.test(base)) candidates.unshift(base.replace(/\.mjs$/, ".mts"));
  if (/\.cjs$/.test(base)) candidates.unshift(base.replace(/\.cjs$/, ".cts"));
  if (!/\.[a-z]+$/.test(base)) candidates.push(`${base}.ts`, `${base}/index.ts`);
  return candidates.find((c) => trackedSet.has(c));
}

/** `spec` rewritten for `newFile`, pointing at where its target is now; `spec` if unmoved. */
function rewriteSpec(oldFile, newFile, spec) {
  const target = targetOf(oldFile, spec);
  if (target === undefined) return spec;
  const movedTarget = newOf(target);
  if (movedTarget === target && oldFile === newFile) return spec;
  const oldBase = posix.normalize(posix.join(posix.dirname(oldFile), spec));
  // Keep the specifier's own style: its extension (.js for .ts) or none, or the folder.
  let wanted = movedTarget;
  if (oldBase === target.replace(/\.ts$/, ".js")) wanted = movedTarget.replace(/\.ts$/, ".js");
  else if (oldBase === target.replace(/\.mts$/, ".mjs"))
    wanted = movedTarget.replace(/\.mts$/, ".mjs");
  else if (oldBase === target.replace(/\.cts$/, ".cjs"))
    wanted = movedTarget.replace(/\.cts$/, ".cjs");
  else if (`${oldBase}.ts` === target) wanted = movedTarget.replace(/\.ts$/, "");
  else if (`${oldBase}/index.ts` === target) wanted = posix.dirname(movedTarget);
  let out = posix.relative(posix.dirname(newFile), wanted);
  if (!out.startsWith(".")) out = `./${out}`;
  return out;
}

const SPECIFIER =
  /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*|\bvi\.(?:mock|doMock|unmock|importActual)\s*\(\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g;
const IMPORT_ROOTS = /^(src|test|bench|scripts|examples)\/|^[^/]+\.(ts|mts|mjs|cjs|js)$/;
const changed = new Set();

/** `text` with its code's relative specifiers rewritten (a Markdown file: its code blocks). */
function rewriteImports(newFile, text) {
  const oldFile = oldOf.get(newFile) ?? newFile;
  return text.replace(SPECIFIER, (all, head, quote, spec) => {
    const next = rewriteSpec(oldFile, newFile, spec);
    return next === spec ? all : `${head}${quote}${next}${quote}`;
  });
}

for (const file of after) {
  if (!CODE.test(file) || !IMPORT_ROOTS.test(file) || file === SELF) continue;
  const text = readFileSync(join(root, file), "utf8");
  const next = rewriteImports(file, text);
  if (next !== text) {
    writeFileSync(join(root, file), next);
    changed.add(file);
  }
}

// --- 2. Paths that name a moved file or folder. -----------------------------------------
/** `s` as a regular expression that matches it literally. */
const literal = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** [old, new] path pairs, longest first: files with .ts and .js spellings, then folders. */
function pathPairs(strip) {
  const pairs = [];
  for (const [from, to] of moves) {
    if (!from.startsWith(strip)) continue;
    const f = from.slice(strip.length);
    const t = to.slice(strip.length);
    pairs.push([f, t]);
    if (f.endsWith(".ts")) pairs.push([f.replace(/\.ts$/, ".js"), t.replace(/\.ts$/, ".js")]);
  }
  for (const { from, to } of MOVES) {
    if (from.endsWith("/") && from.startsWith(strip) && moves.size > 0) {
      pairs.push([from.slice(strip.length), to.slice(strip.length)]);
      // A folder named without its slash (`src/registry` in prose), not a file beside it.
      pairs.push([from.slice(strip.length, -1), to.slice(strip.length, -1)]);
    }
  }
  return pairs.sort((a, b) => b[0].length - a[0].length);
}

/**
 * Replaces each old path in `text` that stands alone (not inside a longer name; `before`
 * is the characters that may not precede it). A folder written with its slash is a prefix
 * (`src/registry/layouts/x.ts`); without it, it must end there (`src/registry` in prose,
 * not `src/registry.ts`).
 */
function replacePaths(text, pairs, before = "\\w.-") {
  if (pairs.length === 0) return text;
  const byOld = new Map(pairs);
  const alternatives = pairs.map(([f]) =>
    f.endsWith("/") ? literal(f) : `${literal(f)}(?![\\w-]|\\.(?:ts|js)\\b|/\\w)`,
  );
  const pattern = new RegExp(`(?<![${before}])(?:${alternatives.join("|")})`, "g");
  return text.replace(pattern, (m) => byOld.get(m) ?? m);
}

// Repository paths (`src/registry.ts`, `test/registry/`) everywhere; paths below src/
// (`registry/engine.ts`, `registry/layouts/`) in src/'s own comments and in the docs.
const repoPairs = pathPairs("");
const srcPairs = pathPairs("src/").filter(([f]) => f.includes("/"));
for (const file of after) {
  if (file === SELF || file === MAP || file.startsWith("bench/results/")) continue;
  if (file === "package-lock.json") continue;
  if (!TEXT.test(file) || !existsSync(join(root, file))) continue;
  const text = readFileSync(join(root, file), "utf8");
  let next = replacePaths(text, repoPairs);
  if (/^(src|docs)\/|^CONTRIBUTING\.md$/.test(file)) {
    // Only where the path is not part of a longer one (a repository path, handled above).
    next = replacePaths(next, srcPairs, "\\w./-");
  }
  if (next !== text) {
    writeFileSync(join(root, file), next);
    changed.add(file);
  }
}

// --- 3. Regions written for the new layout. ---------------------------------------------
const CONTRIBUTING_MAP = readFileSync(join(root, MAP), "utf8").trimEnd();

const REGIONS = [
  {
    file: "CONTRIBUTING.md",
    open: "<!-- layout-move:begin -->",
    close: "<!-- layout-move:end -->",
  },
];
const CONTENT = { "CONTRIBUTING.md": CONTRIBUTING_MAP };
for (const { file, open, close } of REGIONS) {
  const path = join(root, file);
  if (!existsSync(path)) {
    console.log(`layout-move: no ${file}: its region skipped`);
    continue;
  }
  const text = readFileSync(path, "utf8");
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  if (start < 0 || end < start) {
    console.log(`layout-move: ${file} has no ${open} ... ${close} region: skipped`);
    continue;
  }
  const next = `${text.slice(0, start + open.length)}\n${CONTENT[file]}\n${text.slice(end)}`;
  if (next !== text) {
    writeFileSync(path, next);
    changed.add(file);
  }
}

// --- 4. Sort the imports the new paths reordered. ---------------------------------------
const lintable = [...changed].filter((f) => CODE.test(f));
if (lintable.length > 0) {
  const biome = spawnSync(
    process.execPath,
    [join(root, "node_modules/@biomejs/biome/bin/biome"), "check", "--write", ...lintable],
    { cwd: root, encoding: "utf8" },
  );
  if (biome.status !== 0) process.stdout.write(biome.stdout + biome.stderr);
}

// --- 5. Every relative import names a file that exists. ---------------------------------
// Only statements (a line that starts an import or export, or closes its braces) and
// dynamic imports: a specifier quoted inside a string (a test's fixture) is not code.
const STATEMENT =
  /^(?:[ \t]*(?:import|export)\b[^;'"`]*?|[ \t]*\}[ \t]*)from\s*["'](\.{1,2}\/[^"'\n]+)["']|\bimport\(\s*["'](\.{1,2}\/[^"'\n]+)["']\s*\)/gm;
const present = new Set(
  git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"),
);
const broken = [];
for (const file of present) {
  if (!CODE.test(file) || !IMPORT_ROOTS.test(file) || file === SELF) continue;
  if (!existsSync(join(root, file))) continue;
  for (const m of readFileSync(join(root, file), "utf8").matchAll(STATEMENT)) {
    const spec = m[1] ?? m[2];
    const base = posix.normalize(posix.join(posix.dirname(file), spec));
    const options = [base, base.replace(/\.js$/, ".ts"), base.replace(/\.mjs$/, ".mts")];
    options.push(`${base}.ts`, `${base}/index.ts`);
    // Module text a test bundles names its imports from the repository's root.
    if (spec.startsWith("./src/")) options.push(spec.slice(2));
    if (!options.some((o) => present.has(o) || existsSync(join(root, o)))) {
      broken.push(`${file}: ${spec}`);
    }
  }
}
const loose = [...present].filter((f) => /^src\/[^/]+$/.test(f) && !ENTRY_POINTS.has(f));
// Every folder of src/ is a layer of test/layers.json, so the layers test checks its imports.
const layers = new Set(LAYERS.forbidden.flatMap((r) => [r.layer, ...r.mayNotImport]));
const unlayered = [
  ...new Set([...present].flatMap((f) => /^src\/([^/]+)\//.exec(f)?.[1] ?? []).map((d) => `${d}/`)),
].filter((d) => !layers.has(d));

// The map names every file of src/ (by its name without .ts): say which it does not.
const unmapped = [...present].filter(
  (f) => /^src\/.+\.ts$/.test(f) && !CONTRIBUTING_MAP.includes(posix.basename(f, ".ts")),
);

console.log(`layout-move: moved ${moves.size} files, rewrote paths in ${changed.size} files`);
if (unmapped.length > 0) {
  console.log(
    `layout-move: ${MAP} (CONTRIBUTING's map) does not name: ${unmapped.join(", ")}; add them there and run again`,
  );
}
if (loose.length > 0)
  console.log(`layout-move: still loose at the root of src/: ${loose.join(", ")}`);
if (unlayered.length > 0) {
  console.log(
    `layout-move: folders of src/ that test/layers.json does not name: ${unlayered.join(", ")}; add them there`,
  );
}
if (broken.length > 0) {
  console.error(`layout-move: imports that name no file:\n  ${broken.join("\n  ")}`);
  process.exit(1);
}
console.log(
  "layout-move: next: npx tsc --noEmit && npx biome check . && npm test, then commit the result",
);
