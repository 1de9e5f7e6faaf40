// The client-key constants and windowSecondsOf: the keys tollgate/http exports, read from
// the entry point itself, and the bounds and w= read from their modules.
import { describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { MAX_TRUSTED_HOPS } from "../../src/http/client-key.js";
import { windowSecondsOf } from "../../src/http/headers.js";
import { MALFORMED_FORWARDED_KEY, rateLimit } from "../../src/http/index.js";
import { DEFAULT_IPV6_PREFIX, ipKey } from "../../src/http/ip.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";

describe("the client-key constants and windowSecondsOf", () => {
  test("the constants have the documented values, and are the ones the middleware uses", () => {
    expect(MALFORMED_FORWARDED_KEY).toBe("malformed-forwarded");
    expect(DEFAULT_IPV6_PREFIX).toBe(56);
    expect(ipKey("2001:db8:1:2aa::1")).toBe(`2001:db8:1:200::/${DEFAULT_IPV6_PREFIX}`);
    expect(MAX_TRUSTED_HOPS).toBe(4);
    const limiter = {
      consume: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
    };
    expect(() => rateLimit({ limiter, trustProxy: MAX_TRUSTED_HOPS })).not.toThrow();
    expect(() => rateLimit({ limiter, trustProxy: MAX_TRUSTED_HOPS + 1 })).toThrow(
      /trustProxy must be at most 4 hops, got 5/,
    );
  });

  test.each([
    {
      name: "a FixedWindow of 30 s",
      limiter: new FixedWindow({ limit: 5, windowMs: 30_000 }),
      w: 30,
    },
    {
      name: "a KeyedLimiter of one",
      limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 })),
      w: 60,
    },
    {
      name: "a 1.5 s window",
      limiter: new FixedWindow({ limit: 5, windowMs: 1500 }),
      w: undefined,
    },
    {
      name: "a TokenBucket",
      limiter: new TokenBucket({ capacity: 5, refillPerSecond: 1 }),
      w: undefined,
    },
  ])("windowSecondsOf $name is $w", ({ limiter, w }) => {
    expect(windowSecondsOf(limiter)).toBe(w);
  });
});
