// No import in src/ runs back up a layer. A layer is a directory of src/ (core, algorithms,
// keyed, store, http, redis, cli, ...; a nested directory belongs to its top one) or one file
// at the top of src/. FORBIDDEN, at the end, says which layers each may not import; no two
// layers import each other, even through others, and no two files import values from each
// other. Imports are read with a regex over `from "..."` (type imports and re-exports
// included); the helpers are checked on small inputs first, against a table of their own,
// so a checker that accepts everything fails here.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "..", "src");

/** Source files by their path relative to src/, with `/` separators (`algorithms/time.ts`). */
type Tree = ReadonlyMap<string, string>;

/** Every `.ts` file under `dir`, with its source. */
function readTree(dir: string): Tree {
  const tree = new Map<string, string>();
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) {
        tree.set(relative(dir, path).split("\\").join("/"), readFileSync(path, "utf8"));
      }
    }
  };
  walk(dir);
  return tree;
}

/** The relative specifiers `source` imports or re-exports from (`./wait.js`). */
function specifiers(source: string): string[] {
  return [...source.matchAll(/\bfrom\s+["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
}

/**
 * The relative specifiers `source` imports or re-exports values from: a statement that
 * names only types (`import type`, `export type`, `import { type A, type B }`) is left out,
 * as the compiler erases it.
 */
function runtimeSpecifiers(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(
    /\b(import|export)\s+(type\s+)?(\{[^}]*\}|\*[^;]*?|\w+)\s+from\s+["'](\.{1,2}\/[^"']+)["']/g,
  )) {
    const names = m[3]!.startsWith("{")
      ? m[3]!
          .slice(1, -1)
          .split(",")
          .map((n) => n.trim())
          .filter((n) => n !== "")
      : [m[3]!];
    if (m[2] === undefined && names.some((n) => !n.startsWith("type "))) found.push(m[4]!);
  }
  return found;
}

/** The file (relative to src/) that `specifier`, written in `file`, names: `.js` read as `.ts`. */
function resolve(file: string, specifier: string): string {
  return posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, ".ts");
}

/** The layer of a file: its top directory under src/ (`algorithms/`), or the file itself. */
function layer(file: string): string {
  const slash = file.indexOf("/");
  return slash === -1 ? file : file.slice(0, slash + 1);
}

/** Layers that may not be imported from each layer: a key or value ending in `/` is a directory. */
type Forbidden = ReadonlyMap<string, readonly string[]>;

/** The helpers' own table, so their tests do not change with the layout. */
const FIXTURE: Forbidden = new Map([
  [
    "algorithms/",
    ["registry.ts", "registry/", "composite.ts", "http/", "redis/", "store/", "cli/"],
  ],
  ["registry/", ["http/", "redis/", "store/", "cli/"]],
  ["store/", ["redis/", "http/", "cli/"]],
]);

/** Every import in `tree` from a layer to one it may not import: `from -> to`. */
function upwardImports(tree: Tree, forbidden: Forbidden): string[] {
  const found: string[] = [];
  for (const [file, source] of tree) {
    const banned = forbidden.get(layer(file)) ?? [];
    for (const spec of specifiers(source)) {
      const target = resolve(file, spec);
      if (banned.includes(layer(target))) found.push(`${file} -> ${target}`);
    }
  }
  return found;
}

/** The layers each layer imports from (itself excluded). */
function layerGraph(tree: Tree): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const [file, source] of tree) {
    const from = layer(file);
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const spec of specifiers(source)) {
      const to = layer(resolve(file, spec));
      if (to !== from) edges.add(to);
    }
  }
  return graph;
}

/** Each import cycle between layers, as `a -> b -> a`; one per cycle found by a depth-first walk. */
function layerCycles(tree: Tree): string[] {
  const graph = layerGraph(tree);
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (node: string): void => {
    const at = path.indexOf(node);
    if (at !== -1) {
      cycles.push([...path.slice(at), node].join(" -> "));
      return;
    }
    if (done.has(node)) return;
    path.push(node);
    for (const next of graph.get(node) ?? []) visit(next);
    path.pop();
    done.add(node);
  };
  for (const node of [...graph.keys()].sort()) visit(node);
  return cycles;
}

