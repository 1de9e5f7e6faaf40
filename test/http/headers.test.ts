import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { allOf } from "../../src/composite/all-of.js";
import type { Decision } from "../../src/core/limiter.js";
import {
  ceilSeconds,
  HeaderText,
  limiterWindowMs,
  MAX_SF_INTEGER,
  policyWindowSeconds,
  QUOTA_EXCEEDED_TYPE,
  QuotaExceededJson,
  quotaExceededProblem,
  rateLimitHeaders,
  refusalStatus,
  resetEpochSeconds,
  retryAfterSeconds,
  sfString,
  wholeText,
  windowSecondsOf,
} from "../../src/http/headers.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { RedisFixedWindow, type RedisLike, RedisSlidingWindowLog } from "../../src/redis/index.js";

const denied = (retryAfterMs: number, resetAfterMs = 60_000, remaining = 0): Decision => ({
  allowed: false,
  limit: 10,
  remaining,
  retryAfterMs,
  resetAfterMs,
});
const allowed = (remaining: number, resetAfterMs: number, limit = 10): Decision => ({
  allowed: true,
  limit,
  remaining,
  retryAfterMs: 0,
  resetAfterMs,
});

/** A wall-clock reading: 2026-01-01T00:00:00.250Z, in ms since the Unix epoch. */
const NOW_MS = 1_767_225_600_250;
/** `NOW_MS` in whole seconds, rounded down. */
const NOW_FLOOR_S = 1_767_225_600;
const wallClock = () => NOW_MS;
/**
 * The `X-RateLimit-*` fields of a refusal that can pass in `ms` (limit 10, none left), read
 * at `NOW_MS`: GitHub-style clients read nothing else.
 */
const refusal = (ms: number) => ({
  "X-RateLimit-Limit": "10",
  "X-RateLimit-Remaining": "0",
  "X-RateLimit-Reset": String(Math.floor((NOW_MS + ms) / 1000)),
});

