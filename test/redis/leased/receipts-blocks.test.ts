// Receipts, refunds and blocks of LeasedTokenBucket: step tables per source and path, on
// MemoryLeaseStore and on a real Redis (the same tables; no refill where the server's clock
// would decide, so every answer is exact), deterministic clock and timers.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TokenBucket } from "../../../src/algorithms/token-bucket.js";
import { BlockTable } from "../../../src/core/blocks.js";
import { settle as settleReceipt } from "../../../src/core/settle.js";
import { KeyedLimiter } from "../../../src/keyed/keyed-limiter.js";
import {
  type LeasedReceipt,
  LeasedTokenBucket,
  MemoryLeaseStore,
} from "../../../src/redis/index.js";
import type {
  LeaseExchange,
  LeaseRequest,
  LeaseStore,
} from "../../../src/redis/leased/exchange.js";
import { LeaseBlocks } from "../../../src/redis/leased/lease-blocks.js";
import type { LeasedTokenBucketOptions } from "../../../src/redis/leased/options.js";
import { RedisLeaseStore } from "../../../src/redis/leased/redis-store.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";
import { type ManualScheduler, manualScheduler, settle } from "../../support/manual-scheduler.js";
import {
  deleteTestKeys,
  ioredisAdapter,
  type TestClient,
  uniquePrefix,
} from "../../support/redis-clients.js";
import { useRedis } from "../../support/redis-server.js";

const redis = useRedis();
let conn: TestClient | undefined;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});

/**
 * A store that records its calls (so a test can wait for every answer) and fails on demand
 * (an outage, for either store).
 */
class Tracked implements LeaseStore {
  failing = false;
  private readonly calls = new Set<Promise<unknown>>();
  constructor(readonly inner: LeaseStore) {}
  groupOf(key: string): string {
    return this.inner.groupOf(key);
  }
  exchange(
    requests: readonly LeaseRequest[],
    processId: string,
    sequence: number,
  ): Promise<LeaseExchange> {
    return this.track(
      this.failing
        ? Promise.reject(new Error("store down"))
        : this.inner.exchange(requests, processId, sequence),
    );
  }
  heartbeat(
    processId: string,
    ttlMs: number,
    leave: boolean,
    sequence: number,
  ): ReturnType<LeaseStore["heartbeat"]> {
    return this.track(
      this.failing
        ? Promise.reject(new Error("store down"))
        : this.inner.heartbeat(processId, ttlMs, leave, sequence),
    );
  }
  /** Waits until every call made so far (and those their answers made) has settled. */
  async drain(): Promise<void> {
    while (this.calls.size > 0) {
      await Promise.allSettled([...this.calls]);
      await settle();
    }
  }
  private track<T>(call: Promise<T>): Promise<T> {
    this.calls.add(call);
    void call.then(
      () => this.calls.delete(call),
      () => this.calls.delete(call),
    );
    return call;
  }
}

interface World {
  readonly clock: ManualClock;
  readonly timers: ManualScheduler;
  readonly store: Tracked;
  /** A limiter (a process) on the world's store. */
  limiter(options?: Partial<LeasedTokenBucketOptions>): LeasedTokenBucket;
  /** Runs the timers `ms` forward, a batch window at a time, each answer in before the next. */
  run(ms: number): Promise<void>;
  /** Taken, given back and charged in all for `key` in the store. */
  record(key: string): Promise<{ taken: number; given: number; charged: number }>;
}

type StoreKind = "memory" | "redis";
const BATCH_MS = 5;

function world(kind: StoreKind, capacity: number, refillPerSecond: number): World {
  const clock = manualClock(1000);
  const timers = manualScheduler(clock);
  const prefix = uniquePrefix("lw");
  const memory =
    kind === "memory"
      ? new MemoryLeaseStore({ capacity, refillPerSecond, clock, scheduler: timers.schedule })
      : undefined;
  const inner: LeaseStore =
    memory ??
    new RedisLeaseStore({
      client: (conn as TestClient).client,
      keyPrefix: prefix,
      heartbeatKey: `${prefix}procs`,
      capacity,
      refillPerSecond,
      maxTtlMs: 600_000,
      record: true,
      timeoutMs: 10_000,
      staleMs: 2000,
      clock,
      scheduler: () => () => {}, // no call timeouts: a real server answers, the clock is manual
    });
  const store = new Tracked(inner);
  const limiters: LeasedTokenBucket[] = [];
  return {
    clock,
    timers,
    store,
    limiter: (options = {}) => {
      const l = new LeasedTokenBucket({
        capacity,
        refillPerSecond,
        store,
        clock,
        scheduler: timers.schedule,
        batchWindowMs: BATCH_MS,
        expectedProcesses: 2,
        ...options,
      });
      limiters.push(l);
      return l;
    },
    async run(ms) {
      for (let left = ms; left > 0; left -= BATCH_MS) {
        await timers.advance(Math.min(BATCH_MS, left));
        await store.drain();
      }
    },
    async record(key) {
      if (memory !== undefined) return memory.record(key);
      const fields = (await (conn as TestClient).command("HGETALL", `${prefix}${key}`)) as string[];
      const at = (name: string) => {
        const i = fields.indexOf(name);
        return i < 0 ? 0 : Number(fields[i + 1]);
      };
      return { taken: at("taken"), given: at("given"), charged: at("charged") };
    },
  };
}