/** Each cycle of runtime imports between files, as `a.ts -> b.ts -> a.ts`; one per cycle. */
function fileCycles(tree: Tree): string[] {
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string): void => {
    const at = path.indexOf(file);
    if (at !== -1) {
      cycles.push([...path.slice(at), file].join(" -> "));
      return;
    }
    if (done.has(file) || !tree.has(file)) return;
    path.push(file);
    for (const spec of runtimeSpecifiers(tree.get(file)!)) visit(resolve(file, spec));
    path.pop();
    done.add(file);
  };
  for (const file of [...tree.keys()].sort()) visit(file);
  return cycles;
}

describe("import helpers", () => {
  it("reads relative imports and re-exports, on one line or many, and skips packages", () => {
    const source = [
      'import { a } from "./a.js";',
      'import type { B } from "../b.js";',
      "import {",
      "  c,",
      "  d,",
      '} from "./dir/c.js";',
      'export { e } from "./e.js";',
      "import { readFileSync } from 'node:fs';",
      'import fc from "fast-check";',
    ].join("\n");
    expect(specifiers(source)).toEqual(["./a.js", "../b.js", "./dir/c.js", "./e.js"]);
  });

  it("reads the imports of values, leaving out those of types only", () => {
    const source = [
      'import { a } from "./a.js";',
      'import type { B } from "./b.js";',
      'import { type C, d } from "./c.js";',
      'import { type E, type F } from "./e.js";',
      'export { g } from "./g.js";',
      'export type { H } from "./h.js";',
      'import * as i from "./i.js";',
      'import j from "./j.js";',
    ].join("\n");
    expect(runtimeSpecifiers(source)).toEqual(["./a.js", "./c.js", "./g.js", "./i.js", "./j.js"]);
  });

  it("finds a cycle of files through values, not through types", () => {
    const tree = new Map([
      ["http/core.ts", 'import { check } from "./after.js";'],
      ["http/after.ts", 'import type { Outcome } from "./pipeline.js";'],
      ["http/pipeline.ts", 'import { block } from "./after.js";\nimport { c } from "./core.js";'],
    ]);
    expect(fileCycles(tree)).toEqual([]);
    tree.set("http/after.ts", 'import { report } from "./core.js";');
    expect(fileCycles(tree)).toEqual(["http/after.ts -> http/core.ts -> http/after.ts"]);
  });

  it.each([
    ["algorithms/bucket-base.ts", "./bucket-ledger.js", "algorithms/bucket-ledger.ts"],
    ["algorithms/bucket-base.ts", "../wait.js", "wait.ts"],
    ["redis/lua/token-bucket.ts", "../script.js", "redis/script.ts"],
    ["registry.ts", "./registry/store.js", "registry/store.ts"],
  ])("%s imports %s: %s", (file, spec, want) => {
    expect(resolve(file, spec)).toBe(want);
  });

  it.each([
    ["wait.ts", "wait.ts"],
    ["algorithms/time.ts", "algorithms/"],
    ["redis/lua/common.ts", "redis/"],
  ])("the layer of %s is %s", (file, want) => {
    expect(layer(file)).toBe(want);
  });

  it.each([
    ["algorithms/a.ts", 'import { KeyedLimiter } from "../registry.js";', "registry.ts"],
    ["algorithms/a.ts", 'import type { S } from "../registry/store.js";', "registry/store.ts"],
    ["algorithms/a.ts", 'import { allOf } from "../composite.js";', "composite.ts"],
    ["algorithms/a.ts", 'import { h } from "../http/core.js";', "http/core.ts"],
    ["algorithms/a.ts", 'import { r } from "../redis/limiter.js";', "redis/limiter.ts"],
    ["algorithms/a.ts", 'import { c } from "../cli/run.js";', "cli/run.ts"],
    ["registry/a.ts", 'import { h } from "../http/core.js";', "http/core.ts"],
    ["registry/a.ts", 'import { r } from "../redis/limiter.js";', "redis/limiter.ts"],
    ["registry/a.ts", 'import { c } from "../cli/run.js";', "cli/run.ts"],
    ["store/a.ts", 'import { r } from "../redis/client.js";', "redis/client.ts"],
    ["store/a.ts", 'import { h } from "../http/core.js";', "http/core.ts"],
    ["registry/a.ts", 'import { s } from "../store/limiter.js";', "store/limiter.ts"],
  ])("flags %s importing %s", (file, source, target) => {
    expect(upwardImports(new Map([[file, source]]), FIXTURE)).toEqual([`${file} -> ${target}`]);
  });

  it("lets the algorithms import top-level helpers and each other", () => {
    const tree = new Map([
      ["algorithms/a.ts", 'import { x } from "../wait.js";\nimport { y } from "./b.js";'],
      ["registry/a.ts", 'import { z } from "../algorithms/a.js";'],
    ]);
    expect(upwardImports(tree, FIXTURE)).toEqual([]);
    expect(layerCycles(tree)).toEqual([]);
  });

  it("finds the cycle a top-level bucket ledger made with the algorithms", () => {
    const tree = new Map([
      ["reservation.ts", 'import { msToRefill } from "./algorithms/bucket-math.js";'],
      ["algorithms/bucket-math.ts", ""],
      ["algorithms/bucket-base.ts", 'import { BucketLedger } from "../reservation.js";'],
    ]);
    expect(upwardImports(tree, FIXTURE)).toEqual([]);
    expect(layerCycles(tree)).toEqual(["algorithms/ -> reservation.ts -> algorithms/"]);
  });

  it("finds a cycle through three layers", () => {
    const tree = new Map([
      ["a.ts", 'import { b } from "./b/x.js";'],
      ["b/x.ts", 'import { c } from "../c.js";'],
      ["c.ts", 'import { a } from "./a.js";'],
    ]);
    expect(layerCycles(tree)).toEqual(["a.ts -> b/ -> c.ts -> a.ts"]);
  });
});