describe("rateLimitHeaders", () => {
  // decision, options, expected headers (exactly: nothing more, nothing less)
  const steps: Array<[string, Decision, Parameters<typeof rateLimitHeaders>[1], object]> = [
    [
      "float noise never adds a second: 1000.0000000000031 ms -> 1",
      denied(1000.0000000000031, 1000.0000000000031),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=1',
        ...refusal(1000.0000000000031),
        "Retry-After": "1",
      },
    ],
    [
      "300 ms rounds up to 1",
      denied(300),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=1',
        ...refusal(300),
        "Retry-After": "1",
      },
    ],
    [
      "59995 ms rounds up to 60",
      denied(59995),
      { policy: "default", windowSeconds: 60 },
      {
        "RateLimit-Policy": '"default";q=10;w=60',
        RateLimit: '"default";r=0;t=60',
        ...refusal(59995),
        "Retry-After": "60",
      },
    ],
    [
      "exactly 5 s is 5, not 6",
      denied(5000),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=5',
        ...refusal(5000),
        "Retry-After": "5",
      },
    ],
    [
      "4999.999999999 ms (float short of 5 s) is 5",
      denied(4999.999999999),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=5',
        ...refusal(4999.999999999),
        "Retry-After": "5",
      },
    ],
    [
      "5001 ms is 6 (never early)",
      denied(5001),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=6',
        ...refusal(5001),
        "Retry-After": "6",
      },
    ],
    [
      "a denial with retryAfterMs 0 still says at least 1",
      denied(0),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=1',
        ...refusal(0),
        "Retry-After": "1",
      },
    ],
    [
      "Infinity: no Retry-After; t is the finite reset",
      denied(Number.POSITIVE_INFINITY, 30_000, 10),
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=10', RateLimit: '"default";r=10;t=30' },
    ],
    [
      "Infinity with a quota that never refills: no Retry-After, no t",
      denied(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY),
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=10', RateLimit: '"default";r=0' },
    ],
    [
      "allowed: t is the time to the fresh state, rounded up",
      allowed(7, 2500),
      { policy: "burst", windowSeconds: 10 },
      { "RateLimit-Policy": '"burst";q=10;w=10', RateLimit: '"burst";r=7;t=3' },
    ],
    [
      "allowed and fresh: t=0",
      allowed(10, 0),
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=10', RateLimit: '"default";r=10;t=0' },
    ],
    [
      "allowed, never refills: no t",
      allowed(3, Number.POSITIVE_INFINITY),
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=10', RateLimit: '"default";r=3' },
    ],
    [
      "legacy adds X-RateLimit-* with the reset as a Unix time (t seconds from now, rounded up)",
      denied(4200),
      { policy: "default", legacy: true, wallClock },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=5',
        "X-RateLimit-Limit": "10",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(NOW_FLOOR_S + 4),
        "Retry-After": "5",
      },
    ],
    [
      "legacy only (draft: false)",
      allowed(4, 6000),
      { policy: "default", legacy: true, draft: false, wallClock },
      {
        "X-RateLimit-Limit": "10",
        "X-RateLimit-Remaining": "4",
        "X-RateLimit-Reset": String(NOW_FLOOR_S + 6),
      },
    ],
    [
      "legacy without a reset when it never comes",
      allowed(4, Number.POSITIVE_INFINITY),
      { policy: "default", legacy: true, draft: false },
      { "X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "4" },
    ],
    [
      "none: only Retry-After on a denial",
      denied(1500),
      { policy: "default", draft: false },
      { "Retry-After": "2" },
    ],
    [
      "a negative remaining (a custom limiter in debt) reads 0",
      { allowed: true, limit: 10, remaining: -3, retryAfterMs: 0, resetAfterMs: 0 },
      { policy: "default", legacy: true, wallClock },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=0',
        "X-RateLimit-Limit": "10",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(NOW_FLOOR_S),
      },
    ],
    [
      "remaining above limit from a custom limiter is clamped to the limit (r=50 of q=5 sent as r=5)",
      { allowed: true, limit: 5, remaining: 50, retryAfterMs: 0, resetAfterMs: 1000 },
      { policy: "default", legacy: true, wallClock },
      {
        "RateLimit-Policy": '"default";q=5',
        RateLimit: '"default";r=5;t=1',
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "5",
        "X-RateLimit-Reset": String(NOW_FLOOR_S + 1),
      },
    ],
    [
      "limit and remaining Infinity are capped at the largest SF Integer, as documented (were a RangeError)",
      {
        allowed: true,
        limit: Number.POSITIVE_INFINITY,
        remaining: Number.POSITIVE_INFINITY,
        retryAfterMs: 0,
        resetAfterMs: 0,
      },
      { policy: "default" },
      {
        "RateLimit-Policy": `"default";q=${MAX_SF_INTEGER}`,
        RateLimit: `"default";r=${MAX_SF_INTEGER};t=0`,
      },
    ],
    [
      "a negative retryAfterMs on an allowed decision is not read",
      { allowed: true, limit: 5, remaining: 4, retryAfterMs: -100, resetAfterMs: 1000 },
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=5', RateLimit: '"default";r=4;t=1' },
    ],
    [
      "retryAfterMs 0 on a denial still says Retry-After: 1",
      denied(0, 0),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: '"default";r=0;t=1',
        ...refusal(0),
        "Retry-After": "1",
      },
    ],
    [
      "fractional limit is floored to an Integer (capacity 2.5 -> q=2)",
      allowed(1, 1000, 2.5),
      { policy: "default" },
      { "RateLimit-Policy": '"default";q=2', RateLimit: '"default";r=1;t=1' },
    ],
    [
      "huge numbers are capped at the largest Structured Field Integer, never 1e+21",
      denied(1e25, 1e25, 0),
      { policy: "default" },
      {
        "RateLimit-Policy": '"default";q=10',
        RateLimit: `"default";r=0;t=${MAX_SF_INTEGER}`,
        "X-RateLimit-Limit": "10",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(MAX_SF_INTEGER),
        "Retry-After": String(MAX_SF_INTEGER),
      },
    ],
    [
      "policy names are Structured Field Strings: quotes and backslashes escaped",
      allowed(1, 1000, 1e18),
      { policy: 'a "b" \\c' },
      {
        "RateLimit-Policy": `"a \\"b\\" \\\\c";q=${MAX_SF_INTEGER}`,
        RateLimit: '"a \\"b\\" \\\\c";r=1;t=1',
      },
    ],
  ];
  test.each(steps)("%s", (_name, decision, options, expected) => {
    expect(rateLimitHeaders(decision, { wallClock, ...options })).toStrictEqual(expected);
  });

  test("Retry-After is never earlier than t on a denial (draft-10 section 6)", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e9, noNaN: true }), (ms) => {
        const headers = rateLimitHeaders(denied(ms, ms * 2), { policy: "p" });
        const t = Number(/;t=(\d+)/.exec(headers["RateLimit"]!)![1]);
        return Number(headers["Retry-After"]) >= t;
      }),
    );
  });

  const bad: Array<{ name: string; decision: unknown; options: unknown; error: Error }> = [
    {
      name: "options missing",
      decision: allowed(1, 0),
      options: undefined,
      error: new TypeError("rateLimitHeaders: options must be an object, got undefined"),
    },
    {
      name: "policy missing",
      decision: allowed(1, 0),
      options: {},
      error: new TypeError(
        "rateLimitHeaders: policy must be a non-empty string of printable ASCII (0x20-0x7E), got undefined",
      ),
    },
    {
      name: "policy not ASCII",
      decision: allowed(1, 0),
      options: { policy: "café" },
      error: new RangeError(
        'rateLimitHeaders: policy must be a non-empty string of printable ASCII (0x20-0x7E), got "café" (string)',
      ),
    },
    {
      name: "policy with a newline (header injection)",
      decision: allowed(1, 0),
      options: { policy: "a\r\nX-Evil: 1" },
      error: new RangeError(
        'rateLimitHeaders: policy must be a non-empty string of printable ASCII (0x20-0x7E), got "a\\r\\nX-Evil: 1" (string)',
      ),
    },
    {
      name: "windowSeconds 0",
      decision: allowed(1, 0),
      options: { policy: "p", windowSeconds: 0 },
      error: new RangeError(
        "rateLimitHeaders: windowSeconds must be an integer from 1 to 999999999999999, got 0",
      ),
    },
    {
      name: "windowSeconds fractional",
      decision: allowed(1, 0),
      options: { policy: "p", windowSeconds: 1.5 },
      error: new RangeError(
        "rateLimitHeaders: windowSeconds must be an integer from 1 to 999999999999999, got 1.5",
      ),
    },
    {
      name: "windowSeconds a string",
      decision: allowed(1, 0),
      options: { policy: "p", windowSeconds: "60" },
      error: new TypeError(
        'rateLimitHeaders: windowSeconds must be an integer from 1 to 999999999999999, got "60" (string)',
      ),
    },
    {
      name: "decision not an object",
      decision: null,
      options: { policy: "p" },
      error: new TypeError(
        "rateLimitHeaders: decision must be an object with a boolean allowed, got null",
      ),
    },
    {
      name: "remaining NaN",
      decision: { ...allowed(1, 0), remaining: Number.NaN },
      options: { policy: "p" },
      error: new RangeError("rateLimitHeaders: decision.remaining must be a number, got NaN"),
    },
    {
      name: "limit a string",
      decision: { ...allowed(1, 0), limit: "10" },
      options: { policy: "p" },
      error: new TypeError('rateLimitHeaders: decision.limit must be a number, got "10" (string)'),
    },
    {
      name: "retryAfterMs NaN on a denial",
      decision: denied(Number.NaN),
      options: { policy: "p" },
      error: new RangeError("rateLimitHeaders: decision.retryAfterMs must be a number, got NaN"),
    },
    {
      name: "retryAfterMs negative on a denial (was silently sent as Retry-After: 1)",
      decision: denied(-100),
      options: { policy: "p" },
      error: new RangeError(
        "rateLimitHeaders: decision.retryAfterMs must be a number >= 0 or Infinity on a denial, got -100",
      ),
    },
    {
      name: "retryAfterMs -Infinity on a denial",
      decision: denied(Number.NEGATIVE_INFINITY),
      options: { policy: "p" },
      error: new RangeError(
        "rateLimitHeaders: decision.retryAfterMs must be a number >= 0 or Infinity on a denial, got -Infinity",
      ),
    },
    {
      name: "resetAfterMs NaN",
      decision: { ...allowed(1, 0), resetAfterMs: Number.NaN },
      options: { policy: "p" },
      error: new RangeError("rateLimitHeaders: decision.resetAfterMs must be a number, got NaN"),
    },
  ];
  bad.push(
    {
      name: "limit negative (was sent as q=0)",
      decision: { ...allowed(1, 0), limit: -1 },
      options: { policy: "p" },
      error: new RangeError(
        "rateLimitHeaders: decision.limit must be a number >= 0 or Infinity, got -1",
      ),
    },
    {
      name: "limit slightly negative (was sent as q=0)",
      decision: { ...allowed(1, 0), limit: -0.4 },
      options: { policy: "p" },
      error: new RangeError(
        "rateLimitHeaders: decision.limit must be a number >= 0 or Infinity, got -0.4",
      ),
    },
    {
      name: "resetAfterMs negative on an allowed decision (was sent as t=0)",
      decision: { ...allowed(1, 0), resetAfterMs: -5 },
      options: { policy: "p" },
      error: new RangeError(
        "rateLimitHeaders: decision.resetAfterMs must be a number >= 0 or Infinity, got -5",
      ),
    },
    {
      name: "an unknown option: the middleware's headers (was ignored)",
      decision: allowed(1, 0),
      options: { policy: "p", headers: "legacy" },
      error: new TypeError(
        'rateLimitHeaders: unknown option "headers" (use legacy: true for X-RateLimit-*, draft: false to leave out RateLimit-Policy and RateLimit ("headers" is the middleware\'s option)); known options: policy, windowSeconds, limiter, legacy, wallClock, draft',
      ),
    },
    {
      name: "an unknown option: windowMs (was ignored)",
      decision: allowed(1, 0),
      options: { policy: "p", windowMs: 60_000 },
      error: new TypeError(
        'rateLimitHeaders: unknown option "windowMs" (use "windowSeconds" (whole seconds, the w= of RateLimit-Policy)); known options: policy, windowSeconds, limiter, legacy, wallClock, draft',
      ),
    },
    {
      name: "an unknown option inherited from a prototype",
      decision: allowed(1, 0),
      options: Object.assign(Object.create({ legacyHeaders: true }), { policy: "p" }),
      error: new TypeError(
        'rateLimitHeaders: unknown option "legacyHeaders" (use legacy: true for X-RateLimit-*, draft: false to leave out RateLimit-Policy and RateLimit ("headers" is the middleware\'s option)); known options: policy, windowSeconds, limiter, legacy, wallClock, draft',
      ),
    },
    {
      name: 'legacy "yes" (was read as false)',
      decision: allowed(1, 0),
      options: { policy: "p", legacy: "yes" },
      error: new TypeError('rateLimitHeaders: legacy must be a boolean, got "yes" (string)'),
    },
    {
      name: "draft 0 (was read as true)",
      decision: allowed(1, 0),
      options: { policy: "p", draft: 0 },
      error: new TypeError("rateLimitHeaders: draft must be a boolean, got 0"),
    },
    {
      name: "wallClock not a function",
      decision: allowed(1, 0),
      options: { policy: "p", legacy: true, wallClock: 5 },
      error: new TypeError(
        "rateLimitHeaders: wallClock must be a function returning milliseconds since the Unix epoch, got 5",
      ),
    },
    {
      name: "wallClock reading NaN",
      decision: allowed(1, 0),
      options: { policy: "p", legacy: true, wallClock: () => Number.NaN },
      error: new RangeError(
        "rateLimitHeaders: wallClock must return a finite number of milliseconds since the Unix epoch >= 0, got NaN",
      ),
    },
  );
  test.each(bad)("rejects $name", ({ decision, options, error }) => {
    const call = () =>
      rateLimitHeaders(decision as Decision, options as Parameters<typeof rateLimitHeaders>[1]);
    expect(call).toThrow(error);
    expect(call).toThrow(error.constructor as typeof Error);
  });
});

