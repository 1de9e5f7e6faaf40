import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  type RedisLimiter,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { EXPLICIT_CLOCK_MIN_TTL_MS } from "../../src/redis/lua/common.js";
import {
  deleteTestKeys,
  ioredisAdapter,
  keyOf,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

// Expiry on the server's clock (the production mode): every key has a TTL, and it ends
// when the state becomes fresh. Redis keeps expiry times in whole milliseconds and the
// scripts time requests to the microsecond, so a key expires at the first whole ms at
// or after the fresh instant, and PTTL (counted from the current whole ms) can read one
// more than the time until fresh rounded up.

const redis = useRedis();
let c: TestClient;
beforeAll(async () => {
  if (redis.available) c = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (c) await deleteTestKeys(c);
  await c?.close();
});

/** Redis's clock in ms (microsecond resolution). */
async function serverNow(): Promise<number> {
  const [s, us] = (await c.command("TIME")) as [string, string];
  return Number(s) * 1000 + Number(us) / 1000;
}

const HOUR = 3_600_000;
type Op = readonly ["consume" | "peek" | "reset", number];

const CASES: readonly {
  name: string;
  make: (client: RedisLike, prefix: string) => RedisLimiter;
  ops: readonly Op[];
}[] = [
  {
    name: "RedisTokenBucket",
    make: (client, prefix) =>
      new RedisTokenBucket({ client, prefix, capacity: 3, refillPerSecond: 0.5 }),
    ops: [
      ["peek", 1],
      ["consume", 1],
      ["consume", 1.5],
      ["consume", 5],
      ["peek", 1],
      ["consume", 0.5],
      ["consume", 1],
      ["reset", 0],
      ["consume", 3],
    ],
  },
  {
    name: "RedisLeakyBucket",
    make: (client, prefix) =>
      new RedisLeakyBucket({ client, prefix, capacity: 3, leakPerSecond: 0.5 }),
    ops: [
      ["consume", 2],
      ["consume", 1],
      ["consume", 1],
      ["peek", 0.5],
      ["reset", 0],
      ["consume", 0.25],
    ],
  },
  {
    name: "RedisFixedWindow",
    make: (client, prefix) => new RedisFixedWindow({ client, prefix, limit: 3, windowMs: HOUR }),
    ops: [
      ["peek", 1],
      ["consume", 1],
      ["consume", 1],
      ["consume", 2],
      ["consume", 1],
      ["reset", 0],
      ["consume", 0.5],
    ],
  },
  {
    name: "RedisSlidingWindowLog",
    make: (client, prefix) =>
      new RedisSlidingWindowLog({ client, prefix, limit: 3, windowMs: 5000 }),
    ops: [
      ["peek", 1],
      ["consume", 1],
      ["consume", 1],
      ["consume", 2],
      ["consume", 0.5],
      ["reset", 0],
      ["consume", 1],
    ],
  },
  {
    name: "RedisSlidingWindowCounter",
    make: (client, prefix) =>
      new RedisSlidingWindowCounter({ client, prefix, limit: 3, windowMs: HOUR }),
    ops: [
      ["peek", 1],
      ["consume", 1],
      ["consume", 1.5],
      ["consume", 2],
      ["reset", 0],
      ["consume", 1],
    ],
  },
];

describe.skipIf(!redis.available)("expiry on the server's clock", () => {
  test.each(CASES)(
    "$name: after every operation each key has 0 < PTTL <= time until fresh",
    async ({ make, ops }) => {
      const prefix = uniquePrefix();
      const limiter = make(c.client, prefix);
      for (const [i, [op, cost]] of ops.entries()) {
        const before = await serverNow();
        const d = op === "reset" ? undefined : await limiter[op]("k", cost);
        if (op === "reset") await limiter.reset("k");
        if (d?.allowed && op === "consume" && cost > 0) {
          // Lossless: the key outlives the state it holds.
          const expireAt = Number(await c.command("PEXPIRETIME", keyOf(limiter, "k")));
          expect(expireAt, `step ${i}`).toBeGreaterThanOrEqual(before + d.resetAfterMs);
        }
        const untilFresh = (await limiter.peek("k", 0)).resetAfterMs;
        const keys = (await c.command("KEYS", `${prefix}*`)) as string[];
        if (untilFresh === 0) {
          expect(keys, `step ${i}: a fresh state has no key`).toEqual([]);
          continue;
        }
        expect(keys, `step ${i}`).toEqual([keyOf(limiter, "k")]);
        const pttl = Number(await c.command("PTTL", keyOf(limiter, "k")));
        expect(pttl, `step ${i}: PTTL`).toBeGreaterThan(0);
        expect(pttl, `step ${i}: PTTL`).toBeLessThanOrEqual(Math.ceil(untilFresh) + 1);
      }
    },
  );

  test("steady traffic does not extend a fixed window: every hit keeps the key's end at the window's end", async () => {
    const prefix = uniquePrefix();
    const window = new RedisFixedWindow({ client: c.client, prefix, limit: 100, windowMs: HOUR });
    const ends = new Set<number>();
    for (let i = 0; i < 20; i++) {
      await window.consume("k");
      ends.add(Number(await c.command("PEXPIRETIME", keyOf(window, "k"))));
    }
    // One end for all hits (unless this test straddles the top of an hour: then two).
    expect(ends.size).toBeLessThanOrEqual(2);
    for (const end of ends) expect(end % HOUR, "ends on a window boundary").toBe(0);
    const last = [...ends].pop()!;
    expect(last - (await serverNow())).toBeLessThanOrEqual(HOUR);
  });

  test("a sliding counter's key outlives the current window: the previous window stays readable to its end", async () => {
    const prefix = uniquePrefix();
    const counter = new RedisSlidingWindowCounter({
      client: c.client,
      prefix,
      limit: 100,
      windowMs: HOUR,
    });
    await counter.consume("k", 10);
    const now = await serverNow();
    const end = Number(await c.command("PEXPIRETIME", keyOf(counter, "k")));
    const currentWindowEnd = (Math.floor(now / HOUR) + 1) * HOUR;
    expect(end).toBe(currentWindowEnd + HOUR);
  });

  test("a sliding counter, explicit time: at the last instant of the next window the previous one still counts", async () => {
    let t = 999;
    const counter = new RedisSlidingWindowCounter({
      client: c.client,
      prefix: uniquePrefix(),
      limit: 10,
      windowMs: 1000,
      clock: () => t,
      maxTtlMs: 60_000,
    });
    await counter.consume("k", 10);
    t = 1999; // window 1, e = 999: the previous window weighs 10 * 1 / 1000
    expect(await counter.peek("k", 0)).toMatchObject({ remaining: 9, resetAfterMs: 1 });
    expect((await counter.consume("k", 10)).allowed).toBe(false);
    t = 2000;
    expect(await counter.peek("k", 0)).toMatchObject({ remaining: 10, resetAfterMs: 0 });
  });

  test("a key never lives without an expiry, even at a rate of 0 (capped by maxTtlMs)", async () => {
    const prefix = uniquePrefix();
    const quota = new RedisTokenBucket({
      client: c.client,
      prefix,
      capacity: 5,
      refillPerSecond: 0,
      maxTtlMs: 90_000,
    });
    expect((await quota.consume("k")).resetAfterMs).toBe(Number.POSITIVE_INFINITY);
    const pttl = Number(await c.command("PTTL", keyOf(quota, "k")));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(90_000);
  });

  test.each([
    {
      name: "RedisFixedWindow",
      make: (prefix: string) =>
        new RedisFixedWindow({
          client: c.client,
          prefix,
          limit: 10,
          windowMs: 10 * HOUR,
          maxTtlMs: 90_000,
        }),
    },
    {
      name: "RedisSlidingWindowCounter",
      make: (prefix: string) =>
        new RedisSlidingWindowCounter({
          client: c.client,
          prefix,
          limit: 10,
          windowMs: 10 * HOUR,
          maxTtlMs: 90_000,
        }),
    },
  ])(
    "$name: a window longer than maxTtlMs: each write in the window sets the capped expiry again (it keeps no earlier one)",
    async ({ make }) => {
      // A window's later writes keep the key's expiry (KEEPTTL) only where the first set it
      // to the window's end; capped by maxTtlMs, it counts from each write, as before.
      const limiter = make(uniquePrefix());
      await limiter.consume("k");
      const first = Number(await c.command("PEXPIRETIME", keyOf(limiter, "k")));
      let second = first;
      // Until the server's clock has moved a whole ms past the first write.
      for (let i = 0; second <= first && i < 100_000; i++) {
        const before = await serverNow();
        await limiter.consume("k");
        second = Number(await c.command("PEXPIRETIME", keyOf(limiter, "k")));
        expect(second).toBeGreaterThanOrEqual(Math.floor(before) + 90_000);
      }
      expect(second).toBeGreaterThan(first);
    },
  );

  test("a fixed window's write after one capped by maxTtlMs sets the key's expiry to the window's end, not the capped one", async () => {
    // The state a capped write left 50 s ago: the window ends in 50 s, the key in 40 s
    // (written 100 s before the end with maxTtlMs 90 s). Keeping that expiry (KEEPTTL) would
    // forget the window's count 10 s early.
    const window = new RedisFixedWindow({
      client: c.client,
      prefix: uniquePrefix(),
      limit: 10,
      windowMs: 10 * HOUR,
      maxTtlMs: 90_000,
    });
    const key = keyOf(window, "k");
    const now = await serverNow();
    const endAt = Math.floor(now) + 50_000;
    await c.command(
      "EVAL",
      "redis.call('SET', KEYS[1], struct.pack('<ddd', tonumber(ARGV[1]), 3, tonumber(ARGV[2])), 'PXAT', ARGV[3])",
      "1",
      key,
      String(endAt),
      String(endAt - 100_000),
      String(endAt - 10_000),
    );
    expect(await window.consume("k")).toMatchObject({ allowed: true, remaining: 6 });
    expect(Number(await c.command("PEXPIRETIME", key))).toBe(endAt);
  });

  test("regression: explicit-clock keys expired on the real clock after their logical idle time; now they live at least 60 s", async () => {
    const prefix = uniquePrefix();
    const bucket = new RedisTokenBucket({
      client: c.client,
      prefix,
      capacity: 5,
      refillPerSecond: 1000,
      clock: () => 0,
      maxTtlMs: 30_000,
    });
    await bucket.consume("k");
    const pttl = Number(await c.command("PTTL", keyOf(bucket, "k")));
    expect(pttl).toBeGreaterThan(1000); // not the 1 ms the bucket takes to refill
    expect(pttl).toBeLessThanOrEqual(30_000);
  });

  // With an explicit clock a key lives until fresh counted on the server's clock from its
  // write (PX), never less than EXPLICIT_CLOCK_MIN_TTL_MS, never more than maxTtlMs.
  test.each([
    {
      name: "regression: a one-shot fixed window of 200 ms lives 60 s, not maxTtlMs (365 days)",
      make: (client: RedisLike, prefix: string) =>
        new RedisFixedWindow({ client, prefix, limit: 1, windowMs: 200, clock: () => 1_000 }),
      ttlMs: EXPLICIT_CLOCK_MIN_TTL_MS,
    },
    {
      name: "a bucket fresh in 120 s lives 120 s",
      make: (client: RedisLike, prefix: string) =>
        new RedisTokenBucket({
          client,
          prefix,
          capacity: 5,
          refillPerSecond: 1 / 120,
          clock: () => 1_000,
        }),
      ttlMs: 120_000,
    },
    {
      name: "a sliding counter of 100 s windows lives to the end of the next window",
      make: (client: RedisLike, prefix: string) =>
        new RedisSlidingWindowCounter({
          client,
          prefix,
          limit: 3,
          windowMs: 100_000,
          clock: () => 50_000,
        }),
      ttlMs: 150_000,
    },
    {
      name: "a sliding log of 90 s lives 90 s",
      make: (client: RedisLike, prefix: string) =>
        new RedisSlidingWindowLog({ client, prefix, limit: 3, windowMs: 90_000, clock: () => 0 }),
      ttlMs: 90_000,
    },
  ])("explicit clock: $name", async ({ make, ttlMs }) => {
    const limiter = make(c.client, uniquePrefix());
    await limiter.consume("k");
    const pttl = Number(await c.command("PTTL", keyOf(limiter, "k")));
    expect(pttl).toBeLessThanOrEqual(ttlMs);
    expect(pttl).toBeGreaterThan(ttlMs - 5_000);
  });
});
