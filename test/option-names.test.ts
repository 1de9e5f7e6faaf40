import { describe, expect, test } from "vitest";
import { optionNames } from "../src/core/option-names.js";
import { rateLimit } from "../src/http/index.js";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import {
  fromIoredis,
  fromNodeRedis,
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../src/redis/index.js";

// Construction never calls the client.
const client: RedisLike = {
  evalSha: () => Promise.reject(new Error("not called")),
  evalScript: () => Promise.reject(new Error("not called")),
};
const clock = () => 0;
const bucket = { capacity: 2, refillPerSecond: 1 };
const window = { limit: 2, windowMs: 1000 };

/** Every constructor and factory outside tollgate/http, with valid options to extend. */
const CONSTRUCTORS: {
  name: string;
  make: (extra: Record<string, unknown>) => unknown;
}[] = [
  { name: "TokenBucket", make: (x) => new TokenBucket({ ...bucket, clock, ...x }) },
  {
    name: "LeakyBucket",
    make: (x) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock, ...x }),
  },
  { name: "FixedWindow", make: (x) => new FixedWindow({ ...window, clock, ...x }) },
  { name: "SlidingWindowLog", make: (x) => new SlidingWindowLog({ ...window, clock, ...x }) },
  {
    name: "SlidingWindowCounter",
    make: (x) => new SlidingWindowCounter({ ...window, clock, ...x }),
  },
  {
    name: "KeyedLimiter",
    make: (x) =>
      new KeyedLimiter(new TokenBucket(bucket), { maxKeys: 10, sweepIntervalMs: Infinity, ...x }),
  },
  {
    name: "KeyedLimiter",
    make: (x) =>
      new KeyedLimiter(new SlidingWindowLog(window), { sweepIntervalMs: Infinity, ...x }),
  },
  {
    name: "KeyedLimiter",
    make: (x) =>
      new KeyedLimiter(() => new TokenBucket(bucket), { sweepIntervalMs: Infinity, ...x }),
  },
  { name: "RedisTokenBucket", make: (x) => new RedisTokenBucket({ client, ...bucket, ...x }) },
  {
    name: "RedisLeakyBucket",
    make: (x) => new RedisLeakyBucket({ client, capacity: 2, leakPerSecond: 1, ...x }),
  },
  { name: "RedisFixedWindow", make: (x) => new RedisFixedWindow({ client, ...window, ...x }) },
  {
    name: "RedisSlidingWindowLog",
    make: (x) => new RedisSlidingWindowLog({ client, ...window, ...x }),
  },
  {
    name: "RedisSlidingWindowCounter",
    make: (x) => new RedisSlidingWindowCounter({ client, ...window, ...x }),
  },
  {
    name: "TokenBucket.reserve",
    make: (x) => new TokenBucket({ ...bucket, clock }).reserve(1, { maxWaitMs: 10, ...x }),
  },
  {
    name: "LeakyBucket.reserve",
    make: (x) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock }).reserve(1, { ...x }),
  },
];

/** The `wait` methods: they reject rather than throw. */
const WAITS: { name: string; wait: (options: Record<string, unknown>) => Promise<unknown> }[] = [
  { name: "TokenBucket.wait", wait: (o) => new TokenBucket({ ...bucket, clock }).wait(1, o) },
  {
    name: "LeakyBucket.wait",
    wait: (o) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock }).wait(1, o),
  },
  { name: "FixedWindow.wait", wait: (o) => new FixedWindow({ ...window, clock }).wait(1, o) },
  {
    name: "SlidingWindowLog.wait",
    wait: (o) => new SlidingWindowLog({ ...window, clock }).wait(1, o),
  },
  {
    name: "SlidingWindowCounter.wait",
    wait: (o) => new SlidingWindowCounter({ ...window, clock }).wait(1, o),
  },
  {
    name: "allOf.wait",
    wait: (o) =>
      allOf(new TokenBucket({ ...bucket, clock }), new FixedWindow({ ...window, clock })).wait(
        1,
        o,
      ),
  },
  {
    name: "KeyedLimiter.wait",
    wait: (o) =>
      new KeyedLimiter(new TokenBucket({ ...bucket, clock }), {
        sweepIntervalMs: Infinity,
      }).wait("k", 1, o),
  },
];