const KINDS: StoreKind[] = ["memory", "redis"];

/** Tokens of `key`'s lease in `limiter` (its table entry), 0 without one. */
function leaseOf(limiter: LeasedTokenBucket, key: string): number {
  const entries = (limiter as unknown as { table: { entries: Map<string, { tokens: number }> } })
    .table.entries;
  return entries.get(key)?.tokens ?? 0;
}

for (const kind of KINDS) {
  describe.skipIf(kind === "redis" && !redis.available)(`refunds and receipts (${kind})`, () => {
    /** A limiter holding a lease of `key` (no refill: every answer exact on either store). */
    async function leased(capacity = 100, options: Partial<LeasedTokenBucketOptions> = {}) {
      const w = world(kind, capacity, 0);
      const limiter = w.limiter({ initialCredit: 1, ...options });
      expect(limiter.consume("k").source).toBe("credit");
      await w.run(BATCH_MS);
      return { w, limiter };
    }

    test("step table: a lease's receipt gives back its units into the lease at once, never twice (the shared bucket full)", async () => {
      const { w, limiter } = await leased();
      const lease = () => limiter.peek("k").remaining;
      const before = lease();
      const receipt = limiter.charge("k", 4);
      expect(receipt).toMatchObject({ allowed: true, source: "lease", units: 4, key: "k" });
      // [refund(receipt, units) -> given, receipt.refunded after, remaining after]
      const steps: [number | undefined, number, number, number][] = [
        [1, 1, 1, before - 3],
        [undefined, 3, 4, before], // the rest of it
        [undefined, 0, 4, before], // twice: nothing more
        [2, 0, 4, before],
      ];
      for (const [i, [units, given, refunded, remaining]] of steps.entries()) {
        const got = units === undefined ? limiter.refund(receipt) : limiter.refund(receipt, units);
        expect(got, `step ${i}`).toBe(given);
        expect(receipt.refunded, `step ${i}`).toBe(refunded);
        expect(lease(), `step ${i}`).toBe(remaining);
      }
      expect(limiter.stats.refunded).toBe(4);
      await limiter.close();
      await w.store.drain();
    });

    test("credit's receipt comes off the charge still owed and gives the credit back", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter({ initialCredit: 2 });
      const receipt = limiter.charge("c", 2);
      expect(receipt).toMatchObject({ allowed: true, source: "credit", units: 2 });
      expect(limiter.refund(receipt)).toBe(2);
      // As if it never was: the credit admits 2 again, and nothing was charged for the first.
      expect(limiter.consume("c", 2).source).toBe("credit");
      await w.run(BATCH_MS);
      expect((await w.record("c")).charged).toBe(2);
      await limiter.close();
      await w.store.drain();
    });

    test("a refund above the lease cap goes to the shared bucket, never into the lease", async () => {
      const { w, limiter } = await leased(100, { maxLeaseTokens: 2 });
      expect(leaseOf(limiter, "k")).toBe(2);
      const receipt = limiter.charge("k", 2);
      expect(receipt.source).toBe("lease");
      await w.run(BATCH_MS * 2); // the empty lease is refilled to its cap meanwhile
      expect(leaseOf(limiter, "k")).toBe(2);
      const given = (await w.record("k")).given;
      expect(limiter.refund(receipt)).toBe(2);
      expect(leaseOf(limiter, "k")).toBe(2);
      await w.run(BATCH_MS);
      expect((await w.record("k")).given - given).toBe(2);
      await limiter.close();
      await w.store.drain();
    });

    test("a refund after reset(key) gives nothing back", async () => {
      const { w, limiter } = await leased();
      const receipt = limiter.charge("k", 3);
      limiter.reset("k");
      expect(limiter.refund(receipt)).toBe(0);
      expect(receipt.refunded).toBe(0);
      expect(limiter.refund("k", 3)).toBe(0); // no entry: nothing taken here
      await limiter.close();
      await w.store.drain();
    });

    test("a refund after reset(key) of a key whose entry had gone gives nothing back", async () => {
      // reset moved the epoch of the key's entry only: with the entry gone (idle), the
      // receipt's own entry kept its epoch, and the refund gave its units to the store.
      const { w, limiter } = await leased(100, { idleAfterMs: 50 });
      const receipt = limiter.charge("k", 1);
      expect(receipt.source).toBe("lease");
      await w.run(400); // idle: its lease goes back, then its entry
      expect(limiter.size).toBe(0);
      limiter.reset("k");
      expect(limiter.refund(receipt)).toBe(0);
      await limiter.close();
      await w.store.drain();
    });

    test("a refund without a receipt gives back at most what the key admitted here", async () => {
      const { w, limiter } = await leased();
      const admitted = 1 + 2; // the credit, then 2 from the lease
      expect(limiter.consume("k", 2).source).toBe("lease");
      expect(limiter.refund("k", 50)).toBe(admitted);
      expect(limiter.refund("k", 1)).toBe(0);
      await limiter.close();
      await w.store.drain();
    });

    test("denied, 'open' and a fallback limiter's charges have nothing to refund", async () => {
      const fallback = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 0 }));
      for (const failure of ["open", fallback] as const) {
        const { w, limiter } = await leased(100, { failure, initialCredit: 1 });
        w.store.failing = true;
        // Drain the lease; the call for the next one fails: the outage decides from then.
        while (limiter.charge("k", 1).source === "lease");
        await w.run(BATCH_MS);
        const receipt = limiter.charge("k", 1);
        expect(receipt.source).toBe(failure === "open" ? "open" : "local");
        expect(receipt.units).toBe(0);
        expect(limiter.refund(receipt)).toBe(0);
        w.store.failing = false;
        await limiter.close();
        await w.store.drain();
      }
    });

    test("the 'local' fallback's receipt goes back into the bucket that admitted it", async () => {
      const { w, limiter } = await leased(100, { failure: "local", expectedProcesses: 4 });
      w.store.failing = true;
      while (limiter.consume("k").source === "lease");
      await w.run(BATCH_MS);
      expect(limiter.consume("k").source).toBe("local"); // its fallback bucket, made now
      const before = limiter.peek("k");
      expect(before.source).toBe("local");
      const receipt = limiter.charge("k", 3);
      expect(receipt).toMatchObject({ allowed: true, source: "local", units: 3 });
      expect(limiter.refund(receipt)).toBe(3);
      expect(limiter.peek("k").remaining).toBe(before.remaining);
      w.store.failing = false;
      await limiter.close();
      await w.store.drain();
    });

    test("a receipt of another limiter, or not a receipt, is a TypeError that changes nothing", async () => {
      const { w, limiter } = await leased();
      const other = w.limiter();
      const receipt = limiter.charge("k", 1);
      expect(() => other.refund(receipt)).toThrow(TypeError);
      expect(() => limiter.refund({ units: 1 } as unknown as LeasedReceipt)).toThrow(TypeError);
      expect(() => limiter.refund(receipt, -1)).toThrow(RangeError);
      expect(receipt.refunded).toBe(0);
      expect(limiter.stats.refunded).toBe(0);
      await limiter.close();
      await other.close();
      await w.store.drain();
    });

    test("settle() gives back what a charge did not use, or takes the excess", async () => {
      const { w, limiter } = await leased(100, { maxLeaseTokens: 10 });
      const receipt = limiter.charge("k", 1);
      expect(receipt.source).toBe("lease");
      expect(settleReceipt(limiter, receipt, 0.25)).toEqual({ refunded: 0.75, excess: undefined });
      await w.run(BATCH_MS);
      const more = limiter.charge("k", 1);
      const s = settleReceipt(limiter, more, 2) as {
        refunded: number;
        excess: { allowed: boolean };
      };
      expect(s.refunded).toBe(0);
      expect(s.excess.allowed).toBe(true);
      await limiter.close();
      await w.store.drain();
    });
  });

  describe.skipIf(kind === "redis" && !redis.available)(`blocks (${kind})`, () => {
    test("step table: a blocked key is denied on the lease, credit and pending paths, and by peek and allow", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter({ initialCredit: 1 });
      expect(limiter.consume("lease").source).toBe("credit");
      await w.run(BATCH_MS);
      expect(limiter.consume("lease").source).toBe("lease");
      expect(limiter.consume("pending", 1).source).toBe("credit");
      expect(limiter.consume("pending", 1).source).toBe("pending");
      for (const key of ["lease", "credit", "pending"]) {
        expect(limiter.block(key, 60_000), key).toBe(60_000);
        const d = limiter.consume(key);
        expect(d, key).toMatchObject({ allowed: false, source: "blocked", remaining: 0 });
        expect(d.retryAfterMs, key).toBeGreaterThanOrEqual(60_000);
        expect(d.resetAfterMs, key).toBeGreaterThanOrEqual(60_000);
        expect(limiter.peek(key).source, key).toBe("blocked");
        expect(limiter.allow(key), key).toBe(false);
        const receipt = limiter.charge(key, 1);
        expect(receipt.units, key).toBe(0);
        expect(limiter.blockedMs(key), key).toBe(60_000);
      }
      // The blocked key's lease went back to the store with the next batch.
      await w.run(BATCH_MS);
      const entry = (
        limiter as unknown as { table: { entries: Map<string, { tokens: number }> } }
      ).table.entries.get("lease");
      expect(entry?.tokens).toBe(0);
      await limiter.close();
      await w.store.drain();
    });

    test.each(["local", "open", "closed", "throw", "fallback"] as const)(
      "a blocked key is denied during an outage under failure %s, and the store learns the block once it answers",
      async (policy) => {
        const w = world(kind, 100, 0);
        const failure =
          policy === "fallback"
            ? new KeyedLimiter(new TokenBucket({ capacity: 50, refillPerSecond: 0 }))
            : policy;
        const a = w.limiter({ failure, initialCredit: 0 });
        expect(a.consume("k").source).toBe("pending");
        await w.run(BATCH_MS);
        w.store.failing = true;
        while (a.consume("k").source === "lease");
        a.block("k", 60_000);
        expect(a.consume("k")).toMatchObject({ allowed: false, source: "blocked" });
        expect(a.peek("k").source).toBe("blocked");
        await w.run(300); // calls fail meanwhile: the block waits to be sent
        expect(a.consume("k").source).toBe("blocked");
        w.store.failing = false;
        await w.run(1000);
        // A second process learns it at its first exchange of the key.
        const b = w.limiter({ initialCredit: 0 });
        expect(b.consume("k").source).toBe("pending");
        await w.run(BATCH_MS * 2);
        expect(b.consume("k")).toMatchObject({ allowed: false, source: "blocked" });
        expect(b.blockedMs("k")).toBeGreaterThan(50_000);
        await a.close();
        await b.close();
        await w.store.drain();
      },
    );

    test("a block is learned by a second process holding a lease at its next exchange, and an unblock reaches it", async () => {
      const w = world(kind, 100, 0);
      const a = w.limiter({ initialCredit: 0 });
      const b = w.limiter({ initialCredit: 0 });
      for (const l of [a, b]) l.consume("k");
      await w.run(BATCH_MS);
      expect(b.consume("k").source).toBe("lease");
      a.block("k", 60_000);
      await w.run(BATCH_MS);
      // b spends its lease until it asks the store again, then it is told.
      let spent = 0;
      for (let i = 0; i < 200 && b.consume("k").source === "lease"; i++) {
        spent++;
        await w.run(BATCH_MS);
      }
      expect(b.consume("k").source).toBe("blocked");
      expect(spent).toBeLessThanOrEqual(20); // at most its lease (the cap: 0.2 x 100)
      // Lifted in a: b checks again at most once a second while asked.
      expect(a.unblock("k")).toBe(true);
      await w.run(BATCH_MS);
      expect(b.consume("k").source).toBe("blocked");
      await w.run(1000);
      b.consume("k"); // asked: it checks with the store
      await w.run(BATCH_MS * 2);
      expect(b.blockedMs("k")).toBe(0);
      expect(b.consume("k").allowed || b.consume("k").source === "pending").toBe(true);
      await a.close();
      await b.close();
      await w.store.drain();
    });

    test("blockOnce keeps a block in place; unblock and reset lift it; a shorter block never shortens it", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter();
      expect(limiter.block("k", 10_000)).toBe(10_000);
      expect(limiter.blockOnce("k", 50_000)).toBe(10_000);
      expect(limiter.block("k", 5_000)).toBe(10_000);
      expect(limiter.block("k", 20_000)).toBe(20_000);
      await w.run(BATCH_MS);
      expect(limiter.unblock("k")).toBe(true);
      expect(limiter.unblock("k")).toBe(false);
      expect(limiter.consume("k").source).not.toBe("blocked");
      limiter.block("r", 10_000);
      limiter.reset("r");
      expect(limiter.blockedMs("r")).toBe(0);
      await w.run(BATCH_MS);
      await limiter.close();
      await w.store.drain();
    });

    test("a block of a thousand years reaches the store and leaves the key's exchanges working", async () => {
      // Sent as is, its end was no expiry Redis takes: the script failed on every exchange.
      const w = world(kind, 100, 0);
      const a = w.limiter({ initialCredit: 0 });
      const b = w.limiter({ initialCredit: 0 });
      a.block("k", 1e300);
      b.consume("k");
      await w.run(BATCH_MS * 2);
      expect(b.consume("k").source).toBe("blocked");
      expect(a.stats.failedExchanges + b.stats.failedExchanges).toBe(0);
      expect(a.blockedMs("k")).toBe(1e300);
      await a.close();
      await b.close();
      await w.store.drain();
    });

    test("a block ends on time", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter();
      limiter.block("k", 100);
      await w.run(BATCH_MS);
      expect(limiter.consume("k").source).toBe("blocked");
      await w.run(100);
      expect(limiter.blockedMs("k")).toBe(0);
      expect(limiter.consume("k").source).not.toBe("blocked");
      await limiter.close();
      await w.store.drain();
    });

    test("a refund into a blocked key's lease goes to the shared bucket", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter({ initialCredit: 0 });
      limiter.consume("k");
      await w.run(BATCH_MS);
      const receipt = limiter.charge("k", 2);
      limiter.block("k", 60_000);
      expect(limiter.refund(receipt)).toBe(2);
      const entry = (
        limiter as unknown as { table: { entries: Map<string, { tokens: number }> } }
      ).table.entries.get("k");
      expect(entry?.tokens).toBe(0);
      await limiter.close();
      await w.store.drain();
    });

    test("invalid block calls throw and change nothing", async () => {
      const w = world(kind, 100, 0);
      const limiter = w.limiter();
      expect(() => limiter.block("k", 0)).toThrow(
        new RangeError("LeasedTokenBucket.block: durationMs must be a finite number > 0, got 0"),
      );
      expect(() => limiter.blockOnce("k", Number.NaN)).toThrow(RangeError);
      expect(() => limiter.block(7 as never, 10)).toThrow(TypeError);
      expect(limiter.blockedMs("k")).toBe(0);
      expect(limiter.stats.blockedKeys).toBe(0);
      await limiter.close();
      await w.store.drain();
    });
  });
}

