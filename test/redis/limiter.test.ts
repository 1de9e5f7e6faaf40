import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import {
  type FailurePolicy,
  RateLimitStoreError,
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
  type StoreFailureEvent,
  StoreTimeoutError,
} from "../../src/redis/index.js";
import { PROBE_DEADLINE } from "../../src/redis/server-clock.js";
import { FAIL_CLOSED_RETRY_AFTER_MS } from "../../src/store/policy.js";
import { scriptReply } from "../support/reply-floats.js";

/** A client that fails the test if the limiter ever calls it. */
const untouchable: RedisLike = {
  evalSha: () => {
    throw new Error("no call expected");
  },
  evalScript: () => {
    throw new Error("no call expected");
  },
};

/** A client whose every call rejects with `error`. */
function failing(error: unknown): RedisLike {
  return {
    evalSha: () => Promise.reject(error),
    evalScript: () => Promise.reject(error),
  };
}

/**
 * The reply to the limiter's clock probe (its first call on a client: the decision script
 * with a deadline long past), `{-1, serverNowMs}`; undefined for any other call.
 */
function probeReply(args: readonly string[]): unknown[] | undefined {
  return args[args.length - 1] === PROBE_DEADLINE ? [-1, Date.now()] : undefined;
}

/**
 * A client answering each call with the next reply (a function may throw); the clock
 * probe, when it comes first, is answered as Redis would.
 */
function scripted(...replies: (unknown | (() => unknown))[]): RedisLike {
  let first = true;
  const next = async (_: unknown, _keys: unknown, args: readonly string[]) => {
    const probe = first ? probeReply(args) : undefined;
    first = false;
    if (probe !== undefined) return probe;
    const r = replies.shift();
    return typeof r === "function" ? (r as () => unknown)() : r;
  };
  return { evalSha: next, evalScript: next };
}

const base = { client: untouchable };

