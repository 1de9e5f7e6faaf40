import { spawnSync } from "node:child_process";

/**
 * Bytes allocated per `allow` on one existing key of `new KeyedLimiter(<policy>)`, measured
 * in a fresh Node process (`--expose-gc`), as bench/registry.bench.ts measures: the least
 * heap growth per call over rounds of 10,000 calls after 20 warm-up rounds. A fresh
 * process, because the optimizing compiler's choices in the test process depend on what
 * earlier tests ran (the shared call sites' feedback), which made the figure flaky there.
 * `policy` is source text for a limiter over `clock`, an integer clock (a small integer is
 * not allocated, so only the registry counts); `FixedWindow` and `SlidingWindowCounter`
 * are in scope.
 */
export function bytesPerAllow(policy: string): number {
  const source = `
    import { KeyedLimiter } from "./src/registry.ts";
    import { FixedWindow } from "./src/algorithms/fixed-window.ts";
    import { SlidingWindowCounter } from "./src/algorithms/sliding-window-counter.ts";
    let tick = 0;
    const clock = () => tick++;
    const keyed = new KeyedLimiter(${policy}, { maxKeys: 16, sweepIntervalMs: Infinity });
    const loop = (n) => {
      let k = 0;
      for (let i = 0; i < n; i++) if (keyed.allow("10.0.0.1")) k++;
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
  const child = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "--input-type=module", "-e", source],
    { cwd: new URL("../..", import.meta.url), encoding: "utf8", timeout: 30_000 },
  );
  if (child.status !== 0) throw new Error(`the measuring process failed: ${child.stderr}`);
  return Number(child.stdout.trim());
}