describe("unknown options are a TypeError naming them", () => {
  test.each(CONSTRUCTORS)("$name accepts all of its own options", ({ make }) => {
    expect(() => make({})).not.toThrow();
  });

  test.each(CONSTRUCTORS)("$name: an unknown option is a TypeError naming it", ({ name, make }) => {
    expect(() => make({ colour: "blue" })).toThrow(TypeError);
    expect(() => make({ colour: "blue" })).toThrow(
      `${name}: unknown option "colour"; known options: `,
    );
  });

  test.each(CONSTRUCTORS)("$name: a misspelt option is named, even when undefined", ({ make }) => {
    expect(() => make({ clcok: undefined })).toThrow(/unknown option "clcok"/);
  });

  test.each(WAITS)(
    "$name: an unknown option rejects with a TypeError naming it",
    async ({ name, wait }) => {
      await expect(wait({ timeout: 10 })).rejects.toThrow(TypeError);
      await expect(wait({ timeout: 10 })).rejects.toThrow(
        `${name}: unknown option "timeout" (use "maxWaitMs" (milliseconds)); known options: signal, maxWaitMs`,
      );
    },
  );

  test("regression: new KeyedLimiter(policy, { maxkeys: 10 }) was accepted and kept 1,000,000 keys", () => {
    expect(() => new KeyedLimiter(new TokenBucket(bucket), { maxkeys: 10 } as never)).toThrow(
      'KeyedLimiter: unknown option "maxkeys" (did you mean "maxKeys"?); known options: maxKeys, maxBytes, maxKeyLength, maxWaiters, whenFull, sweepIntervalMs',
    );
  });

  test.each([
    {
      name: "express-rate-limit's max on TokenBucket",
      make: () => new TokenBucket({ max: 5, refillPerSecond: 1 } as never),
      message: [
        "TokenBucket: 2 problems with the options:",
        '  - unknown option "max" (use "capacity", the most units at once)',
        '  - missing option "capacity"',
        "  known options: capacity, refillPerSecond, initialTokens, clock",
        "  for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
      ].join("\n"),
    },
    {
      name: "rate-limiter-flexible's points and duration on FixedWindow",
      make: () => new FixedWindow({ points: 5, duration: 60 } as never),
      message: [
        "FixedWindow: 3 problems with the options:",
        '  - unknown option "points" (use "limit", the most units per window)',
        `  - unknown option "duration" (use "windowMs" (milliseconds; rate-limiter-flexible's duration is seconds))`,
        '  - missing options "limit" and "windowMs"',
        "  known options: limit, windowMs, clock",
        "  for example: new FixedWindow({ limit: 100, windowMs: 60_000 })",
      ].join("\n"),
    },
    {
      name: "rate-limiter-flexible's duration, in seconds, on SlidingWindowLog",
      make: () => new SlidingWindowLog({ limit: 5, duration: 60 } as never),
      message:
        'unknown option "duration" (use "windowMs" (milliseconds; rate-limiter-flexible\'s duration is seconds))',
    },
    {
      name: "a window in seconds",
      make: () => new FixedWindow({ limit: 10, windowSeconds: 60 } as never),
      message: [
        "FixedWindow: 2 problems with the options:",
        '  - unknown option "windowSeconds" (use "windowMs" (milliseconds: seconds x 1000))',
        '  - missing option "windowMs"',
        "  known options: limit, windowMs, clock",
        "  for example: new FixedWindow({ limit: 100, windowMs: 60_000 })",
      ].join("\n"),
    },
    {
      name: "a rate per millisecond, and per minute",
      make: () => new TokenBucket({ capacity: 10, refillPerMs: 0.001 } as never),
      message:
        'unknown option "refillPerMs" (use "refillPerSecond" (units per second: per millisecond x 1000))',
    },
    {
      name: "a leak rate, a name of no peer in particular",
      make: () => new LeakyBucket({ capacity: 10, leakRate: 20 } as never),
      message: 'unknown option "leakRate" (use "leakPerSecond" (units per second))',
    },
    {
      name: "a leak per minute",
      make: () => new LeakyBucket({ capacity: 10, leakPerMinute: 60 } as never),
      message:
        'unknown option "leakPerMinute" (use "leakPerSecond" (units per second: per minute / 60))',
    },
    {
      name: "a window on a bucket",
      make: () => new TokenBucket({ capacity: 5, windowMs: 1000 } as never),
      message: [
        "TokenBucket: 2 problems with the options:",
        '  - unknown option "windowMs" (TokenBucket has no window: "capacity" units, refilled at "refillPerSecond" per second; for a window use FixedWindow or SlidingWindowCounter)',
        '  - missing option "refillPerSecond"',
        "  known options: capacity, refillPerSecond, initialTokens, clock",
        "  for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
      ].join("\n"),
    },
    {
      name: "the token bucket's rate on a leaky bucket",
      make: () => new LeakyBucket({ capacity: 5, refillPerSecond: 1 } as never),
      message: [
        "LeakyBucket: 2 problems with the options:",
        `  - unknown option "refillPerSecond" (use "leakPerSecond": refillPerSecond is the other bucket's)`,
        '  - missing option "leakPerSecond"',
        "  known options: capacity, leakPerSecond, initialLevel, clock",
        "  for example: new LeakyBucket({ capacity: 10, leakPerSecond: 5 })",
      ].join("\n"),
    },
    {
      name: "the limiter package's tokensPerInterval on TokenBucket",
      make: () => new TokenBucket({ capacity: 5, tokensPerInterval: 5, interval: 1000 } as never),
      message: 'unknown option "tokensPerInterval" (use "refillPerSecond" (units per second)',
    },
    {
      name: "a rate on a window",
      make: () => new SlidingWindowCounter({ limit: 5, windowMs: 1000, rate: 1 } as never),
      message:
        'SlidingWindowCounter: unknown option "rate" (SlidingWindowCounter has no rate: "limit" units per "windowMs"; for a rate use TokenBucket)',
    },
    {
      name: "rate-limiter-flexible's storeClient on a Redis limiter",
      make: () => new RedisTokenBucket({ storeClient: {}, ...bucket } as never),
      message: [
        "RedisTokenBucket: 2 problems with the options:",
        '  - unknown option "storeClient" (use "client" with a wrapped client: fromIoredis(redis) or fromNodeRedis(redis))',
        '  - missing option "client"',
        "  known options: capacity, refillPerSecond, initialTokens, client, prefix, keyspace, timeoutMs, failure, onError, onRecover, circuit, maxTtlMs, clock",
        "  for example: new RedisTokenBucket({ client: fromIoredis(redis), capacity: 10, refillPerSecond: 5 })",
      ].join("\n"),
    },
    {
      name: "rate-limiter-flexible's keyPrefix on a Redis limiter",
      make: () => new RedisFixedWindow({ client, keyPrefix: "x", ...window } as never),
      message: 'RedisFixedWindow: unknown option "keyPrefix" (use "prefix")',
    },
    {
      name: "failOpen on a Redis limiter names the failure option",
      make: () => new RedisTokenBucket({ client, ...bucket, failOpen: true } as never),
      message:
        'RedisTokenBucket: unknown option "failOpen" (use failure: "open" (fail open), "closed" (fail closed), "local" (the default) or a fallback limiter)',
    },
    {
      name: "@fastify/rate-limit's nameSpace on a Redis limiter",
      make: () => new RedisSlidingWindowCounter({ client, ...window, nameSpace: "x" } as never),
      message: 'RedisSlidingWindowCounter: unknown option "nameSpace" (use "prefix")',
    },
    {
      name: "regression: rate-limiter-flexible's blockDuration was told tollgate has no lockout, though block() is one",
      make: () => new RedisSlidingWindowLog({ client, ...window, blockDuration: 60 } as never),
      message:
        'unknown option "blockDuration" (a lockout is a block, not a limiter option: limiter.block(key, ms), or blockDurationMs on rateLimit',
    },
    {
      name: "regression: blockDuration on an in-process window was told tollgate has no lockout",
      make: () => new FixedWindow({ limit: 1, windowMs: 1000, blockDuration: 1 } as never),
      message:
        'unknown option "blockDuration" (a lockout is a block, not a limiter option: keyed.block(key, ms) on a KeyedLimiter, or blockDurationMs on rateLimit',
    },
    {
      name: "regression: blockDuration on a limiter did not say block takes milliseconds (rate-limiter-flexible's is seconds)",
      make: () => new TokenBucket({ ...bucket, blockDuration: 60 } as never),
      message:
        "or blockDurationMs on rateLimit (blocks a client at its first denial); block takes milliseconds (seconds x 1000))",
    },
    {
      name: "regression: blockDurationMs on a limiter got no hint",
      make: () => new FixedWindow({ limit: 1, windowMs: 1000, blockDurationMs: 60_000 } as never),
      message:
        'unknown option "blockDurationMs" (a lockout is a block, not a limiter option: keyed.block(key, ms) on a KeyedLimiter',
    },
    {
      name: "rate-limiter-flexible's inMemoryBlockOnConsumed and keyPrefix on a FixedWindow",
      make: () =>
        new FixedWindow({
          limit: 1,
          windowMs: 1000,
          inMemoryBlockOnConsumed: 5,
          keyPrefix: "x",
        } as never),
      message:
        'unknown option "keyPrefix" (keys are the strings you pass to KeyedLimiter.allow(key): prefix them yourself',
    },
    {
      name: "blockDurationMs on KeyedLimiter points to block(key, ms)",
      make: () => new KeyedLimiter(new TokenBucket(bucket), { blockDurationMs: 1000 } as never),
      message:
        'KeyedLimiter: unknown option "blockDurationMs" (a block is a call, not an option: keyed.block(key, ms)',
    },
    {
      name: "express-rate-limit's validate and requestPropertyName on rateLimit",
      make: () =>
        rateLimit({
          limiter: new KeyedLimiter(new TokenBucket(bucket)),
          validate: false,
          requestPropertyName: "rl",
        } as never),
      message: 'unknown option "validate" (there is nothing to turn off',
    },
    {
      name: "a window on a Redis bucket names the Redis windows",
      make: () =>
        new RedisLeakyBucket({ client, capacity: 1, leakPerSecond: 1, windowMs: 1 } as never),
      message: "for a window use RedisFixedWindow or RedisSlidingWindowCounter",
    },
    {
      name: "a cache's ttl on KeyedLimiter",
      make: () => new KeyedLimiter(new TokenBucket(bucket), { ttl: 1000 } as never),
      message: 'KeyedLimiter: unknown option "ttl" (keys have no time to live',
    },
    {
      name: "a signal on reserve",
      make: () => new TokenBucket(bucket).reserve(1, { signal: AbortSignal.timeout(1) } as never),
      message:
        'TokenBucket.reserve: unknown option "signal" (reserve takes no signal: call cancel() on the reservation instead); known options: maxWaitMs',
    },
  ])("another library's name says what to use: $name", ({ make, message }) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(message);
  });

  test("an unknown option is refused before anything else is checked", () => {
    // Without the name check this would be "capacity must be a finite number > 0, got undefined".
    expect(() => new TokenBucket({ burst: 5, refillPerSecond: "1" } as never)).toThrow(
      new TypeError(
        [
          "TokenBucket: 2 problems with the options:",
          '  - unknown option "burst" (use "capacity", the most units at once)',
          '  - missing option "capacity"',
          "  known options: capacity, refillPerSecond, initialTokens, clock",
          "  for example: new TokenBucket({ capacity: 10, refillPerSecond: 5 })",
        ].join("\n"),
      ),
    );
  });
});

