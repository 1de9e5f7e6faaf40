// The README's code blocks, run as a reader runs them: pasted into files of a project that
// installed the packed tarball (pack-check makes it), with the packages they import
// installed there at the versions this repository pins. Each TypeScript block is
// type-checked strictly against the installed types, then run with tsx: it must exit 0,
// write nothing to stderr and print what its `//=>` comments say (outputMismatch in
// readme-blocks.mjs). Each shell block runs in the project, or in the clone when the comment
// before it says "in the clone"; a block followed by an output block must print exactly it.
// A block that is not run says why (`<!-- not run: ... -->`, see readme-blocks.mjs). The blocks of docs/*.md marked
// `<!-- run -->` are run the same way, each in a file of its own.
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startRedis } from "./private-redis.mjs";
import {
  docBlocks,
  importedPackages,
  outputMismatch,
  RUN_LANGS,
  readmeBlocks,
} from "./readme-blocks.mjs";

const WINDOWS = process.platform === "win32";

/** Runs a command; resolves with its exit code and output (never rejects). */
function exec(cmd, argv, options) {
  return new Promise((resolve) => {
    // Its own process group, so the hang guard ends what it started too (tsx runs the
    // block in a child process, which a kill of tsx alone left running, holding the pipes).
    const child = spawn(cmd, argv, { shell: WINDOWS, detached: !WINDOWS, ...options });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b) => (stdout += b));
    child.stderr.on("data", (b) => (stderr += b));
    child.on("error", (error) => resolve({ code: -1, stdout, stderr: stderr + String(error) }));
    // A hang guard only: every block ends by itself in about a second.
    const timer = setTimeout(() => {
      if (WINDOWS) child.kill("SIGKILL");
      else process.kill(-child.pid, "SIGKILL");
    }, 120_000);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
}

/**
 * Runs the README's blocks in `app` (a project where tollgate is installed); `root` is the
 * repository. Resolves with a one-line summary; rejects naming every block that failed.
 */
export async function checkReadme(root, app) {
  const blocks = readmeBlocks(readFileSync(join(root, "README.md"), "utf8")).map((b) => ({
    ...b,
    file: "README.md",
  }));
  const code = blocks.filter((b) => RUN_LANGS.has(b.lang));
  const docs = readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .flatMap((name) =>
      docBlocks(readFileSync(join(root, "docs", name), "utf8"))
        .filter((b) => b.mark === "run")
        .map((b) => ({ ...b, file: `docs/${name}`, skip: undefined })),
    );
  const runs = [...code.filter((b) => b.skip === undefined), ...docs];
  const ts = runs.filter((b) => b.lang !== "sh" && b.lang !== "bash");
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const versions = pkg.devDependencies;

  // The packages the blocks import, at this repository's versions, and their types.
  const wanted = new Set(ts.flatMap((b) => importedPackages(b.code)));
  for (const name of [...wanted]) {
    if (versions[`@types/${name}`] !== undefined) wanted.add(`@types/${name}`);
  }
  wanted.add("@types/node");
  const specs = [...wanted].map((name) => {
    if (versions[name] === undefined)
      throw new Error(`README imports ${name}, not a devDependency`);
    return `${name}@${versions[name]}`;
  });
  const install = await exec(
    "npm",
    ["install", "--no-audit", "--no-fund", "--prefer-offline", "--no-save", ...specs],
    { cwd: app },
  );
  if (install.code !== 0) throw new Error(`npm install ${specs.join(" ")}:\n${install.stderr}`);

  const dir = join(app, "readme");
  mkdirSync(join(app, "examples", "data"), { recursive: true });
  copyFileSync(
    join(root, "examples", "data", "access-excerpt.log"),
    join(app, "examples", "data", "access-excerpt.log"),
  );
  mkdirSync(dir, { recursive: true });
  const files = ts.map((b) => {
    const file = join(dir, `${b.file.replace(/[/.]/g, "-")}-line-${b.line}.mts`);
    writeFileSync(file, `${b.code}\n`);
    return { block: b, file };
  });

  const failures = [];
  const tsc = await exec(
    process.execPath,
    [
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
      "--types",
      "node",
      ...files.map((f) => f.file),
    ],
    { cwd: app },
  );
  if (tsc.code !== 0) failures.push(`type check:\n${tsc.stdout}${tsc.stderr}`);

  const redis = await startRedis();
  try {
    const tsx = join(root, "node_modules", "tsx", "dist", "cli.mjs");
    const env = { ...process.env, NO_COLOR: "1" };
    for (const { block, file } of files) {
      const needsRedis = importedPackages(block.code).includes("ioredis");
      if (needsRedis && process.env.REDIS_URL === undefined) {
        if (process.env.CI === "true") failures.push(`${block.file}:${block.line}: no Redis in CI`);
        continue; // no Redis here: said in the summary
      }
      const r = await exec(process.execPath, [tsx, file], { cwd: app, env });
      const wrong = r.code === 0 ? outputMismatch(block.code, r.stdout) : undefined;
      if (r.code !== 0 || r.stderr !== "") {
        failures.push(`${block.file}:${block.line}: exit ${r.code}\n${r.stdout}${r.stderr}`);
      } else if (wrong !== undefined) {
        failures.push(`${block.file}:${block.line}: not what its //=> comments say: ${wrong}`);
      }
    }
    for (const block of runs.filter(
      (b) => b.file === "README.md" && (b.lang === "sh" || b.lang === "bash"),
    )) {
      // A command for the clone (its built bin, `node dist/cli.js`, its sample log) runs in
      // the repository, where pack-check's build left dist/; any other in the project.
      const inClone = /^<!-- [^>]*\bin the clone\b/.test(
        readFileSync(join(root, "README.md"), "utf8").split("\n")[block.line - 2] ?? "",
      );
      const r = await exec("sh", ["-c", block.code], { cwd: inClone ? root : app, env });
      const output = blocks.find((b) => b.line > block.line && b.lang === "");
      const trimmed = (text) =>
        text
          .trimEnd()
          .split("\n")
          .map((l) => l.trimEnd());
      const shown =
        output !== undefined && blocks.indexOf(output) === blocks.indexOf(block) + 1
          ? trimmed(output.code)
          : undefined;
      const printed = trimmed(r.stdout);
      const differs = shown !== undefined && printed.join("\n") !== shown.join("\n");
      if (r.code !== 0 || differs) {
        failures.push(
          `README.md:${block.line}: exit ${r.code}${differs ? `, not the output the README shows:\n${shown.join("\n")}\nbut` : ""}\n${r.stdout}${r.stderr}`,
        );
      }
    }
  } finally {
    redis?.kill();
  }
  if (failures.length > 0) throw new Error(failures.join("\n\n"));
  const skipped = code.length - runs.length;
  const noRedis = process.env.REDIS_URL === undefined && redis === undefined;
  return `${runs.length} blocks type-checked and run (${docs.length} of docs/), ${skipped} of the README not run as they say${noRedis ? "; the Redis blocks skipped: no redis-server" : ""}`;
}
