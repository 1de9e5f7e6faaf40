import { bytesPerCall } from "../support/bytes-per-call.js";

/**
 * Bytes allocated per `allow` on one existing key of `new KeyedLimiter(<policy>)`, measured
 * in a fresh Node process as bench/registry.bench.ts measures (see `bytesPerCall`).
 * `policy` is source text for a limiter over `clock`, an integer clock (a small integer is
 * not allocated, so only the registry counts); the five algorithms and `allOf`
 * are in scope. `expression` is the call measured (`kept` holds a value that must escape).
 */
export function bytesPerAllow(
  policy: string,
  expression = 'keyed.allow("10.0.0.1")',
  noScavenge = false,
): number {
  return bytesPerCall(
    `
    import { KeyedLimiter } from "./src/keyed/keyed-limiter.ts";
    import { FixedWindow } from "./src/algorithms/fixed-window.ts";
    import { SlidingWindowCounter } from "./src/algorithms/sliding-window-counter.ts";
    import { SlidingWindowLog } from "./src/algorithms/sliding-window-log.ts";
    import { TokenBucket } from "./src/algorithms/token-bucket.ts";
    import { LeakyBucket } from "./src/algorithms/leaky-bucket.ts";
    import { allOf } from "./src/composite/all-of.ts";`,
    `const keyed = new KeyedLimiter(${policy}, { maxKeys: 16, sweepIntervalMs: Infinity });
    let kept;`,
    expression,
    noScavenge,
  );
}
