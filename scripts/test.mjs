// `npm test`: every check, each run to its end and reported, the exit status failing if any
// failed. vitest starts at once and streams its results; beside it, one step at a time,
// lint, the type check (which also checks test/**/*.test-d.ts), the package check (which
// builds dist/ through npm pack), the API reports of that build (etc/*.api.md: a surface
// that changed without its report fails), the smoke tests and the examples. Their
// output is held and printed in one block as each ends, so it never cuts into vitest's
// lines. A summary of every step, with its time, comes last.
//
// Steps (each also an npm script of its own): vitest | lint, typecheck, pack:check,
// api:check, smoke, examples. `node scripts/test.mjs --only typecheck,lint` runs some of them.
import { spawn } from "node:child_process";

const WINDOWS = process.platform === "win32";
const started = performance.now();
const only = process.argv
  .find((a) => a.startsWith("--only"))
  ?.split("=")[1]
  ?.split(",");
const wanted = (name) => only === undefined || only.includes(name);
const seconds = (ms) => `${(ms / 1000).toFixed(0)} s`;

/** Runs `npm run <script>`; resolves with its status, time and (unless streamed) output. */
function npmRun(script, stream) {
  return new Promise((resolve) => {
    const t = performance.now();
    const child = spawn("npm", ["run", "--silent", script], {
      stdio: stream ? "inherit" : ["ignore", "pipe", "pipe"],
      shell: WINDOWS,
      env: { ...process.env, FORCE_COLOR: stream ? process.env.FORCE_COLOR : "0" },
    });
    let output = "";
    child.stdout?.on("data", (b) => (output += b));
    child.stderr?.on("data", (b) => (output += b));
    child.on("error", (error) => {
      output += String(error);
    });
    child.on("close", (code, signal) =>
      resolve({ script, ok: code === 0, code: code ?? signal, ms: performance.now() - t, output }),
    );
  });
}

const results = [];

/** Prints a finished background step as one block. */
function report(r) {
  const head = `── ${r.script}: ${r.ok ? "ok" : `FAILED (exit ${r.code})`} in ${seconds(r.ms)}`;
  const body = r.output.trimEnd();
  process.stdout.write(`\n${head}\n${body === "" ? "" : `${body}\n`}\n`);
}

const background = ["lint", "typecheck", "pack:check", "api:check", "smoke", "examples"].filter(
  wanted,
);
if (wanted("vitest")) {
  console.log(
    `npm test: vitest now; ${background.join(", ")} one after another beside it (their output as each ends)\n`,
  );
}

const side = (async () => {
  for (const script of background) {
    const r = await npmRun(script, false);
    results.push(r);
    report(r);
  }
})();
const front = wanted("vitest") ? npmRun("vitest", true).then((r) => results.push(r)) : undefined;
await Promise.all([side, front]);

const order = ["vitest", ...background];
results.sort((a, b) => order.indexOf(a.script) - order.indexOf(b.script));
const failed = results.filter((r) => !r.ok);
const width = Math.max(...order.map((s) => s.length));
console.log(
  `\nnpm test: ${failed.length === 0 ? "all passed" : `${failed.length} failed`} in ${seconds(performance.now() - started)}`,
);
for (const r of results) {
  console.log(
    `  ${r.script.padEnd(width)}  ${r.ok ? "ok    " : "FAILED"}  ${seconds(r.ms).padStart(5)}`,
  );
}
process.exit(failed.length === 0 ? 0 : 1);
