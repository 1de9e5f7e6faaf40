import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import { decisionAttributes } from "../../src/index.js";
import { manualClock } from "../support/manual-clock.js";

describe("decisionAttributes", () => {
  const clock = manualClock();
  const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });

  test.each([
    {
      name: "allowed: the three always there, and the reset",
      decision: { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000 },
      options: { policy: "api", cost: 1 },
      expected: {
        "ratelimit.allowed": true,
        "ratelimit.limit": 2,
        "ratelimit.remaining": 1,
        "ratelimit.reset_after_ms": 1000,
        "ratelimit.policy": "api",
        "ratelimit.cost": 1,
      },
    },
    {
      name: "denied, can pass later: retry_after_ms",
      decision: { allowed: false, limit: 2, remaining: 0, retryAfterMs: 400, resetAfterMs: 1400 },
      options: undefined,
      expected: {
        "ratelimit.allowed": false,
        "ratelimit.limit": 2,
        "ratelimit.remaining": 0,
        "ratelimit.retry_after_ms": 400,
        "ratelimit.reset_after_ms": 1400,
      },
    },
    {
      name: "denied for good: never, and no infinite numbers",
      decision: {
        allowed: false,
        limit: 1,
        remaining: 0,
        retryAfterMs: Number.POSITIVE_INFINITY,
        resetAfterMs: Number.POSITIVE_INFINITY,
      },
      options: { key: "user:7" },
      expected: {
        "ratelimit.allowed": false,
        "ratelimit.limit": 1,
        "ratelimit.remaining": 0,
        "ratelimit.never": true,
        "ratelimit.key": "user:7",
      },
    },
    {
      name: "a store limiter's source",
      decision: {
        allowed: true,
        limit: 5,
        remaining: 4,
        retryAfterMs: 0,
        resetAfterMs: 200,
        source: "local",
      } as Decision,
      options: {},
      expected: {
        "ratelimit.allowed": true,
        "ratelimit.limit": 5,
        "ratelimit.remaining": 4,
        "ratelimit.reset_after_ms": 200,
        "ratelimit.source": "local",
      },
    },
  ])("$name", ({ decision, options, expected }) => {
    expect(decisionAttributes(decision, options)).toStrictEqual(expected);
  });

  test("a real limiter's decision, and every value is a string, number or boolean", () => {
    const attributes = decisionAttributes(bucket.consume(), { policy: "p" });
    expect(attributes).toMatchObject({ "ratelimit.allowed": true, "ratelimit.remaining": 1 });
    for (const value of Object.values(attributes)) {
      expect(["string", "number", "boolean"]).toContain(typeof value);
      if (typeof value === "number") expect(Number.isFinite(value)).toBe(true);
    }
  });

  test.each([
    {
      name: "no decision",
      call: () => decisionAttributes(undefined as unknown as Decision),
      error: new TypeError(
        "decisionAttributes: decision must be a Decision (an object with a boolean allowed), got undefined",
      ),
    },
    {
      name: "an unknown option",
      call: () => decisionAttributes(bucket.peek(), { name: "x" } as never),
      error: TypeError,
    },
    {
      name: "cost NaN",
      call: () => decisionAttributes(bucket.peek(), { cost: Number.NaN }),
      error: new RangeError("decisionAttributes: cost must be a finite number >= 0, got NaN"),
    },
    {
      name: "key a number",
      call: () => decisionAttributes(bucket.peek(), { key: 7 as never }),
      error: new TypeError("decisionAttributes: key must be a string, got 7"),
    },
  ])("rejects $name", ({ call, error }) => {
    expect(call).toThrow(error as Error);
  });
});