describe("constructor validation", () => {
  test.each([
    {
      name: "options null",
      make: () => new RedisTokenBucket(null as never),
      error: TypeError,
      message:
        "RedisTokenBucket: options must be an object, got null; for example: new RedisTokenBucket({ client: fromIoredis(redis), capacity: 10, refillPerSecond: 5 })",
    },
    {
      name: "capacity a string",
      make: () => new RedisTokenBucket({ ...base, capacity: "10" as never, refillPerSecond: 1 }),
      error: TypeError,
      message: 'RedisTokenBucket: capacity must be a finite number > 0, got "10" (string)',
    },
    {
      name: "capacity 0, before a bad client",
      make: () => new RedisTokenBucket({ client: {} as never, capacity: 0, refillPerSecond: 1 }),
      error: RangeError,
      message: "RedisTokenBucket: capacity must be a finite number > 0, got 0",
    },
    {
      name: "refillPerSecond -1",
      make: () => new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: -1 }),
      error: RangeError,
      message: "RedisTokenBucket: refillPerSecond must be a finite number >= 0, got -1",
    },
    {
      name: "leakPerSecond NaN",
      make: () => new RedisLeakyBucket({ ...base, capacity: 1, leakPerSecond: Number.NaN }),
      error: RangeError,
      message: "RedisLeakyBucket: leakPerSecond must be a finite number >= 0, got NaN",
    },
    {
      name: "windowMs Infinity",
      make: () => new RedisFixedWindow({ ...base, limit: 1, windowMs: Number.POSITIVE_INFINITY }),
      error: RangeError,
      message: "RedisFixedWindow: windowMs must be a finite number > 0, got Infinity",
    },
    {
      name: "windowMs below 1 µs on Redis's clock (TIME counts microseconds)",
      make: () => new RedisFixedWindow({ ...base, limit: 1, windowMs: 0.0005 }),
      error: RangeError,
      message:
        "RedisFixedWindow: windowMs must be a finite number >= 0.001 on Redis's clock (TIME counts whole microseconds; pass a clock for shorter windows), got 0.0005",
    },
    {
      name: "windowMs 5e-324 on Redis's clock, before a bad client",
      make: () =>
        new RedisSlidingWindowCounter({ client: {} as never, limit: 1, windowMs: 5e-324 }),
      error: RangeError,
      message:
        "RedisSlidingWindowCounter: windowMs must be a finite number >= 0.001 on Redis's clock (TIME counts whole microseconds; pass a clock for shorter windows), got 5e-324",
    },
    {
      name: "limit -1",
      make: () => new RedisSlidingWindowLog({ ...base, limit: -1, windowMs: 1 }),
      error: RangeError,
      message: "RedisSlidingWindowLog: limit must be a finite number > 0, got -1",
    },
    {
      name: "windowMs a string",
      make: () => new RedisSlidingWindowCounter({ ...base, limit: 1, windowMs: "1" as never }),
      error: TypeError,
      message: 'RedisSlidingWindowCounter: windowMs must be a finite number > 0, got "1" (string)',
    },
    {
      name: "client missing",
      make: () =>
        new RedisTokenBucket({ client: undefined as never, capacity: 1, refillPerSecond: 1 }),
      error: TypeError,
      message:
        'RedisTokenBucket: missing option "client"; for example: new RedisTokenBucket({ client: fromIoredis(redis), capacity: 10, refillPerSecond: 5 })',
    },
    {
      name: "client not a RedisLike",
      make: () => new RedisTokenBucket({ client: {} as never, capacity: 1, refillPerSecond: 1 }),
      error: TypeError,
      message:
        "RedisTokenBucket: client must be a RedisLike (wrap a client with fromIoredis or fromNodeRedis), got an object",
    },
    {
      name: "a raw ioredis-shaped client",
      make: () =>
        new RedisTokenBucket({
          client: { evalsha() {}, eval() {} } as never,
          capacity: 1,
          refillPerSecond: 1,
        }),
      error: TypeError,
      message:
        "RedisTokenBucket: client must be a RedisLike (wrap a client with fromIoredis or fromNodeRedis), got an ioredis client: wrap it with fromIoredis(client)",
    },
    {
      name: "prefix a number",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, prefix: 1 as never }),
      error: TypeError,
      message: "RedisTokenBucket: prefix must be a string, got 1",
    },
    {
      name: "timeoutMs 0",
      make: () => new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, timeoutMs: 0 }),
      error: RangeError,
      message: "RedisTokenBucket: timeoutMs must be a finite number > 0, got 0",
    },
    {
      name: "timeoutMs beyond a timer",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, timeoutMs: 2 ** 31 }),
      error: RangeError,
      message: "RedisTokenBucket: timeoutMs must be at most 2147483647, got 2147483648",
    },
    {
      name: "failure 'fallback'",
      make: () =>
        new RedisTokenBucket({
          ...base,
          capacity: 1,
          refillPerSecond: 1,
          failure: "fallback" as never,
        }),
      error: RangeError,
      message: `RedisTokenBucket: failure must be 'local', 'open', 'closed', 'throw' or a fallback limiter (consume, peek, reset), got "fallback" (string)`,
    },
    {
      name: "failure a bare Limiter-less object",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, failure: {} as never }),
      error: TypeError,
      message:
        "RedisTokenBucket: failure must be 'local', 'open', 'closed', 'throw' or a fallback limiter (consume, peek, reset), got an object",
    },
    {
      name: "onError a number",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, onError: 1 as never }),
      error: TypeError,
      message: "RedisTokenBucket: onError must be a function, got 1",
    },
    {
      name: "onRecover a string",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, onRecover: "x" as never }),
      error: TypeError,
      message: 'RedisTokenBucket: onRecover must be a function, got "x" (string)',
    },
    {
      name: "maxTtlMs Infinity",
      make: () =>
        new RedisTokenBucket({
          ...base,
          capacity: 1,
          refillPerSecond: 1,
          maxTtlMs: Number.POSITIVE_INFINITY,
        }),
      error: RangeError,
      message: "RedisTokenBucket: maxTtlMs must be a finite number > 0, got Infinity",
    },
    {
      name: "clock a string",
      make: () =>
        new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1, clock: "x" as never }),
      error: TypeError,
      message:
        'RedisTokenBucket: clock must be a function returning milliseconds, got "x" (string)',
    },
  ])("$name", ({ make, error, message }) => {
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });

  test("a KeyedLimiter is a valid fallback", () => {
    const fallback = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    expect(
      new RedisTokenBucket({ ...base, capacity: 4, refillPerSecond: 1, failure: fallback }).failure,
    ).toBe(fallback);
  });
});

