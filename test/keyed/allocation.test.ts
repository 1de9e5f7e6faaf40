import { describe, expect, test } from "vitest";
import { bytesPerAllow } from "./bytes-per-call.js";

// Measured in a fresh process (see bytes-per-call.ts); a consume whose Decision is kept
// shows the Decision's bytes there, so the measure can fail (checked last).
describe.each([
  ["TokenBucket", "new TokenBucket({ capacity: 1e12, refillPerSecond: 1, clock })"],
  ["LeakyBucket", "new LeakyBucket({ capacity: 1e12, leakPerSecond: 1, clock })"],
  ["SlidingWindowLog", "new SlidingWindowLog({ limit: 1e12, windowMs: 1e9, clock })"],
  [
    "allOf(TokenBucket, FixedWindow)",
    "allOf(new TokenBucket({ capacity: 1e12, refillPerSecond: 1, clock }), new FixedWindow({ limit: 1e12, windowMs: 1e9, clock }))",
  ],
])("KeyedLimiter(%s) on the slab", (_name, policy) => {
  test("allow on an existing key allocates nothing", () => {
    expect(bytesPerAllow(policy), "bytes per call").toBeLessThan(1);
  });
});

test("a kept consume decision allocates: the measure can fail", () => {
  const policy = "new TokenBucket({ capacity: 1e12, refillPerSecond: 1, clock })";
  const kept = '(kept = keyed.consume("10.0.0.1")).allowed';
  expect(bytesPerAllow(policy, kept, true)).toBeGreaterThan(16);
});
