// npm's `prepare` hook: builds dist/ so that `npm ci` in a clone and a git dependency
// (npm installs its devDependencies, then runs `prepare`) give a working package.
// Under `npm pack` and `npm publish` the `prepack` hook has just built it: not twice.
import { spawnSync } from "node:child_process";

const command = process.env.npm_command;
if (command === "pack" || command === "publish") {
  console.log(`prepare: dist/ was built by prepack (npm ${command})`);
} else {
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm ? [process.execPath, [npm, "run", "build"]] : ["npm", ["run", "build"]];
  const r = spawnSync(cmd, args, { stdio: "inherit", shell: !npm && process.platform === "win32" });
  process.exit(r.status ?? 1);
}