describe("window limiters: time fine enough for the window", () => {
  test("windowMs 0.001 on Redis's clock and any windowMs > 0 with a clock are accepted", () => {
    expect(new RedisFixedWindow({ ...base, limit: 1, windowMs: 0.001 }).windowMs).toBe(0.001);
    const clock = () => 0;
    expect(new RedisSlidingWindowLog({ ...base, limit: 1, windowMs: 1e-9, clock }).windowMs).toBe(
      1e-9,
    );
  });
});

describe("window limiters: a refused clock reading is not kept", () => {
  test("after a reading beyond the bound, a reading back in range is sent as is", async () => {
    const sent: string[] = [];
    const client: RedisLike = {
      evalSha: async (_sha, _keys, args) => {
        const probe = probeReply(args);
        if (probe !== undefined) return probe;
        sent.push(String(args[4]));
        // used 0; the 1 ms window holding the time ends at the next whole ms
        const now = Number(args[4]);
        return scriptReply([1], [0, Math.floor(now) + 1, now]);
      },
      evalScript: () => Promise.reject(new Error("no script load expected")),
    };
    let t = 1000;
    const window = new RedisFixedWindow({ client, limit: 2, windowMs: 1, clock: () => t });
    expect((await window.consume("k")).allowed).toBe(true);
    t = 1e16;
    await expect(window.consume("k")).rejects.toThrow(RangeError);
    t = 1000.5;
    expect((await window.consume("k")).resetAfterMs).toBe(0.5);
    expect(sent).toEqual(["1000", "1000.5"]);
  });

  test("a NaN reading still gets the limiter's own clock message", async () => {
    const window = new RedisSlidingWindowLog({
      ...base,
      limit: 1,
      windowMs: 1,
      clock: () => Number.NaN,
    });
    await expect(window.consume("k")).rejects.toThrow(
      "RedisSlidingWindowLog.consume: clock must return a finite number of milliseconds, got NaN",
    );
  });
});

describe("call validation rejects, never throws, and sends nothing", () => {
  const bucket = new RedisTokenBucket({ ...base, capacity: 1, refillPerSecond: 1 });
  const farClock = () => 1e16;
  const window = (
    Class:
      | typeof RedisFixedWindow
      | typeof RedisSlidingWindowLog
      | typeof RedisSlidingWindowCounter,
  ) => new Class({ ...base, limit: 2, windowMs: 1, clock: farClock });
  const below = (where: string) =>
    `${where}: windowMs 1 is below the clock's resolution at 10000000000000000 ms (a float step of 2 ms); use a larger windowMs or a clock with a smaller origin`;
  const nanClock = new RedisTokenBucket({
    ...base,
    capacity: 1,
    refillPerSecond: 1,
    clock: () => Number.NaN,
  });
  test.each([
    {
      name: "a negative cost",
      call: () => bucket.consume("k", -1),
      error: RangeError,
      message: "RedisTokenBucket.consume: cost must be a finite number >= 0, got -1",
    },
    {
      name: "an infinite cost",
      call: () => bucket.peek("k", Number.POSITIVE_INFINITY),
      error: RangeError,
      message: "RedisTokenBucket.peek: cost must be a finite number >= 0, got Infinity",
    },
    {
      name: "a string cost",
      call: () => bucket.allow("k", "1" as never),
      error: TypeError,
      message: 'RedisTokenBucket.allow: cost must be a finite number >= 0, got "1" (string)',
    },
    {
      name: "a number key",
      call: () => bucket.consume(1 as never),
      error: TypeError,
      message: "RedisTokenBucket.consume: key must be a string, got 1",
    },
    {
      name: "a null key to reset",
      call: () => bucket.reset(null as never),
      error: TypeError,
      message: "RedisTokenBucket.reset: key must be a string, got null",
    },
    // Regression: RedisFixedWindow at an explicit 1e16 ms with windowMs 1 answered allowed:false
    // with retryAfterMs 0; memory now throws there, and so does Redis, before sending.
    {
      name: "RedisFixedWindow: windowMs 1 below the float step of an explicit clock at 1e16",
      call: () => window(RedisFixedWindow).consume("k"),
      error: RangeError,
      message: below("RedisFixedWindow"),
    },
    {
      name: "RedisSlidingWindowLog: the same, from peek",
      call: () => window(RedisSlidingWindowLog).peek("k"),
      error: RangeError,
      message: below("RedisSlidingWindowLog"),
    },
    {
      name: "RedisSlidingWindowCounter: the same, from allow",
      call: () => window(RedisSlidingWindowCounter).allow("k"),
      error: RangeError,
      message: below("RedisSlidingWindowCounter"),
    },
    {
      name: "an explicit clock reading NaN",
      call: () => nanClock.consume("k"),
      error: RangeError,
      message:
        "RedisTokenBucket.consume: clock must return a finite number of milliseconds, got NaN",
    },
  ])("$name", async ({ call, error, message }) => {
    let pending: Promise<unknown> | undefined;
    expect(() => {
      pending = call();
    }).not.toThrow();
    const reason = await pending?.catch((e: unknown) => e);
    expect(reason).toBeInstanceOf(error);
    expect((reason as Error).message).toBe(message);
  });
});