describe("refunds after the refill (MemoryLeaseStore, refill on the manual clock)", () => {
  test("a refund after the shared bucket refilled past the charge gives nothing", async () => {
    const w = world("memory", 100, 100); // 0.1 per ms
    const limiter = w.limiter({ initialCredit: 0 });
    limiter.consume("k");
    await w.run(BATCH_MS);
    const receipt = limiter.charge("k", 1);
    expect(receipt.source).toBe("lease");
    // Repaid by 0.1 per ms from the charge: refundable until then, in part.
    expect(receipt.refundableUntilMs).toBeGreaterThan(w.clock());
    await w.timers.advance(receipt.refundableUntilMs - w.clock());
    expect(limiter.refund(receipt)).toBe(0);
    await limiter.close();
    await w.store.drain();
  });

  test("a lease's receipt gives its units back at once while the shared bucket is full", async () => {
    // The receipt's end was when the process's view of the bucket would be full, and a view
    // with a lease on a full bucket is full already: a charge and its refund at once gave 0.
    const w = world("memory", 100, 100);
    const limiter = w.limiter({ initialCredit: 0, idleAfterMs: 60_000, leaseTtlMs: 1000 });
    limiter.consume("k");
    await w.run(BATCH_MS);
    // The lease outlives its time: what the key's rate does not need goes back, and the
    // answer to that says the shared bucket is full (refilled meanwhile).
    await w.timers.advance(1500);
    await w.store.drain();
    expect((w.store.inner as MemoryLeaseStore).tokens("k")).toBe(100);
    expect(leaseOf(limiter, "k")).toBeGreaterThan(0);
    const receipt = limiter.charge("k", 1);
    expect(receipt.source).toBe("lease");
    expect(limiter.refund(receipt)).toBe(1);
    await limiter.close();
    await w.store.drain();
  });

  test("a refund in part once the refill repaid some of it", async () => {
    const w = world("memory", 10, 1000); // 1 per ms
    const limiter = w.limiter({ initialCredit: 10 });
    const receipt = limiter.charge("k", 10); // on credit: the bucket owes 10
    expect(receipt.source).toBe("credit");
    const untilMs = receipt.refundableUntilMs;
    expect(untilMs - w.clock()).toBe(10);
    w.clock.advance(4);
    expect(limiter.refund(receipt, 10)).toBe(6);
    await limiter.close();
    await w.store.drain();
  });

  test("the refunds of a key since a charge come off what its receipt gives (the refill repaid them first)", async () => {
    // 6 and 4 charged at 0 ms, the 6 given back, 10 charged at 5 ms: the 4 must not come
    // back too (14 would act in 5 ms at capacity 10 and 1 per ms).
    const w = world("memory", 10, 1000);
    const limiter = w.limiter({ initialCredit: 10 });
    const six = limiter.charge("k", 6);
    const four = limiter.charge("k", 4);
    expect(limiter.refund(six)).toBe(6);
    w.clock.advance(5);
    expect(limiter.refund(four)).toBe(0);
    await limiter.close();
    await w.store.drain();
  });
});