describe("src/ layers", () => {
  const tree = readTree(SRC);

  it("reads the source tree and its imports", () => {
    const graph = layerGraph(tree);
    expect(tree.has("index.ts")).toBe(true);
    expect(tree.has("algorithms/bucket-ledger.ts")).toBe(true);
    expect(graph.get("index.ts")).toContain("algorithms/");
    expect(graph.get("algorithms/")?.size).toBeGreaterThan(0);
  });

  it("no layer imports one FORBIDDEN names for it", () => {
    expect(upwardImports(tree, FORBIDDEN)).toEqual([]);
  });

  it("no two layers import each other, even through others", () => {
    expect(layerCycles(tree)).toEqual([]);
  });

  it("no file imports a value from one that imports one from it, even through others", () => {
    // In http/ the option check and the block before the response lived with what runs
    // after it, which the pipeline and the option checks both imported, and it imported them.
    expect(fileCycles(tree)).toEqual([]);
  });
});

// The layout's own rules, in test/layers.json (scripts/layout-move.mjs reads the same file).
interface Layers {
  readonly rootFiles: readonly string[];
  readonly forbidden: readonly {
    readonly layer: string;
    readonly mayNotImport: readonly string[];
  }[];
}
const LAYERS = JSON.parse(
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), "layers.json"), "utf8"),
) as Layers;
/** Layers that may not be imported from a layer; a key or value ending in `/` is a directory. */
const FORBIDDEN: Forbidden = new Map(LAYERS.forbidden.map((r) => [r.layer, r.mayNotImport]));
/** The files allowed at the root of src/: the entry point. */
const ROOT_FILES: readonly string[] = LAYERS.rootFiles;

describe("src/ root", () => {
  it("holds the entry point only: every other file lives in the folder of its layer", () => {
    const loose = [...readTree(SRC).keys()].filter((f) => !f.includes("/"));
    expect(loose.filter((f) => !ROOT_FILES.includes(f))).toEqual([]);
  });

  it("has every folder named in test/layers.json, so its imports are checked", () => {
    const named = new Set(LAYERS.forbidden.flatMap((r) => [r.layer, ...r.mayNotImport]));
    const folders = new Set([...readTree(SRC).keys()].flatMap((f) => f.match(/^[^/]+\//) ?? []));
    expect(folders.size).toBeGreaterThan(5);
    expect([...folders].filter((d) => !named.has(d))).toEqual([]);
  });
});