describe("remaining passed through above the limit from a custom limiter", () => {
  test("property: r is the whole remaining clamped to [0, q], for any integer limit and remaining", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1e6 }),
        fc.integer({ min: -1e6, max: 2e6 }),
        fc.boolean(),
        (limit, remaining, allowed) => {
          const decision = { allowed, limit, remaining, retryAfterMs: 1000, resetAfterMs: 1000 };
          const headers = rateLimitHeaders(decision, { policy: "p", legacy: true });
          const expected = Math.min(Math.max(remaining, 0), limit);
          expect(headers["X-RateLimit-Remaining"]).toBe(String(expected));
          expect(headers.RateLimit).toMatch(new RegExp(`^"p";r=${expected};t=\\d+$`));
        },
      ),
    );
  });
});

describe("ceilSeconds", () => {
  test.each([
    { name: "0", ms: 0, seconds: 0 },
    { name: "negative", ms: -5, seconds: 0 },
    { name: "1 ms", ms: 1, seconds: 1 },
    { name: "1000 ms", ms: 1000, seconds: 1 },
    { name: "1000.0000000000031 ms", ms: 1000.0000000000031, seconds: 1 },
    { name: "1000.5 ms", ms: 1000.5, seconds: 2 },
    { name: "1001 ms", ms: 1001, seconds: 2 },
    { name: "0.1 + 0.2 s in ms", ms: (0.1 + 0.2) * 1000 * 10, seconds: 3 },
    { name: "one day", ms: 86_400_000, seconds: 86_400 },
  ])("$name -> $seconds", ({ ms, seconds }) => {
    expect(ceilSeconds(ms)).toBe(seconds);
  });

  test("matches a naive model: whole seconds, never early, at most one second late", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e9 }), (ms) => {
        // Integer ms: the exact answer is ceil(ms / 1000) computed in integers.
        const expected = Math.floor((ms + 999) / 1000);
        return ceilSeconds(ms) === expected;
      }),
    );
  });

  test("noise of a few ulps on a whole number of seconds never adds a second", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: -4, max: 4 }), (s, ulps) => {
        const ms = s * 1000 * (1 + ulps * Number.EPSILON);
        return ceilSeconds(ms) === s;
      }),
    );
  });

  test("NaN and Infinity are errors, not numbers", () => {
    expect(() => ceilSeconds(Number.NaN)).toThrow(
      new RangeError("ceilSeconds: ms must not be NaN, got NaN"),
    );
    expect(() => ceilSeconds(Number.POSITIVE_INFINITY)).toThrow(
      new RangeError("ceilSeconds: ms must be finite, got Infinity"),
    );
  });
});

