import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * Where tollgate's package.json may be, relative to this module: the built bin is one
 * bundled file, `dist/cli.js`, so the package root is `..`; from source this module is
 * `src/cli/version.ts`, so the root is `../..`. The bundled location comes first: from
 * `node_modules/tollgate/dist/cli.js`, `../..` is `node_modules/`, whose parent project
 * may have a package.json of its own (the name check below refuses it anyway).
 */
export const PACKAGE_JSON_CANDIDATES: readonly URL[] = [
  new URL("../package.json", import.meta.url),
  new URL("../../package.json", import.meta.url),
];

/**
 * The version of the tollgate package, read from the first of `candidates` that is a
 * readable JSON file with `"name": "tollgate"` and a string `version`. Read on demand
 * (only `--version` needs it), so a missing package.json never stops a replay.
 * @param candidates file URLs of package.json files to try, in order.
 * @throws {Error} When no candidate is tollgate's package.json (a broken install or
 *   build: the bin reports it as an unexpected error, exit 1), naming the paths tried.
 */
export function packageVersion(candidates: readonly URL[] = PACKAGE_JSON_CANDIDATES): string {
  for (const url of candidates) {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(url, "utf8"));
    } catch {
      continue; // absent, unreadable or not JSON: try the next place
    }
    const { name, version } = (json ?? {}) as { name?: unknown; version?: unknown };
    if (name === "tollgate" && typeof version === "string" && version !== "") return version;
  }
  throw new Error(
    `cannot find tollgate's package.json (tried ${candidates.map((url) => fileURLToPath(url)).join(", ")})`,
  );
}
