import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../src/algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Receipt } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import {
  RedisFixedWindow,
  RedisLeakyBucket,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import {
  deleteTestKeys,
  ioredisAdapter,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

// Receipts through a Redis limiter give back what the in-memory limiter gives back, step by
// step, against a private redis-server with an explicit clock: the three corners where the
// Redis state once knew less than memory (a bucket's refunds since the charge, the sliding
// log's entry of the charge, a reset of the key), each beside its in-memory twin.

const redis = useRedis();
let conn: TestClient;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});

const maxTtlMs = 60_000;
const common = (clock: () => number, name: string) => ({
  client: conn.client,
  clock,
  prefix: uniquePrefix(name),
  maxTtlMs,
});

describe.skipIf(!redis.available)("Redis receipts give back what memory gives back", () => {
  test.each([
    { name: "RedisTokenBucket", leaky: false },
    { name: "RedisLeakyBucket", leaky: true },
  ])(
    "a bucket receipt gives nothing back after a refund by key took its units ($name)",
    async ({ leaky }) => {
      // Capacity 10, 1 token a second. 5 charged, 3 consumed (so the bucket is not full again
      // after the refund by key), 5 given back by key, then the charge's receipt: the refund
      // by key repaid the oldest units first, the 5 charged, so the receipt has nothing left.
      // Before, the receipt gave back 5 more: 10 given back for 5 charged.
      const clock = manualClock(1_000);
      const options = { capacity: 10, ...(leaky ? { leakPerSecond: 1 } : { refillPerSecond: 1 }) };
      const memory = leaky
        ? new LeakyBucket({ capacity: 10, leakPerSecond: 1, clock })
        : new TokenBucket({ capacity: 10, refillPerSecond: 1, clock });
      const shared = leaky
        ? new RedisLeakyBucket({ ...common(clock, "bucket-key"), ...options } as never)
        : new RedisTokenBucket({ ...common(clock, "bucket-key"), ...options } as never);
      const steps = [
        ["charge", 5],
        ["consume", 3],
        ["refundKey", 5],
        ["refundReceipt", 5],
        ["peek", 10],
      ] as const;
      const mine: { allowed: boolean }[] = [];
      const theirs: { allowed: boolean }[] = [];
      for (const [i, [op, n]] of steps.entries()) {
        const where = `step ${i} ${op}(${n})`;
        if (op === "charge") {
          mine.push(memory.charge(n));
          theirs.push(await shared.charge("k", n));
        } else if (op === "consume") {
          const { source: _, ...decision } = await shared.consume("k", n);
          expect(decision, where).toEqual(memory.consume(n));
        } else if (op === "refundKey") {
          expect(await shared.refund("k", n), where).toBe(memory.refund(n));
        } else if (op === "refundReceipt") {
          const given = memory.refund(mine[0] as never);
          expect(given, `${where}: memory`).toBe(0);
          expect(await shared.refund(theirs[0] as never), where).toBe(given);
        } else {
          const { source: _, ...decision } = await shared.peek("k", n);
          expect(decision, where).toEqual(memory.peek(n));
        }
      }
    },
  );

  test("a bucket receipt subtracts every refund of the key since its charge, not only its own", async () => {
    // The in-memory rule's example (docs/semantics.md#receipts): capacity 10, 1 per ms. 6 and
    // 4 charged at 0, the 6 given back, 10 charged at 5 ms, then the 4's receipt: the refill
    // already repaid it, so it gives nothing (else 14 act at 5 ms).
    const clock = manualClock(0);
    const memory = new TokenBucket({ capacity: 10, refillPerSecond: 1000, clock });
    const shared = new RedisTokenBucket({
      ...common(clock, "bucket-others"),
      capacity: 10,
      refillPerSecond: 1000,
    });
    const m6 = memory.charge(6);
    const m4 = memory.charge(4);
    const r6 = await shared.charge("k", 6);
    const r4 = await shared.charge("k", 4);
    expect(await shared.refund(r6)).toBe(memory.refund(m6));
    clock.set(5);
    expect((await shared.charge("k", 10)).allowed).toBe(memory.charge(10).allowed);
    const given = memory.refund(m4);
    expect(given).toBe(0);
    expect(await shared.refund(r4)).toBe(given);
  });

  test("a log receipt refunds its own entry, not the newest", async () => {
    // Limit 10 per 1 s. 3 charged at 0 (leaves at 1000), 4 at 100 (leaves at 1100); the
    // first receipt given back: memory takes the 3 out of the entry at 0, so at 1000 the 4
    // still count and 6 fit. Before, Redis found only the newest entry and gave nothing
    // back (so 3 fewer fit until 1000); had it taken the newest, the 4 would have left early.
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit: 10, windowMs: 1000, clock });
    const shared = new RedisSlidingWindowLog({
      ...common(clock, "log-own"),
      limit: 10,
      windowMs: 1000,
    });
    const m3 = memory.charge(3);
    const r3 = await shared.charge("k", 3);
    clock.set(100);
    memory.charge(4);
    await shared.charge("k", 4);
    clock.set(200);
    const given = memory.refund(m3, 2);
    expect(given).toBe(2);
    expect(await shared.refund(r3, 2)).toBe(given);
    for (const [at, cost] of [
      [200, 5],
      [200, 6],
      [1000, 6],
      [1000, 7],
      [1100, 9],
      [1100, 10],
    ] as const) {
      clock.set(at);
      const { source: _, ...decision } = await shared.peek("k", cost);
      expect(decision, `peek(${cost}) at ${at}`).toEqual(memory.peek(cost));
    }
    // The rest of the receipt, then nothing more.
    expect(await shared.refund(r3)).toBe(memory.refund(m3));
  });

  test("a log receipt gives back nothing of a later charge after a refund by key took its units", async () => {
    // Limit 10 per 1 s: 3 charged at 0, refund("k", 3) takes that entry (the newest), 4
    // charged at 100. Before, the first receipt then found the next entry (the 4's) and gave
    // back 3 of them, in memory and in Redis: 7 could act where 10 - 4 = 6 fit. Then the same
    // at one instant (the new entry has the old one's leave time), and two receipts sharing
    // an entry that a refund by key cut.
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit: 10, windowMs: 1000, clock });
    const shared = new RedisSlidingWindowLog({
      ...common(clock, "log-gone"),
      limit: 10,
      windowMs: 1000,
    });
    const both = async (cost: number) =>
      [memory.charge(cost), await shared.charge("k", cost)] as const;
    const byKey = async (cost: number) => {
      const given = memory.refund(cost);
      expect(await shared.refund("k", cost)).toBe(given);
      return given;
    };
    const through = async ([m, r]: readonly [Receipt, Receipt], units?: number) => {
      const given = memory.refund(m, units);
      expect(await shared.refund(r, units)).toBe(given);
      return given;
    };
    const same = async (cost: number) => {
      const { source: _, ...decision } = await shared.peek("k", cost);
      expect(decision, `peek(${cost}) at ${clock()}`).toEqual(memory.peek(cost));
      return decision;
    };
    const first = await both(3);
    expect(await byKey(3)).toBe(3);
    clock.set(100);
    const later = await both(4);
    expect(await through(first)).toBe(0);
    expect((await same(0)).remaining).toBe(6);
    expect(await through(later, 1)).toBe(1); // its own entry still gives back
    clock.set(300);
    const again = await both(2);
    expect(await byKey(2)).toBe(2);
    const sameInstant = await both(2); // the same leave time as the entry given back
    expect(await through(again)).toBe(0);
    expect((await same(0)).remaining).toBe(5);
    expect(await through(sameInstant)).toBe(2);
    clock.set(400);
    const a = await both(1);
    const b = await both(2); // one entry of 3
    expect(await byKey(2)).toBe(2);
    expect(await through(b)).toBe(1); // what the entry still holds
    expect(await through(a)).toBe(0);
    await both(1);
    expect(await through(a)).toBe(0);
    for (const at of [400, 1000, 1100, 1300, 1400]) {
      clock.set(at);
      await same(0);
      await same(3);
    }
  });

  test("a bucket receipt from before reset gives nothing back", async () => {
    // Capacity 10, 1 token a second: 5 charged, the key reset, 8 charged again at once, then
    // the first receipt: memory gives nothing back (the reset forgot its units). Before,
    // Redis gave back 5 of the new charge's units: 13 in the same instant at capacity 10.
    const clock = manualClock(0);
    const memory = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }));
    const shared = new RedisTokenBucket({
      ...common(clock, "bucket-reset"),
      capacity: 10,
      refillPerSecond: 1,
    });
    const mine = memory.charge("k", 5);
    const theirs = await shared.charge("k", 5);
    memory.reset("k");
    await shared.reset("k");
    expect((await shared.charge("k", 8)).allowed).toBe(memory.charge("k", 8).allowed);
    const given = memory.refund(mine);
    expect(given).toBe(0);
    expect(await shared.refund(theirs)).toBe(given);
    expect((await shared.peek("k", 3)).allowed).toBe(false);
  });

  test("a block keeps the key's ledger: a receipt gives back through it", async () => {
    const clock = manualClock(0);
    const shared = new RedisTokenBucket({
      ...common(clock, "bucket-block"),
      capacity: 10,
      refillPerSecond: 0,
    });
    const receipt = await shared.charge("k", 5);
    await shared.block("k", 1_000);
    expect(await shared.refund(receipt, 2)).toBe(2);
    clock.set(2_000);
    await shared.consume("k", 1); // a consume after the block keeps the ledger too
    expect(await shared.refund(receipt)).toBe(3);
    expect((await shared.peek("k", 0)).remaining).toBe(9);
  });

  test("a sliding-counter receipt from before reset gives nothing back", async () => {
    // Limit 5 per 1 s, as the fixed window below: before, the first receipt took its 5 off
    // the count charged after the reset, in the same window.
    const clock = manualClock(0);
    const memory = new KeyedLimiter(new SlidingWindowCounter({ limit: 5, windowMs: 1000, clock }));
    const shared = new RedisSlidingWindowCounter({
      ...common(clock, "counter-reset"),
      limit: 5,
      windowMs: 1000,
    });
    const mine = memory.charge("k", 5);
    const theirs = await shared.charge("k", 5);
    memory.reset("k");
    await shared.reset("k");
    clock.set(10);
    expect((await shared.charge("k", 5)).allowed).toBe(memory.charge("k", 5).allowed);
    const given = memory.refund(mine);
    expect(given).toBe(0);
    expect(await shared.refund(theirs)).toBe(given);
    const { source: _, ...decision } = await shared.consume("k", 1);
    expect(decision).toEqual(memory.consume("k", 1));
    expect(decision.allowed).toBe(false);
  });

  test("a fixed-window receipt from before reset gives nothing back", async () => {
    // Limit 5 per 1 s: 5 charged, the key reset, 5 charged again in the same window, then
    // the first receipts: memory gives nothing back (the reset forgot what they counted).
    // Before, Redis took them off the new count: 10 passed in one window at limit 5.
    const clock = manualClock(0);
    const memory = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 1000, clock }));
    const shared = new RedisFixedWindow({
      ...common(clock, "fixed-reset"),
      limit: 5,
      windowMs: 1000,
    });
    const mine = [memory.charge("k", 5)];
    const theirs = [await shared.charge("k", 5)];
    memory.reset("k");
    await shared.reset("k");
    clock.set(10);
    mine.push(memory.charge("k", 5));
    theirs.push(await shared.charge("k", 5));
    expect(await shared.refund(theirs[0]!)).toBe(memory.refund(mine[0]!));
    expect(memory.refund(mine[0]!)).toBe(0);
    clock.set(20);
    const { source: _, ...decision } = await shared.consume("k", 1);
    expect(decision).toEqual(memory.consume("k", 1));
    expect(decision.allowed).toBe(false);
  });
});