describe("refusalStatus", () => {
  const denial = { allowed: false, limit: 10, remaining: 0, resetAfterMs: 0 } as const;
  test.each([
    ["can pass later", { ...denial, retryAfterMs: 500 }, 1, 429],
    ["never at its cost, above the limit", { ...denial, retryAfterMs: Infinity }, 11, 413],
    ["never: the quota is spent for good", { ...denial, retryAfterMs: Infinity }, 1, 403],
  ] as const)("%s: %i", (_, decision, cost, status) => {
    expect(refusalStatus(decision as Decision, cost)).toBe(status);
  });

  test("a closed limiter's denial is 503, as the middleware answers it, not a spent quota's 403", () => {
    // A LeasedTokenBucket after close(): retryAfterMs Infinity, source 'stopped'. The
    // middleware answered 503, but refusalStatus, which a framework without an adapter
    // calls, said 403 (the client's quota spent for good).
    const stopped = { ...denial, retryAfterMs: Infinity, source: "stopped" } as Decision;
    expect(refusalStatus(stopped, 1)).toBe(503);
  });
});

describe("retryAfterSeconds", () => {
  test("undefined when allowed or never", () => {
    expect(retryAfterSeconds(allowed(1, 1000))).toBeUndefined();
    expect(retryAfterSeconds(denied(Number.POSITIVE_INFINITY))).toBeUndefined();
    expect(retryAfterSeconds(denied(2001))).toBe(3);
  });
});