describe("the block table at its bound", () => {
  test("a full table refuses a new key and never drops a live block for it", () => {
    const table = new BlockTable(3);
    for (const key of ["a", "b", "c"]) expect(table.block(key, 1000, 0)).toBe(true);
    expect(table.block("d", 1000, 10)).toBe(false);
    expect(table.stats.refused).toBe(1);
    for (const key of ["a", "b", "c"]) expect(table.blockedMs(key, 10)).toBe(990);
    // Once one has ended, the new key takes its room.
    expect(table.block("b", 2000, 10)).toBe(true); // extended in place
    expect(table.block("a", 500, 10)).toBe(true); // never shortened
    expect(table.block("d", 3000, 1000)).toBe(true); // "a" and "c" ended at 1000
    expect(table.blockedMs("b", 1000)).toBe(1000);
    expect(table.blockedMs("a", 1000)).toBe(0);
  });

  test("a flood of blocks against a full table of live blocks makes no pass over it per call", () => {
    // It swept every entry on each refused call: O(n) per call at the bound.
    const table = new BlockTable(2000);
    for (let i = 0; i < 2000; i++) table.block(`live${i}`, 1_000_000 + i, 0);
    const iterate = Map.prototype[Symbol.iterator];
    let passes = 0;
    Map.prototype[Symbol.iterator] = function (this: Map<unknown, unknown>) {
      passes++;
      return iterate.call(this);
    };
    try {
      for (let i = 0; i < 20_000; i++) table.block(`flood${i}`, 5_000_000, i);
    } finally {
      Map.prototype[Symbol.iterator] = iterate;
    }
    expect(table.stats.refused).toBe(20_000);
    expect(passes).toBe(0);
    for (let i = 0; i < 2000; i += 97)
      expect(table.blockedMs(`live${i}`, 20_000)).toBeGreaterThan(0);
  });

  test("ended blocks make room one by one as their time comes, in order of their ends", () => {
    const table = new BlockTable(100);
    for (let i = 0; i < 100; i++) table.block(`k${i}`, 1000 + ((i * 37) % 100), 0);
    for (let t = 1000; t < 1100; t++) {
      // Exactly the blocks ended by t have gone, when room is needed.
      expect(table.block(`n${t}`, 10_000, t)).toBe(true);
      expect(table.size).toBe(100);
    }
    expect(table.block("late", 10_000, 1099)).toBe(false);
  });

  test("a leased limiter's full block table still sends a block to the store, and counts it", async () => {
    const w = world("memory", 100, 0);
    const limiter = w.limiter();
    // A small bound stands for LOCAL_MAX_KEYS.
    const blocks = new LeaseBlocks(2);
    Object.assign(limiter, { blocks, blockTable: blocks.table });
    limiter.block("a", 60_000);
    limiter.block("b", 60_000);
    expect(limiter.block("c", 60_000)).toBe(0);
    expect(limiter.stats.blocksRefused).toBe(1);
    await w.run(BATCH_MS);
    const other = w.limiter({ initialCredit: 0 });
    other.consume("c");
    await w.run(BATCH_MS * 2);
    expect(other.consume("c").source).toBe("blocked");
    await limiter.close();
    await other.close();
    await w.store.drain();
  });
});
