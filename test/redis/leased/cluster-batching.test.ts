import { describe, expect, test } from "vitest";
import { hashSlot } from "../../../src/redis/hash-slot.js";
import { LeasedTokenBucket, type RedisKey, type RedisLike } from "../../../src/redis/index.js";
import { HEARTBEAT_SCRIPT, LEASE_SCRIPT } from "../../../src/redis/lua/lease.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";
import { manualScheduler, settle } from "../../support/manual-scheduler.js";

// A Redis Cluster as the lease store sees it: a RedisLike whose nodeOf names one of three
// masters by hash slot, answering the lease and heartbeat scripts when the test says so
// (so that what goes out together can be seen), on the test's clock as the server's.

const NODES = 3;

interface Call {
  readonly kind: "lease" | "heartbeat" | "measure";
  readonly node: string;
  readonly slots: ReadonlySet<number>;
  answer(): void;
}

function nodeOfSlot(slot: number): string {
  return `127.0.0.1:${7000 + (slot % NODES)}`;
}

function fakeCluster(clock: ManualClock) {
  const calls: Call[] = [];
  const pending: Call[] = [];
  const failing = new Set<string>();
  const run = (sha1: string, keys: readonly RedisKey[], args: readonly string[]) =>
    new Promise<unknown>((resolve, reject) => {
      const slots = new Set(keys.map((k) => hashSlot(k)));
      const node = nodeOfSlot([...slots][0] as number);
      const heartbeat = sha1 === HEARTBEAT_SCRIPT.sha1;
      if (!heartbeat && sha1 !== LEASE_SCRIPT.sha1) throw new Error(`unknown script ${sha1}`);
      const call: Call = {
        kind: heartbeat ? (args[0] === "" ? "measure" : "heartbeat") : "lease",
        node,
        slots,
        answer() {
          if (slots.size > 1)
            return reject(new Error("CROSSSLOT Keys in request don't hash to the same slot"));
          if (failing.has(node)) return reject(new Error(`connect ECONNREFUSED ${node}`));
          if (heartbeat) return resolve([1, String(clock()), 0]);
          const out: string[] = [];
          // ARGV: capacity, rate, maxTtl, record, staleMs, process, sequence, then per key
          // give, charge, want, need, demand, block change; per key granted, waitMs,
          // tokens, back, blockedMs, liftedAgoMs.
          for (let i = 0; i < keys.length; i++) {
            const give = args[7 + i * 6] as string;
            const want = args[9 + i * 6] as string;
            out.push(want, "0", "50", give, "0", "inf");
          }
          out.push(String(clock()));
          resolve(out);
        },
      };
      calls.push(call);
      pending.push(call);
    });
  const client: RedisLike = {
    evalSha: run,
    evalScript: () => Promise.reject(new Error("the fake caches every script")),
    nodeOf: (key) => nodeOfSlot(hashSlot(key)),
  };
  return {
    client,
    calls,
    failing,
    /** Answers every call waiting, then lets the limiter act on the answers. */
    async answerAll() {
      while (pending.length > 0) {
        for (const call of pending.splice(0)) call.answer();
        await settle();
      }
    },
  };
}

/** Closes `limiter`, answering its last calls (give-backs, the heartbeat's leave). */
async function closeAll(limiter: LeasedTokenBucket, cluster: { answerAll(): Promise<void> }) {
  const closing = limiter.close();
  for (let i = 0; i < 5; i++) await cluster.answerAll();
  await closing;
}

function setup() {
  const clock = manualClock(1_000_000);
  const timers = manualScheduler(clock);
  const cluster = fakeCluster(clock);
  const limiter = new LeasedTokenBucket({
    client: cluster.client,
    capacity: 100,
    refillPerSecond: 100,
    initialCredit: 0,
    batchWindowMs: 5,
    clock,
    scheduler: timers.schedule,
  });
  return { clock, timers, cluster, limiter };
}