describe("quotaExceededProblem", () => {
  test("names the draft's problem type and the violated policy", () => {
    expect(quotaExceededProblem(denied(4200), "default", 1)).toStrictEqual({
      type: QUOTA_EXCEEDED_TYPE,
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: "Quota exceeded; retry after 5 seconds.",
      "violated-policies": ["default"],
    });
    expect(QUOTA_EXCEEDED_TYPE).toBe(
      "https://iana.org/assignments/http-problem-types#quota-exceeded",
    );
  });

  test("says a request that can never succeed at its cost will never succeed", () => {
    const problem = quotaExceededProblem(denied(Number.POSITIVE_INFINITY), "default", 12);
    expect(problem["detail"]).toBe(
      'This request (cost 12) can never succeed at this cost: policy "default" will never have 12 units available (quota 10). Retrying will not help.',
    );
  });
});

describe("precomputed header and body text (the middleware's fast path)", () => {
  // Printable ASCII names, with the characters that need escaping in SF and JSON.
  const policyName = fc
    .array(fc.oneof(fc.constantFrom('"', "\\", " ", "~", "/"), fc.string({ minLength: 1 })), {
      minLength: 1,
      maxLength: 4,
    })
    .map((parts) => parts.join("").replace(/[^\x20-\x7e]/g, "x"));

  test("QuotaExceededJson.text equals JSON.stringify(quotaExceededProblem) for every finite retry", () => {
    fc.assert(
      fc.property(policyName, fc.integer({ min: 0, max: 10_000_000 }), (policy, ms) => {
        const decision = denied(ms);
        const seconds = retryAfterSeconds(decision)!;
        expect(new QuotaExceededJson(policy).text(seconds)).toBe(
          JSON.stringify(quotaExceededProblem(decision, policy, 3)),
        );
      }),
    );
  });

  test("HeaderText gives the RateLimit-Policy and RateLimit values of rateLimitHeaders, also after the limit changes", () => {
    fc.assert(
      fc.property(
        policyName,
        fc.option(fc.integer({ min: 1, max: 86_400 }), { nil: undefined }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 50 })), {
          minLength: 1,
          maxLength: 5,
        }),
        (policy, windowSeconds, steps) => {
          const text = new HeaderText(sfString(policy));
          for (const [limit, remaining] of steps) {
            const expected = rateLimitHeaders(allowed(remaining, 5000, limit), {
              policy,
              windowSeconds,
            });
            const r = Math.min(remaining, limit);
            expect(text.policy(limit, windowSeconds)).toBe(expected["RateLimit-Policy"]);
            expect(text.rate(r, 5)).toBe(expected["RateLimit"]);
          }
          expect(text.rate(0, -1)).toBe(`${sfString(policy)};r=0`);
        },
      ),
    );
  });
});

