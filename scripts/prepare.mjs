// npm's `prepare` hook: builds dist/ so that `npm ci` in a clone and a git dependency
// (npm installs its devDependencies, then runs `prepare`) give a working package.
// Under `npm pack` and `npm publish` the `prepack` hook has just built it: not twice.
// The build's own output is shown only when it fails, so `npm ci --silent` stays silent.
import { spawnSync } from "node:child_process";

const command = process.env.npm_command;
if (command === "pack" || command === "publish") {
  console.log(`prepare: dist/ was built by prepack (npm ${command})`);
} else {
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm ? [process.execPath, [npm, "run", "build"]] : ["npm", ["run", "build"]];
  const r = spawnSync(cmd, args, {
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    shell: !npm && process.platform === "win32",
  });
  if (r.status !== 0) {
    process.stdout.write(r.stdout ?? "");
    process.stderr.write(r.stderr ?? "");
    if (r.error !== undefined) console.error(`prepare: ${r.error.message}`);
  }
  process.exit(r.status ?? 1);
}
