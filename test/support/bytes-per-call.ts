import { spawnSync } from "node:child_process";
import { repoRoot } from "./access-log.js";
import { bundle } from "./bundle.js";

/**
 * Bytes allocated per `<expression>` call, measured in a fresh Node process
 * (`--expose-gc`), as bench/registry.bench.ts measures: the least heap growth per call
 * over rounds of 10,000 calls after 20 warm-up rounds. A fresh process, because the
 * optimizing compiler's choices in the test process depend on what earlier tests ran (the
 * shared call sites' feedback), which made the figure flaky there.
 *
 * `imports` is module source text with paths from the repository's root
 * (`import { allOf } from "./src/composite/all-of.ts";`); `setup` runs once with `clock` in scope,
 * an integer clock (a small integer is not allocated, so only the code measured counts);
 * `expression` is the call, true when allowed. `noScavenge` is for the control that shows
 * the measure can fail (see below).
 * @throws {Error} If the process fails, or a call is denied.
 */
export function bytesPerCall(
  imports: string,
  setup: string,
  expression: string,
  noScavenge = false,
): number {
  const source = `
    ${imports}
    let tick = 0;
    const clock = () => tick++;
    ${setup}
    const loop = (n) => {
      let k = 0;
      for (let i = 0; i < n; i++) if (${expression}) k++;
      return k;
    };
    let sink = 0;
    for (let round = 0; round < 20; round++) sink += loop(10_000);
    let least = Infinity;
    for (let round = 0; round < 20 && least >= 1; round++) {
      globalThis.gc();
      const before = process.memoryUsage().heapUsed;
      sink += loop(10_000);
      const bytes = (process.memoryUsage().heapUsed - before) / 10_000;
      if (bytes < least) least = bytes;
    }
    if (sink % 10_000 !== 0) throw new Error("a call was denied");
    console.log(least);
  `;
  // Bundled first (see bundle.ts): a process that starts in tens of milliseconds, not seconds.
  // The program goes in on standard input: a bundle is longer than one argument may be.
  // For a control that must see allocation, a young generation large enough that no
  // scavenge runs inside a round of 10,000 calls (one lowers the heap's growth below what
  // the round allocated, and the least round is reported).
  const flags = ["--expose-gc", "--input-type=module"];
  if (noScavenge) flags.push("--min-semi-space-size=64");
  const child = spawnSync(process.execPath, flags, {
    cwd: repoRoot,
    encoding: "utf8",
    input: bundle(source),
    // The timeout only stops a child that hangs (a spawnSync cannot be interrupted otherwise).
    timeout: 60_000,
  });
  if (child.status !== 0) throw new Error(`the measuring process failed: ${child.stderr}`);
  return Number(child.stdout.trim());
}
