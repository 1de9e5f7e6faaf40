// The messages a newcomer meets first, whole: each names every problem at once, says what
// to write instead, and prints no float noise. Each case is a regression named after what
// the old message got wrong.
import { afterEach, describe, expect, test, vi } from "vitest";
import { parseCommand, type ReplayCommand } from "../src/cli/args.js";
import { UsageError } from "../src/cli/policy.js";
import { rateLimit } from "../src/http/index.js";
import {
  KeyedLimiter,
  LeakyBucket,
  RateLimitError,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import { fromIoredis } from "../src/redis/index.js";
import { manualClock } from "./support/manual-clock.js";
import { timerClock } from "./support/timer-clock.js";

const lines = (...parts: string[]) => parts.join("\n");

describe("option errors list every problem in one message", () => {
  test.each([
    {
      name: "regression: rateLimit({ windowMs, max }) took three rounds (one unknown option per message, then the missing limiter)",
      make: () => rateLimit({ windowMs: 15 * 60_000, max: 100 } as never),
      message: lines(
        "rateLimit: 3 problems with the options:",
        '  - unknown option "windowMs" (set windowMs on the limiter (FixedWindow/SlidingWindow*) instead, or refillPerSecond on a bucket)',
        '  - unknown option "max" (set the limit on the limiter: capacity for TokenBucket/LeakyBucket, limit for FixedWindow/SlidingWindow*)',
        '  - missing option "limiter"',
        "  known options: limiter, policy, windowSeconds, headers, wallClock, failure, onError, trustProxy, proxyHeader, ipv6Prefix, blockDurationMs, nearLimitShare, key, cost, skip, onLimited, refundIf, refundAborted, onNearLimit",
        "  for example: rateLimit({ limiter: new KeyedLimiter(new FixedWindow({ limit: 100, windowMs: 900000 })) })",
      ),
    },
    {
      name: "regression: rateLimit({}) said what a limiter may be, not how to write one",
      make: () => rateLimit({} as never),
      message:
        'rateLimit: missing option "limiter"; for example: rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })',
    },
    {
      name: "regression: new TokenBucket({ points, duration }) named points alone, then duration, then capacity",
      make: () => new TokenBucket({ points: 5, duration: 60 } as never),
      message: lines(
        "TokenBucket: 3 problems with the options:",
        '  - unknown option "points" (use "capacity", the most units at once)',
        '  - unknown option "duration" (TokenBucket has no window: "capacity" units, refilled at "refillPerSecond" per second; for a window use FixedWindow or SlidingWindowCounter)',
        '  - missing options "capacity" and "refillPerSecond"',
        "  known options: capacity, refillPerSecond, initialTokens, clock",
        "  for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
      ),
    },
    {
      name: "regression: new TokenBucket({ capacity }) gave a range for refillPerSecond, no example",
      make: () => new TokenBucket({ capacity: 5 } as never),
      message:
        'TokenBucket: missing option "refillPerSecond"; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })',
    },
    {
      name: "regression: new TokenBucket() said options must be an object, with no example",
      make: () => new (TokenBucket as new () => TokenBucket)(),
      message:
        "TokenBucket: options must be an object, got undefined; for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
    },
    {
      name: "regression: new SlidingWindowLog() said options must be an object, with no example",
      make: () => new (SlidingWindowLog as new () => SlidingWindowLog)(),
      message:
        "SlidingWindowLog: options must be an object, got undefined; for example: new SlidingWindowLog({ limit: 100, windowMs: 60_000 })",
    },
    {
      name: "regression: new KeyedLimiter() gave no example",
      make: () => new (KeyedLimiter as new () => KeyedLimiter)(),
      message:
        "KeyedLimiter: policy must be a limiter with clone() or a function (key) => Limiter, got undefined; for example: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 5 }))",
    },
    {
      name: "regression: rateLimit() gave no example",
      make: () => (rateLimit as () => unknown)(),
      message:
        "rateLimit: options must be an object, got undefined; for example: rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 })) })",
    },
    {
      name: 'regression: an object that is no ioredis client said "must be a ioredis client"',
      make: () => fromIoredis({} as never),
      message:
        "fromIoredis: client must be an ioredis client (new Redis(url) or new Cluster(nodes)) with evalsha and eval methods, got an object",
    },
  ])("$name", ({ make, message }) => {
    expect(make).toThrow(new TypeError(message));
  });
});

describe("a policy given as options says which limiter they describe", () => {
  const prefix =
    "KeyedLimiter: policy must be a limiter with clone() or a function (key) => Limiter, got an object";
  test.each([
    {
      name: "regression: new KeyedLimiter({ points, duration }) got no hint (rate-limiter-flexible's options)",
      policy: { points: 5, duration: 60 },
      hint: " with points, duration: rate-limiter-flexible's options (points per duration seconds, in fixed windows); for example: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60000 }))",
    },
    {
      name: "express-rate-limit's { max, windowMs }",
      policy: { max: 100, windowMs: 900_000 },
      hint: " with max, windowMs: express-rate-limit's options (max per windowMs); for example: new KeyedLimiter(new FixedWindow({ limit: 100, windowMs: 900000 }))",
    },
    {
      name: "@fastify/rate-limit's { max, timeWindow }",
      policy: { max: 3, timeWindow: 1000 },
      hint: " with max, timeWindow: @fastify/rate-limit's options (max per timeWindow); for example: new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 1000 }))",
    },
    {
      name: "a TokenBucket's options without the TokenBucket",
      policy: { capacity: 10, refillPerSecond: 1 },
      hint: " with capacity, refillPerSecond: TokenBucket's options, not the limiter; for example: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))",
    },
    {
      name: "a LeakyBucket's options without the LeakyBucket",
      policy: { capacity: 4, leakPerSecond: 2 },
      hint: " with capacity, leakPerSecond: LeakyBucket's options, not the limiter; for example: new KeyedLimiter(new LeakyBucket({ capacity: 4, leakPerSecond: 2 }))",
    },
    {
      name: "a window's options without the window",
      policy: { limit: 10, windowMs: 1000 },
      hint: " with limit, windowMs: a window's options, not the limiter; for example: new KeyedLimiter(new FixedWindow({ limit: 10, windowMs: 1000 }))",
    },
    {
      name: "KeyedLimiter's own options given first",
      policy: { maxKeys: 10 },
      hint: " with maxKeys: KeyedLimiter's options, which come second; for example: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 5 }), { maxKeys: 10 })",
    },
    { name: "an object of nothing known", policy: { colour: "blue" }, hint: "" },
  ])("$name", ({ policy, hint }) => {
    expect(() => new KeyedLimiter(policy as never)).toThrow(new TypeError(`${prefix}${hint}`));
  });
});

describe("tollgate replay's flags", () => {
  const replay = (...args: string[]) => parseCommand(["replay", "access.log", ...args]);
  const TB = ["-a", "token-bucket", "--capacity", "5", "--refill-per-second", "1"];
  test.each([
    {
      name: "regression: --refill printed node's parseArgs text, with an unbalanced quote and no suggestion",
      args: [...TB, "--refill", "1"],
      message: "unknown option --refill (did you mean --refill-per-second?)",
    },
    {
      name: "every unknown flag at once, each with the one meant",
      args: [...TB, "--capacitty", "5", "--rate", "3", "--jsn", "-x"],
      message:
        "unknown options --capacitty (did you mean --capacity?), --rate (did you mean --refill-per-second or --leak-per-second?), --jsn (did you mean --json?), -x",
    },
    {
      name: "the API's camelCase name",
      args: [...TB, "--windowMs", "1000"],
      message: "unknown option --windowMs (did you mean --window-ms?)",
    },
    {
      name: "a prefix of two flags",
      args: [...TB, "--max", "3"],
      message: "unknown option --max (did you mean --limit or --capacity?)",
    },
    {
      name: "regression: a flag without its value said \"Option '--top <value>' argument missing\"",
      args: [...TB, "--top"],
      message: "--top needs a value",
    },
    {
      name: "a value given to a flag that takes none",
      args: [...TB, "--json=yes"],
      message: "--json takes no value",
    },
  ])("$name", ({ args, message }) => {
    expect(() => replay(...args)).toThrow(new UsageError(`${message}\nsee tollgate replay --help`));
  });

  test("regression: -a gcra was an unknown algorithm, though LeakyBucket is GCRA: it is its alias", () => {
    const command = replay("-a", "gcra", "--capacity", "5", "--leak-per-second", "1");
    expect((command as ReplayCommand).policies).toEqual([
      { algorithm: "leaky-bucket", options: { capacity: 5, leakPerSecond: 1 }, derived: false },
    ]);
  });

  test.each([
    { name: "a misspelt id", algorithm: "tokenbuckt", meant: "token-bucket" },
    { name: "the class name", algorithm: "TokenBucket", meant: "token-bucket" },
    { name: "snake case", algorithm: "fixed_window", meant: "fixed-window" },
    {
      name: "a prefix of two ids",
      algorithm: "sliding-window",
      meant: "sliding-window-log or sliding-window-counter",
    },
  ])("an unknown algorithm suggests the one meant: $name", ({ algorithm, meant }) => {
    expect(() => replay("-a", algorithm)).toThrow(
      new UsageError(
        `unknown algorithm ${JSON.stringify(algorithm)} (did you mean ${meant}? one of token-bucket, leaky-bucket, fixed-window, sliding-window-log, sliding-window-counter)`,
      ),
    );
  });

  test("regression: a missing policy flag was named as a constructor option (refillPerSecond)", () => {
    expect(() => replay("-a", "token-bucket", "--capacity", "5")).toThrow(
      new UsageError(
        "token-bucket needs --refill-per-second\ntoken-bucket takes --capacity <number> --refill-per-second <number>",
      ),
    );
  });
});

describe("options passed where the cost goes", () => {
  test("regression: queue.wait({ maxWaitMs }) said only that cost must be a number", async () => {
    const queue = new LeakyBucket({ capacity: 1, leakPerSecond: 1 });
    await expect(queue.wait({ maxWaitMs: 100 } as never)).rejects.toThrow(
      new TypeError(
        "LeakyBucket.wait: cost must be a finite number >= 0, got an object; the options come after the cost: wait(1, { maxWaitMs: 100 })",
      ),
    );
  });

  test("regression: queue.wait(1, 100) said options must be an object, with no call to write", async () => {
    const queue = new LeakyBucket({ capacity: 1, leakPerSecond: 1 });
    await expect(queue.wait(1, 100 as never)).rejects.toThrow(
      new TypeError(
        "LeakyBucket.wait: options must be an object, got 100; for example: wait(1, { maxWaitMs: 100 })",
      ),
    );
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    await expect(keyed.wait("k", 1, 100 as never)).rejects.toThrow(
      "options must be an object, got 100; for example: wait(key, 1, { maxWaitMs: 100 })",
    );
  });

  test("the keyed wait and a reservation say where the options go", async () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    await expect(keyed.wait("k", { maxWaitMs: 100 } as never)).rejects.toThrow(
      "; the options come after the cost: wait(key, 1, { maxWaitMs: 100 })",
    );
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1 });
    expect(() => bucket.reserve({ maxWaitMs: 100 } as never)).toThrow(
      "; the options come after the cost: reserve(1, { maxWaitMs: 100 })",
    );
    // A cost that is no object keeps the plain message.
    expect(() => bucket.consume("1" as never)).toThrow(
      new TypeError('TokenBucket: cost must be a finite number >= 0, got "1" (string)'),
    );
  });
});

