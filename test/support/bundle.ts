import { join } from "node:path";
import { buildSync } from "esbuild";
import { repoRoot } from "./access-log.js";

/**
 * Bundles TypeScript from the repository into the text of one ES module that plain `node`
 * runs, for tests that need a fresh process. `node --import tsx` compiled every imported
 * file at each start (about a second, several under load: enough to trip vitest's 5 s
 * per-test timeout with two or three spawns); esbuild bundles them once, in tens of
 * milliseconds, much as tsup builds `dist/` for users. Packages from node_modules stay
 * imports: run the text with the repository as the working directory (`node -e`), or
 * write it under the repository.
 *
 * `source` is module text whose relative imports start at the repository root
 * (`import { allOf } from "./src/composite/all-of.ts";`), or `{ entry }`, a path from the root.
 */
export function bundle(source: string | { readonly entry: string }): string {
  const result = buildSync({
    ...(typeof source === "string"
      ? { stdin: { contents: source, resolveDir: repoRoot, loader: "ts" as const } }
      : { entryPoints: [join(repoRoot, source.entry)] }),
    absWorkingDir: repoRoot,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0]!.text;
}
