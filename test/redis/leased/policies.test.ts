import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../../src/keyed/keyed-limiter.js";
import {
  LeasedTokenBucket,
  MemoryLeaseStore,
  RateLimitStoreError,
} from "../../../src/redis/index.js";
import type { LeasedTokenBucketOptions } from "../../../src/redis/leased/options.js";
import { manualClock } from "../../support/manual-clock.js";
import { manualScheduler } from "../../support/manual-scheduler.js";

function world(capacity: number, refillPerSecond: number) {
  const clock = manualClock(1000);
  const timers = manualScheduler(clock);
  const store = new MemoryLeaseStore({ capacity, refillPerSecond, clock });
  const limiter = (options: Partial<LeasedTokenBucketOptions> = {}) =>
    new LeasedTokenBucket({
      capacity,
      refillPerSecond,
      store,
      clock,
      scheduler: timers.schedule,
      ...options,
    });
  return { clock, timers, store, limiter };
}

/** A limiter whose key "k" holds a lease, then the store fails and the lease is spent. */
async function spentDuringOutage(options: Partial<LeasedTokenBucketOptions>) {
  const w = world(10, 1);
  const limiter = w.limiter({ initialCredit: 0, ...options });
  limiter.consume("k");
  await w.timers.advance(5);
  w.store.failing = true;
  for (let i = 0; i < 200; i++) {
    await w.timers.advance(5);
    let source: string;
    try {
      source = limiter.peek("k").source;
    } catch {
      break; // the 'throw' policy answers peek too
    }
    if (source !== "lease") break;
    limiter.consume("k");
  }
  return { w, limiter };
}

describe("LeasedTokenBucket failure policies", () => {
  test.each([
    ["open", true, "open"],
    ["closed", false, "closed"],
  ] as const)(
    "failure %s answers %s with source %s once the lease ran out",
    async (failure, allowed, source) => {
      const { limiter } = await spentDuringOutage({ failure });
      const d = limiter.consume("k");
      expect(d).toMatchObject({ allowed, source });
      expect(limiter.stats.fallbackDecisions).toBeGreaterThan(0);
    },
  );

  test("failure 'throw' throws a RateLimitStoreError from the decision", async () => {
    const { limiter } = await spentDuringOutage({ failure: "throw" });
    expect(() => limiter.consume("k")).toThrow(RateLimitStoreError);
  });

  test("a fallback limiter decides with source 'local'", async () => {
    const fallback = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0 }));
    const { limiter } = await spentDuringOutage({ failure: fallback });
    expect(limiter.consume("k")).toMatchObject({ allowed: true, source: "local" });
    expect(limiter.consume("k")).toMatchObject({ allowed: false, source: "local" });
  });
});