describe.skipIf(!redis.available)("a receipt refunded twice at once", () => {
  test.each([
    { name: "RedisSlidingWindowLog", make: RedisSlidingWindowLog },
    { name: "RedisFixedWindow", make: RedisFixedWindow },
    { name: "RedisSlidingWindowCounter", make: RedisSlidingWindowCounter },
  ])(
    "gives back no more than it charged, and its neighbour's units stay its neighbour's ($name)",
    async ({ name, make }) => {
      // Two charges at one instant (3 then 2 units, one log entry, one window). Refunds of
      // the first receipt sent together each asked its 3 units before either answer came
      // back: the second took the neighbour's 2, so one receipt gave back 5 for 3 charged.
      const clock = manualClock(1_000);
      const limiter = new make({ ...common(clock, name), limit: 5, windowMs: 60_000 });
      const first = await limiter.charge("k", 3);
      const second = await limiter.charge("k", 2);
      const given = await Promise.all([
        limiter.refund(first),
        limiter.refund(first),
        limiter.refund(first),
      ]);
      expect(
        given.reduce((a, b) => a + b, 0),
        `given ${given}`,
      ).toBe(3);
      expect(first.refunded).toBe(3);
      expect(await limiter.refund(second), "the neighbour's own units").toBe(2);
    },
  );
});