describe("wait refusals print their numbers without float noise", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test("regression: a LeakyBucket's full queue printed 0.00501405500000196 units free, and not that capacity bounds the queue", async () => {
    const { clock, advance } = timerClock();
    const bucket = new LeakyBucket({ capacity: 2, leakPerSecond: 3, clock });
    const served = [bucket.wait(1), bucket.wait(1)];
    await advance(1); // 3 per second for 1 ms: 0.003 units drained, in binary floats
    const refused = bucket.wait(1.997);
    await expect(refused).rejects.toBeInstanceOf(RateLimitError);
    await expect(refused).rejects.toMatchObject({
      message:
        "LeakyBucket.wait: the queue is full: cost 1.997 does not fit in the 0.003 units free of capacity 2 (capacity bounds the level and the units waiting together: a larger one lets more wait)",
    });
    await advance(1000);
    await expect(Promise.all(served)).resolves.toHaveLength(2);
  });

  test("regression: a wait past maxWaitMs printed its wait with float noise", async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 3, clock });
    bucket.consume(1);
    clock.set(0.1);
    // (1 - 0.0003) * 1000 / 3 is 333.2333333333333 in floats.
    await expect(bucket.wait(1, { maxWaitMs: 10 })).rejects.toMatchObject({
      name: "RateLimitError",
      message: "TokenBucket.wait: waiting 333.233 ms for cost 1 exceeds maxWaitMs 10",
    });
  });

  test("capacity is the queue bound: of 20 waiters on a LeakyBucket of capacity 10, 10 are refused at once", async () => {
    const { clock, advance } = timerClock();
    const bucket = new LeakyBucket({ capacity: 10, leakPerSecond: 10, clock });
    const outcomes = Array.from({ length: 20 }, () =>
      bucket.wait(1, { maxWaitMs: 3000 }).then(
        () => `served at ${clock()} ms`,
        (error: Error) => error.message,
      ),
    );
    expect(await Promise.all(outcomes.slice(10))).toEqual(
      Array(10).fill(
        "LeakyBucket.wait: the queue is full: cost 1 does not fit in the 0 units free of capacity 10 (capacity bounds the level and the units waiting together: a larger one lets more wait)",
      ),
    );
    await advance(1000);
    // One every 100 ms, the first at once: capacity 10 at 10 per second, no burst.
    expect(await Promise.all(outcomes.slice(0, 10))).toEqual(
      Array.from({ length: 10 }, (_, i) => `served at ${i * 100} ms`),
    );
  });
});