describe("failure policy", () => {
  const cause = new Error("connect ECONNREFUSED 127.0.0.1:1");
  const make = (
    failure: FailurePolicy | undefined,
    events: StoreFailureEvent[],
    client = failing(cause),
  ) =>
    new RedisTokenBucket({
      client,
      capacity: 10,
      refillPerSecond: 1,
      ...(failure === undefined ? {} : { failure }),
      // The first failure opens the circuit, so onError hears of it.
      circuit: { failuresToOpen: 1 },
      onError: (event) => events.push(event),
    });

  test("'throw' rejects with RateLimitStoreError, cause set, and reports it", async () => {
    const events: StoreFailureEvent[] = [];
    const error = await make("throw", events)
      .consume("k")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect(error).toBeInstanceOf(Error);
    const e = error as RateLimitStoreError;
    expect(e.name).toBe("RateLimitStoreError");
    expect(e.message).toBe(
      "RedisTokenBucket.consume: Redis failed: connect ECONNREFUSED 127.0.0.1:1",
    );
    expect(e.cause).toBe(cause);
    expect(e.operation).toBe("RedisTokenBucket.consume");
    expect(e.timedOut).toBe(false);
    expect(events).toEqual([
      { error: e, operation: "consume", key: "k", outcome: "throw", node: undefined },
    ]);
  });

  test("'open' fails open and says so, once for the circuit", async () => {
    const events: StoreFailureEvent[] = [];
    const limiter = make("open", events);
    expect(await limiter.consume("k", 2)).toEqual({
      allowed: true,
      limit: 10,
      remaining: 8,
      retryAfterMs: 0,
      resetAfterMs: 0,
      source: "open",
    });
    expect(await limiter.peek("k", 20)).toMatchObject({
      allowed: true,
      remaining: 0,
      source: "open",
    });
    expect(await limiter.allow("k")).toBe(true);
    expect(events.map((e) => [e.operation, e.outcome])).toEqual([["consume", "open"]]);
  });

  test("'closed' fails closed and says so", async () => {
    const events: StoreFailureEvent[] = [];
    const limiter = make("closed", events);
    expect(await limiter.consume("k")).toEqual({
      allowed: false,
      limit: 10,
      remaining: 0,
      retryAfterMs: FAIL_CLOSED_RETRY_AFTER_MS,
      resetAfterMs: 0,
      source: "closed",
    });
    expect(await limiter.allow("k")).toBe(false);
    expect(events.map((e) => e.outcome)).toEqual(["closed"]);
  });

  test("a fallback limiter decides locally, per key, and peek takes nothing", async () => {
    const events: StoreFailureEvent[] = [];
    const fallback = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0 }));
    const limiter = make(fallback, events);
    expect(await limiter.peek("a")).toMatchObject({
      allowed: true,
      remaining: 1,
      source: "local",
    });
    expect(await limiter.consume("a")).toMatchObject({
      allowed: true,
      remaining: 1,
      source: "local",
    });
    expect(await limiter.consume("a")).toMatchObject({
      allowed: true,
      remaining: 0,
      source: "local",
    });
    expect(await limiter.consume("a")).toMatchObject({
      allowed: false,
      limit: 2,
      retryAfterMs: Number.POSITIVE_INFINITY,
      source: "local",
    });
    expect(await limiter.consume("b")).toMatchObject({
      allowed: true,
      remaining: 1,
      source: "local",
    });
    expect(events).toHaveLength(1);
    expect(events.every((e) => e.outcome === "local" && e.error.cause === cause)).toBe(true);
  });

  test("reset rejects whatever the policy (a lost reset must not pass silently) and resets the fallback", async () => {
    const events: StoreFailureEvent[] = [];
    const fallback = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0 }));
    fallback.consume("k");
    const limiter = make(fallback, events);
    const error = await limiter.reset("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect((error as Error).message).toBe(
      "RedisTokenBucket.reset: Redis failed: connect ECONNREFUSED 127.0.0.1:1",
    );
    expect(fallback.peek("k", 0).remaining).toBe(1);
    expect(events.map((e) => [e.operation, e.outcome])).toEqual([["reset", "throw"]]);
  });

  test("an unexpected reply is a store failure, not a wrong answer", async () => {
    const events: StoreFailureEvent[] = [];
    const error = await make("throw", events, scripted("OK"))
      .consume("k")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect((error as Error).message).toBe(
      'RedisTokenBucket.consume: Redis failed: unexpected reply "OK" (string)',
    );
  });

  test("a script verdict that disagrees with the arithmetic is a store failure", async () => {
    const events: StoreFailureEvent[] = [];
    // 10 tokens available, yet the script says denied.
    const error = await make("throw", events, scripted(scriptReply([0], [10, 0])))
      .consume("k")
      .catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      "RedisTokenBucket.consume: Redis failed: script and decision disagree: script allowed=0",
    );
  });

  test("onRecover reports the first success after the circuit opened, once", async () => {
    const recovered: unknown[] = [];
    const limiter = new RedisTokenBucket({
      client: scripted(
        () => {
          throw cause;
        },
        () => {
          throw cause;
        },
        scriptReply([1], [10, 0]),
        scriptReply([1], [9, 0]),
      ),
      capacity: 10,
      refillPerSecond: 1,
      failure: "open",
      // Opens at the second failure; no cool-down, so the third call is the probe.
      circuit: { failuresToOpen: 2, coolDownMs: 0 },
      onRecover: (event) => recovered.push(event),
    });
    expect((await limiter.consume("k")).source).toBe("open");
    expect((await limiter.consume("k")).source).toBe("open");
    expect(await limiter.consume("k")).toMatchObject({ source: "redis", remaining: 9 });
    expect(await limiter.consume("k")).toMatchObject({ source: "redis", remaining: 8 });
    expect(recovered).toEqual([{ operation: "consume", failedCalls: 2, node: undefined }]);
  });

  describe("timeout", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    test("a call slower than timeoutMs is a failure with timedOut set", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const events: StoreFailureEvent[] = [];
      const hanging: RedisLike = {
        evalSha: () => new Promise(() => {}),
        evalScript: () => new Promise(() => {}),
      };
      const limiter = new RedisTokenBucket({
        client: hanging,
        capacity: 10,
        refillPerSecond: 1,
        timeoutMs: 50,
        failure: "closed",
        circuit: { failuresToOpen: 1 },
        onError: (event) => events.push(event),
      });
      const pending = limiter.consume("k");
      await vi.advanceTimersByTimeAsync(50);
      expect(await pending).toMatchObject({ allowed: false, source: "closed" });
      expect(events).toHaveLength(1);
      const error = events[0]!.error;
      expect(error.message).toBe("RedisTokenBucket.consume: Redis did not answer within 50 ms");
      expect(error.timedOut).toBe(true);
      expect(error.cause).toBeInstanceOf(StoreTimeoutError);
    });
  });
});