describe("LeasedTokenBucket local table", () => {
  test("a key flood during an outage does not hold the table once the keys went quiet", async () => {
    // One call per key while the store fails: each entry gets a fallback bucket. Before,
    // an entry with a fallback could never leave (not free, not evictable) and no exchange
    // cleared the outage, so after Redis came back the full table refused every new key.
    const w = world(10, 1);
    const limiter = w.limiter({ initialCredit: 0, maxKeys: 50 });
    await w.timers.advance(10);
    w.store.failing = true;
    for (let i = 0; i < 100; i++) {
      limiter.consume(`flood:${i}`);
      await w.timers.advance(1);
    }
    expect(limiter.size).toBe(50);
    expect(limiter.consume("newcomer")).toMatchObject({ allowed: false, source: "full" });
    await w.timers.advance(5000);
    w.store.failing = false;
    await w.timers.advance(60_000);
    expect(limiter.size).toBe(0);
    limiter.consume("newcomer");
    await w.timers.advance(50);
    expect(limiter.consume("newcomer")).toMatchObject({ allowed: true, source: "lease" });
  });

  test("what an idle key's fallback admitted is charged to the shared bucket once Redis answers again", async () => {
    const w = world(10, 0);
    const limiter = w.limiter({ initialCredit: 0, expectedProcesses: 1 });
    await w.timers.advance(10);
    w.store.failing = true;
    limiter.consume("k"); // denied: no lease yet; its exchange fails
    await w.timers.advance(10);
    expect(limiter.consume("k")).toMatchObject({ allowed: true, source: "local" });
    await w.timers.advance(5000);
    w.store.failing = false;
    await w.timers.advance(60_000);
    // The unit the fallback admitted (no refill) was charged, with no call of the key's own.
    expect(w.store.record("k").charged).toBe(1);
    expect(w.store.tokens("k")).toBe(9);
  });

  test("peek changes nothing: no entry, no call", async () => {
    const w = world(10, 1);
    const limiter = w.limiter();
    await w.timers.advance(1);
    const calls = w.store.roundTrips;
    expect(limiter.peek("new")).toMatchObject({ allowed: true, source: "credit" });
    expect(limiter.peek("new", 2)).toMatchObject({
      allowed: false,
      source: "pending",
      remaining: 0,
    });
    await w.timers.advance(10);
    expect(limiter.size).toBe(0);
    expect(w.store.roundTrips).toBe(calls);
  });

  test("a full table pushes out an entry without debt (its tokens go back), else refuses", async () => {
    const w = world(100, 0);
    const limiter = w.limiter({ initialCredit: 0, maxKeys: 2, maxLeaseShare: 0.5 });
    for (const key of ["a", "b"]) limiter.consume(key);
    await w.timers.advance(5);
    expect(limiter.consume("a").allowed).toBe(true);
    const heldByA = 100 - w.store.tokens("a");
    expect(heldByA).toBeGreaterThan(1);
    // "c" takes the place of "a", whose unused lease goes back with the next batch.
    limiter.consume("c");
    await w.timers.advance(5);
    expect(w.store.tokens("a")).toBeCloseTo(99, 9);
    expect(limiter.stats.evictedLossy + limiter.stats.evictedIdle).toBe(1);
    // A table whose entries all owe credit refuses a new key.
    const owing = w.limiter({ initialCredit: 1, maxKeys: 1 });
    w.store.failing = true;
    expect(owing.consume("x").source).toBe("credit");
    expect(owing.consume("y")).toMatchObject({ allowed: false });
    expect(owing.stats.refused).toBe(1);
  });

  test("an expired lease gives back what the key's rate does not need", async () => {
    const w = world(100, 0);
    const limiter = w.limiter({
      initialCredit: 0,
      leaseTtlMs: 1000,
      idleAfterMs: 60_000,
      maxLeaseShare: 0.5,
    });
    // A burst makes the lease large, then the key slows to one request per 300 ms.
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      if (limiter.allow("k")) admitted++;
      await w.timers.advance(1);
    }
    // Taken from the shared bucket and not spent: what this process sits on.
    const unspent = () => 100 - w.store.tokens("k") - admitted;
    expect(unspent()).toBeGreaterThan(10);
    for (let i = 0; i < 20; i++) {
      if (limiter.allow("k")) admitted++;
      await w.timers.advance(300);
    }
    expect(limiter.stats.tokensGivenBack).toBeGreaterThan(0);
    // About 1000 / 300 per second x leaseHorizonMs (1 s): a lease of 4 at most.
    expect(unspent()).toBeLessThanOrEqual(4);
  });

  test("reset gives the key's unused tokens back", async () => {
    const w = world(100, 0);
    const limiter = w.limiter({ initialCredit: 0, maxLeaseShare: 0.5 });
    limiter.consume("k");
    await w.timers.advance(5);
    limiter.consume("k");
    limiter.reset("k");
    await w.timers.advance(5);
    expect(w.store.tokens("k")).toBeCloseTo(99, 9);
    expect(limiter.size).toBe(0);
  });
});