describe("wholeText", () => {
  test.each([
    { name: "0", value: 0 },
    { name: "2^30 - 1", value: 1_073_741_823 },
    { name: "2^30", value: 1_073_741_824 },
    { name: "1e8 boundary inside the low digits", value: 100_000_000_000 },
    { name: "low digits with leading zeros", value: 4_200_000_007 },
    { name: "the SF maximum", value: MAX_SF_INTEGER },
  ])("$name is written as String() writes it", ({ value }) => {
    expect(wholeText(value)).toBe(String(value));
  });

  test("equals String() for every whole number up to the SF maximum", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_SF_INTEGER }), (value) => {
        expect(wholeText(value)).toBe(String(value));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("sfString", () => {
  test.each([
    { name: "plain", text: "default", sf: '"default"' },
    { name: "quote", text: 'a"b', sf: '"a\\"b"' },
    { name: "backslash", text: "a\\b", sf: '"a\\\\b"' },
  ])("$name", ({ text, sf }) => {
    expect(sfString(text)).toBe(sf);
  });
});

describe("X-RateLimit-Reset is the Unix second of the moment t stands for, rounded once", () => {
  // It was the delta in seconds (the `t` of RateLimit) once, which clients written for
  // express-rate-limit's legacy headers or the GitHub API read as a date in January 1970.
  test("the legacy reset is epoch seconds: floor((now + ms) / 1000)", () => {
    const headers = rateLimitHeaders(allowed(4, 6000), { policy: "p", legacy: true, wallClock });
    expect(headers["X-RateLimit-Reset"]).toBe(String(NOW_FLOOR_S + 6)); // 600.25 + 6 s
    expect(
      rateLimitHeaders(denied(4200), { policy: "p", legacy: true, wallClock })["X-RateLimit-Reset"],
    ).toBe(String(NOW_FLOOR_S + 4)); // 600.25 + 4.2 s: second 604 (Retry-After says 5)
  });

  test("the default wall clock is Date.now", () => {
    const before = Math.floor(Date.now() / 1000);
    const reset = Number(
      rateLimitHeaders(allowed(4, 6000), { policy: "p", legacy: true })["X-RateLimit-Reset"],
    );
    const after = Math.floor(Date.now() / 1000);
    expect(reset).toBeGreaterThanOrEqual(before + 6);
    expect(reset).toBeLessThanOrEqual(after + 6);
  });

  test("X-RateLimit-Reset is rounded twice no more: a 300 ms wait at x.5 s says x, not x+2", () => {
    // ceil(now) + ceil(t) was 1001 + 1: Octokit, adding its second, waited 3 s for 0.3 s;
    // now ceil(1000 - 1000.5) + 1 = 1 s, and it retries at 1001.5, after the moment 1000.8.
    const headers = rateLimitHeaders(denied(300), {
      policy: "p",
      legacy: true,
      wallClock: () => 1_000_500,
    });
    expect(headers["X-RateLimit-Reset"]).toBe("1000");
    expect(headers["Retry-After"]).toBe("1");
  });

  /** What Octokit's throttling plugin waits, in ms, for a refusal read at `nowMs`. */
  const octokitWaitMs = (reset: number, nowMs: number) =>
    Math.max(Math.ceil((reset * 1000 - nowMs) / 1000) + 1, 0) * 1000;

  test("property: Octokit, which waits ceil(reset - now) + 1 s, retries after the moment and at most 1 s after Retry-After", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4e12 }),
        fc.integer({ min: 1, max: 1e7 }),
        fc.integer({ min: 0, max: 50 }), // the client reads the response this much later
        (nowMs, retryAfterMs, lateMs) => {
          const headers = rateLimitHeaders(denied(retryAfterMs), {
            policy: "p",
            legacy: true,
            wallClock: () => nowMs,
          });
          const reset = Number(headers["X-RateLimit-Reset"]);
          const readAt = nowMs + lateMs;
          const retryAt = readAt + octokitWaitMs(reset, readAt);
          expect(retryAt).toBeGreaterThanOrEqual(nowMs + retryAfterMs);
          expect(retryAt - readAt).toBeLessThanOrEqual(
            Number(headers["Retry-After"]) * 1000 + 1000,
          );
        },
      ),
    );
  });

  test("property: floor((now + resetMs) / 1000), and t is the same moment rounded up", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4e12 }),
        fc.integer({ min: 0, max: 1e9 }),
        fc.boolean(),
        (nowMs, resetMs, isAllowed) => {
          const decision = isAllowed ? allowed(4, resetMs) : denied(resetMs, resetMs);
          const headers = rateLimitHeaders(decision, {
            policy: "p",
            legacy: true,
            wallClock: () => nowMs,
          });
          const moment = isAllowed || resetMs > 0 ? nowMs + resetMs : nowMs;
          expect(Number(headers["X-RateLimit-Reset"])).toBe(Math.floor(moment / 1000));
          const t = Number(/;t=(\d+)/.exec(headers.RateLimit!)![1]);
          expect(t).toBe(isAllowed ? ceilSeconds(resetMs) : Math.max(1, ceilSeconds(resetMs)));
        },
      ),
    );
  });

  test("resetEpochSeconds caps at the largest SF Integer and refuses a broken reading", () => {
    expect(resetEpochSeconds(NOW_MS, MAX_SF_INTEGER * 1000)).toBe(MAX_SF_INTEGER);
    expect(resetEpochSeconds(0, 0)).toBe(0);
    for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY]) {
      expect(() => resetEpochSeconds(bad, 1), String(bad)).toThrow(RangeError);
    }
  });

  test("property: HeaderText.resetEpoch (cached text) equals rateLimitHeaders as the wall clock moves", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4e12 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2500 }), fc.integer({ min: 0, max: 3 })), {
          minLength: 1,
          maxLength: 20,
        }),
        (startMs, steps) => {
          let nowMs = startMs;
          const text = new HeaderText(sfString("p"), () => nowMs);
          for (const [advanceMs, reset] of steps) {
            nowMs += advanceMs;
            const expected = rateLimitHeaders(allowed(1, reset * 1000), {
              policy: "p",
              legacy: true,
              wallClock: () => nowMs,
            })["X-RateLimit-Reset"];
            expect(text.resetEpoch(reset * 1000)).toBe(expected);
          }
        },
      ),
    );
  });
});

