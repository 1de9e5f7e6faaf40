/**
 * The `tollgate` bin: `tollgate replay <file|-> --algorithm <name> …` (see `--help`). Runs from
 * source with `node --import tsx src/cli/index.ts`; the package's bin is the built `dist/cli.js`.
 */
import { run } from "./run.js";

// A reader that stops early (`| head`) closes the pipe: not an error of the replay.
// run() sees the failed write too and returns 0; this listener keeps the stream's own
// 'error' event from crashing the process.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") process.exitCode = 1;
});

run(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tollgate: ${String(error)}\n`);
    process.exitCode = 1;
  },
);