/** Keys whose buckets lie on `count` different slots, spread over the nodes. */
function keysOnSlots(count: number): string[] {
  const keys: string[] = [];
  const slots = new Set<number>();
  for (let i = 0; keys.length < count; i++) {
    const key = `client-${i}`;
    const slot = hashSlot(`tollgate:ltb:x:${key}`);
    if (!slots.has(slot)) {
      slots.add(slot);
      keys.push(key);
    }
  }
  return keys;
}

describe("LeasedTokenBucket on a Redis Cluster: batches per node", () => {
  test("a window over many slots makes one round trip per node, its calls sent together", async () => {
    const { timers, cluster, limiter } = setup();
    const keys = keysOnSlots(30);
    for (const key of keys) expect(limiter.consume(key).allowed).toBe(false);
    await timers.advance(5);
    // Before the offset to the server's clock is known, the calls wait for one measurement.
    await cluster.answerAll();
    const leases = cluster.calls.filter((c) => c.kind === "lease");
    const slots = new Set(leases.flatMap((c) => [...c.slots]));
    // One call per slot (a cluster refuses a script over several), none over two slots ...
    expect(leases.every((c) => c.slots.size === 1)).toBe(true);
    expect(leases).toHaveLength(slots.size);
    expect(slots.size).toBeGreaterThan(NODES);
    // ... all of them out before any answer: one round trip per node.
    const stats = limiter.stats;
    expect(stats.exchanges).toBe(slots.size);
    expect(stats.roundTrips).toBe(new Set(leases.map((c) => c.node)).size);
    expect(stats.roundTrips).toBe(NODES);
    expect(stats.failedExchanges).toBe(0);
    for (const key of keys) expect(limiter.consume(key).source).toBe("lease");
    expect(limiter.consume(keys[0] as string).allowed).toBe(true);
    await closeAll(limiter, cluster);
  });

  test("a cluster's first window measures the server's clock once, not once per slot", async () => {
    const { timers, cluster, limiter } = setup();
    for (const key of keysOnSlots(30)) limiter.consume(key);
    await timers.advance(5);
    await cluster.answerAll();
    expect(cluster.calls.filter((c) => c.kind === "measure")).toHaveLength(1);
    await closeAll(limiter, cluster);
  });

  test("a failed call backs off every slot of its node, not only its own", async () => {
    const { timers, cluster, limiter } = setup();
    await cluster.answerAll(); // the first heartbeat: the offset is known
    const keys = keysOnSlots(60);
    // The store's keys carry the limiter's keyspace: the failed node is read from its call.
    const [first, ...rest] = keys as [string, ...string[]];
    limiter.consume(first);
    await timers.advance(5);
    const failedNode = cluster.calls.find((c) => c.kind === "lease")?.node as string;
    cluster.failing.add(failedNode);
    await cluster.answerAll();
    expect(limiter.stats.failedExchanges).toBe(1);
    // Every key of that node now goes to the failure policy at once (no call to wait for);
    // keys of the other nodes still ask for leases.
    const before = cluster.calls.length;
    const sources = rest.map((key) => limiter.consume(key).source);
    await timers.advance(5);
    const sent = cluster.calls.slice(before).filter((c) => c.kind === "lease");
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.some((c) => c.node === failedNode)).toBe(false);
    expect(sources).toContain("local");
    // The other nodes' keys wait for their first lease: denied as pending, not by the policy.
    expect(sources).toContain("pending");
    // After the back-off, one call probes the node again; its answer brings its keys back.
    cluster.failing.delete(failedNode);
    await timers.advance(1000);
    await cluster.answerAll();
    await timers.advance(5);
    await cluster.answerAll();
    expect(
      cluster.calls.some((c, i) => i >= before && c.kind === "lease" && c.node === failedNode),
    ).toBe(true);
    await closeAll(limiter, cluster);
  });
});