describe("the w= of RateLimit-Policy comes from the limiter's window", () => {
  const redis: RedisLike = {
    evalSha: () => Promise.reject(new Error("not connected")),
    evalScript: () => Promise.reject(new Error("not connected")),
  } as unknown as RedisLike;
  const window = (windowMs: number) => new FixedWindow({ limit: 5, windowMs });
  test.each([
    { name: "FixedWindow 60 s", limiter: window(60_000), windowMs: 60_000, seconds: 60 },
    {
      name: "SlidingWindowLog 10 s",
      limiter: new SlidingWindowLog({ limit: 5, windowMs: 10_000 }),
      windowMs: 10_000,
      seconds: 10,
    },
    {
      name: "SlidingWindowCounter 1 h",
      limiter: new SlidingWindowCounter({ limit: 5, windowMs: 3_600_000 }),
      windowMs: 3_600_000,
      seconds: 3600,
    },
    {
      name: "KeyedLimiter of a FixedWindow (fast path)",
      limiter: new KeyedLimiter(window(60_000)),
      windowMs: 60_000,
      seconds: 60,
    },
    {
      name: "KeyedLimiter of a SlidingWindowCounter (fast path)",
      limiter: new KeyedLimiter(new SlidingWindowCounter({ limit: 5, windowMs: 30_000 })),
      windowMs: 30_000,
      seconds: 30,
    },
    {
      name: "KeyedLimiter of a SlidingWindowLog (generic path)",
      limiter: new KeyedLimiter(new SlidingWindowLog({ limit: 5, windowMs: 2000 })),
      windowMs: 2000,
      seconds: 2,
    },
    {
      name: "RedisFixedWindow",
      limiter: new RedisFixedWindow({ client: redis, limit: 5, windowMs: 120_000 }),
      windowMs: 120_000,
      seconds: 120,
    },
    {
      name: "RedisSlidingWindowLog",
      limiter: new RedisSlidingWindowLog({ client: redis, limit: 5, windowMs: 5000 }),
      windowMs: 5000,
      seconds: 5,
    },
    {
      name: "a window of 1.5 s: no whole w",
      limiter: window(1500),
      windowMs: 1500,
      seconds: undefined,
    },
    {
      name: "a window of 500 ms: no whole w",
      limiter: window(500),
      windowMs: 500,
      seconds: undefined,
    },
    {
      name: "float noise on 3 s still counts as 3",
      limiter: window(0.1 * 30_000),
      windowMs: 0.1 * 30_000,
      seconds: 3,
    },
    {
      name: "TokenBucket: no window",
      limiter: new TokenBucket({ capacity: 5, refillPerSecond: 1 }),
      windowMs: undefined,
      seconds: undefined,
    },
    {
      name: "KeyedLimiter of a TokenBucket: no window",
      limiter: new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1 })),
      windowMs: undefined,
      seconds: undefined,
    },
    {
      name: "KeyedLimiter of a function: its keys may differ",
      limiter: new KeyedLimiter(() => window(60_000)),
      windowMs: undefined,
      seconds: undefined,
    },
    {
      name: "allOf of windows: several windows",
      limiter: allOf(window(1000), window(60_000)),
      windowMs: undefined,
      seconds: undefined,
    },
    {
      name: "a custom consumer with windowMs",
      limiter: { windowMs: 7000, consume: () => allowed(1, 0) },
      windowMs: 7000,
      seconds: 7,
    },
    {
      name: "a custom consumer with a string windowMs",
      limiter: { windowMs: "7000" },
      windowMs: undefined,
      seconds: undefined,
    },
    { name: "undefined", limiter: undefined, windowMs: undefined, seconds: undefined },
  ])("$name", ({ limiter, windowMs, seconds }) => {
    expect(limiterWindowMs(limiter)).toBe(windowMs);
    expect(windowSecondsOf(limiter)).toBe(seconds);
  });

  test("property: the derived w is windowMs / 1000 exactly when that is a whole number of seconds", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e9 }), (windowMs) => {
        const seconds = windowSecondsOf(window(windowMs));
        expect(seconds).toBe(windowMs % 1000 === 0 ? windowMs / 1000 : undefined);
      }),
    );
  });

  // Regression: windowSeconds was typed in by hand and sent as w= whatever the limiter enforced.
  test("a windowSeconds that disagrees with the limiter's window is a RangeError naming both", () => {
    expect(() => policyWindowSeconds("rateLimit", new KeyedLimiter(window(30_000)), 60)).toThrow(
      new RangeError(
        "rateLimit: windowSeconds is 60 but the limiter's window is 30 s (windowMs 30000); leave windowSeconds out to send the limiter's own",
      ),
    );
    expect(() => policyWindowSeconds("rateLimit", window(1500), 2)).toThrow(
      new RangeError(
        "rateLimit: windowSeconds is 2 but the limiter's window (windowMs 1500) is not a whole number of seconds, so no w= can state it; leave windowSeconds out (w= is then omitted)",
      ),
    );
  });

  test("the same number as windowMs and windowSeconds: the message names both fixes", () => {
    expect(() => policyWindowSeconds("rateLimit", window(60), 60)).toThrow(
      new RangeError(
        "rateLimit: windowSeconds is 60 but the limiter's window (windowMs 60) is not a whole number of seconds, so no w= can state it; leave windowSeconds out (w= is then omitted). windowMs is in milliseconds, windowSeconds in seconds: windowMs: 60000 makes the limiter's window 60 s",
      ),
    );
    expect(() => policyWindowSeconds("rateLimit", window(3000), 3000)).toThrow(
      /window is 3 s \(windowMs 3000\); leave windowSeconds out to send the limiter's own\. windowMs is in milliseconds, windowSeconds in seconds: windowSeconds: 3 states its 3 s, or windowMs: 3000000 makes the limiter's window 3000 s$/,
    );
  });

  test("w is derived when windowSeconds is left out, kept when both agree or the limiter has no window", () => {
    const keyed = new KeyedLimiter(window(60_000));
    expect(policyWindowSeconds("w", keyed, undefined)).toBe(60);
    expect(policyWindowSeconds("w", keyed, 60)).toBe(60);
    expect(policyWindowSeconds("w", window(1500), undefined)).toBeUndefined();
    const bucket = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1 }));
    expect(policyWindowSeconds("w", bucket, 10)).toBe(10);
    expect(policyWindowSeconds("w", bucket, undefined)).toBeUndefined();
  });
});

