// `npm run smoke`: the built package imported as ESM and CommonJS under Node, and as
// ESM under Bun and Deno (npm packages `bun` and `deno`, pinned in devDependencies) and
// workerd (a Worker and a Durable Object through `miniflare`, workerd.mjs);
// the fetch wrapper in real Bun.serve / Deno.serve servers; the bin's --help.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const bin = (name) => join(here, "..", "..", "node_modules", ".bin", name);
const runs = [
  ["node", [join(here, "esm.mjs")]],
  ["node", [join(here, "cjs.cjs")]],
  // A limiter of one build given to the other's middleware (Node only: createRequire).
  ["node", [join(here, "dual-package.mjs")]],
  [bin("bun"), [join(here, "esm.mjs")]],
  [bin("deno"), ["run", "--allow-read", "--allow-env", join(here, "esm.mjs")]],
  // tollgate/http's fetch wrapper behind real Bun.serve and Deno.serve servers.
  [bin("bun"), [join(here, "..", "http-runtimes.mjs")]],
  [bin("deno"), ["run", "--allow-net", "--allow-read", join(here, "..", "http-runtimes.mjs")]],
  [bin("bun"), [join(here, "..", "..", "examples", "fetch-handler.ts")]],
  [
    bin("deno"),
    [
      "run",
      "--allow-net",
      "--allow-read",
      "--allow-env",
      join(here, "..", "..", "examples", "fetch-handler.ts"),
    ],
  ],
  // A Worker and a Durable Object on workerd, at an old and a current compatibility date.
  ["node", [join(here, "workerd.mjs")]],
  // The bin, as npm links it.
  ["node", [join(here, "..", "..", "dist", "cli.js"), "--help"]],
];
let failed = 0;
for (const [cmd, args] of runs) {
  const r = spawnSync(cmd, args, { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
  const label = `${cmd.split("/").pop()} ${args.at(-1).split("/").pop()}`;
  if (r.status === 0) {
    console.log(`${label}: ${r.stdout.trim().split("\n")[0]}`);
  } else {
    failed++;
    console.error(`${label}: FAILED (exit ${r.status})\n${r.stdout}${r.stderr}${r.error ?? ""}`);
  }
}
if (failed > 0) process.exit(1);