describe("allOf's arguments", () => {
  const a = () => new TokenBucket(bucket);
  test.each([
    {
      name: "an array of limiters as one argument",
      make: () => allOf([a(), a()] as never),
      message:
        "allOf: part 0 must be a Limiter, got an array; pass the limiters as arguments: allOf(a, b), not allOf([a, b])",
    },
    {
      name: "an options object",
      make: () => allOf(a(), { maxWaitMs: 10 } as never),
      message:
        "allOf: part 1 must be a Limiter, got an object; allOf takes no options: give each limiter its own",
    },
    {
      name: "a non-limiter class instance",
      make: () => allOf(a(), new Map() as never),
      message: "allOf: part 1 must be a Limiter, got an object",
    },
  ])("$name: a TypeError that says what to pass", ({ make, message }) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(message);
  });
});

describe("the Redis wrappers check the client library", () => {
  test.each([
    { name: "fromIoredis given an empty object", make: () => fromIoredis({} as never) },
    { name: "fromIoredis given null", make: () => fromIoredis(null as never) },
    { name: "fromNodeRedis given an empty object", make: () => fromNodeRedis({} as never) },
    { name: "fromNodeRedis given a string", make: () => fromNodeRedis("redis://x" as never) },
  ])("$name is a TypeError", ({ make }) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(/client must be an? (ioredis|node-redis) client/);
  });

  test("a wrapper given an adapter says to pass the adapter as it is", () => {
    expect(() => fromNodeRedis(client as never)).toThrow(
      "fromNodeRedis: this is already a RedisLike adapter (evalSha, evalScript): pass it as the limiter's client as it is",
    );
  });
});

describe("optionNames", () => {
  interface Two {
    readonly a: number;
    readonly b?: string | undefined;
  }
  test("lists the names of an interface, checked both ways by tsc", () => {
    expect(optionNames<Two>()(["a", "b"])).toEqual(["a", "b"]);
    // @ts-expect-error "b" is an option of Two missing from the list
    optionNames<Two>()(["a"]);
    // @ts-expect-error "c" is not an option of Two
    optionNames<Two>()(["a", "b", "c"]);
  });
});