describe("t is draft-11's effective window: within t seconds, use no more than r (section 4.1.2)", () => {
  // Each step: [atMs, allowed, RateLimit]. The limiter is passed, so a bucket's rate is read.
  type Step = readonly [atMs: number, allowed: boolean, rateLimit: string];
  const cases: readonly { name: string; make: (clock: () => number) => never; steps: Step[] }[] = [
    {
      // Below capacity, one more unit is 1 s away each time; the 429 says the same as Retry-After.
      name: "TokenBucket capacity 3 at 1/s: the time to the next unit",
      make: (clock) => new TokenBucket({ capacity: 3, refillPerSecond: 1, clock }) as never,
      steps: [
        [0, true, '"p";r=2;t=1'],
        [0, true, '"p";r=1;t=1'],
        [0, true, '"p";r=0;t=1'],
        [0, false, '"p";r=0;t=1'],
        [500, false, '"p";r=0;t=1'], // half a unit: the 429's 0.5 s rounds up to 1
        [1000, true, '"p";r=0;t=1'],
        [3500, true, '"p";r=1;t=1'], // 2.5 units, 1.5 left: the next whole unit in 0.5 s
      ],
    },
    {
      name: "FixedWindow 2 per 10 s: the time until the window ends",
      make: (clock) => new FixedWindow({ limit: 2, windowMs: 10_000, clock }) as never,
      steps: [
        [3000, true, '"p";r=1;t=7'],
        [3000, true, '"p";r=0;t=7'],
        [9100, false, '"p";r=0;t=1'],
        [10_000, true, '"p";r=1;t=10'],
      ],
    },
    {
      // An upper bound: the oldest entry leaves earlier (docs/http.md#headers says why).
      name: "SlidingWindowLog 2 per 10 s: the time until the log is empty",
      make: (clock) => new SlidingWindowLog({ limit: 2, windowMs: 10_000, clock }) as never,
      steps: [
        [0, true, '"p";r=1;t=10'],
        [4000, true, '"p";r=0;t=10'],
        [5000, false, '"p";r=0;t=5'], // the 429: when the entry of 0 leaves, as Retry-After
      ],
    },
  ];
  test.each(cases)("$name", ({ make, steps }) => {
    let now = 0;
    const limiter = make(() => now) as unknown as TokenBucket;
    steps.forEach(([atMs, allowed, rateLimit], i) => {
      now = atMs;
      const d = limiter.consume(1);
      expect(d.allowed, `step ${i} at ${atMs} ms`).toBe(allowed);
      const headers = rateLimitHeaders(d, { policy: "p", limiter });
      expect(headers.RateLimit, `step ${i} at ${atMs} ms`).toBe(rateLimit);
      if (!allowed) {
        expect(headers["Retry-After"], `step ${i}: Retry-After is t (section 6)`).toBe(
          rateLimit.split("t=")[1],
        );
      }
    });
  });
});
