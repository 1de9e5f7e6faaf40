import { describe, expect, test } from "vitest";
import type { RedisLike } from "../../../src/redis/client.js";
import type { LeaseStore } from "../../../src/redis/leased/exchange.js";
import { LeasedTokenBucket } from "../../../src/redis/leased/leased-token-bucket.js";
import { LocalShare } from "../../../src/redis/leased/local-share.js";
import type { RedisLeaseStore } from "../../../src/redis/leased/redis-store.js";
import { Checker } from "../../support/lease-sim/checker.js";
import { prng } from "../../support/lease-sim/prng.js";
import { replayCommand } from "../../support/lease-sim/run.js";
import { FAULT_KINDS, runSeed, type SeedResult } from "../../support/lease-sim/simulation.js";
import { MemoryBackend, RedisBackend, Server } from "../../support/lease-sim/stores.js";
import { settle, World } from "../../support/lease-sim/world.js";

// The lease simulator over fixed seeds: each seed draws a configuration, a store (the
// MemoryLeaseStore, or the Redis scripts' answers behind the real RedisLeaseStore) and its
// faults, and checks the invariants of docs/distributed.md#invariants after every step.
// A long run is `npx tsx test/support/lease-sim/run.ts --seeds 1000000`; a failing seed
// prints the command that replays it.

const SEEDS = 240;

// Seeds beyond the first SEEDS that once found a violation, each with what it found.
const FOUND = [
  // A lease call run again after a FLUSHALL forgot its first run (and its record) gave 2
  // tokens back again, to the fresh bucket: the documented G of the bound, which the
  // checker did not allow for (admitted 1 over the exact bound).
  355994,
  // One exchange lifted a key's block, gave 4 tokens back, then blocked it again: two
  // requests for one key in one call, whose record the memory store's model added twice.
  21443,
  // A process's clock went back 524 ms after its first heartbeat; a new key's first lease
  // call then reached Redis past its deadline, and the late answer backed off 100 ms and
  // fell back, beyond the liveness bound (on older code; the seed's schedule has moved).
  541212,
  // Redis restarted; one process's first heartbeat after it counted only itself, and an
  // outage right after made it fall back on the whole bucket beside the others' shares.
  1010772,
  // A process closed with its fallback bucket still in its table; a process started later
  // fell back on a fresh bucket (its entry pushed out, then OOM), and the checker, still
  // counting the closed one's bucket as alive, took the new outage for the old one.
  193710,
  // Three processes started together and Redis restarted before their second heartbeats,
  // which so counted 1, 2 and 3 again: a beat interval old, the first fell back on the
  // whole bucket beside the others' halves and thirds (1.5 buckets in one outage).
  477597,
  // Replies lost on and off: a drained key's entry went from a small table while the store
  // answered, and came back at the next failure with a fresh share (its level forgotten),
  // beside the others' shares of the same outage: past the allowance by 0.7.
  656397,
];

describe("the lease simulator", () => {
  test(`${SEEDS} seeds of faults find no violation`, async () => {
    const failures: string[] = [];
    const faults = new Map<string, number>();
    let steps = 0;
    let fairnessRuns = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const r: SeedResult = await runSeed(seed);
      steps += r.steps;
      if (r.fairness !== undefined) fairnessRuns++;
      for (const [kind, n] of Object.entries(r.faults))
        faults.set(kind, (faults.get(kind) ?? 0) + n);
      if (r.violations.length > 0) {
        failures.push(
          `seed ${seed} (${r.config}): ${r.violations[0]}\n  replay: ${replayCommand(seed)}`,
        );
      }
    }
    expect(failures, failures.join("\n")).toEqual([]);
    // The seeds exercise what they claim to: every kind of fault, and the fairness phase.
    for (const kind of FAULT_KINDS) expect(faults.get(kind) ?? 0, kind).toBeGreaterThan(0);
    expect(fairnessRuns).toBeGreaterThanOrEqual(3);
    expect(steps).toBeGreaterThan(SEEDS * 500);
  }, 120_000);

  test("small limits shared fairly after faults: capacity 100, 50 per second, 4 processes", async () => {
    const failures: string[] = [];
    const ratios: number[] = [];
    for (let seed = 1; seed <= 16; seed++) {
      const r = await runSeed(seed, {
        fairness: "always",
        config: { capacity: 100, refillPerSecond: 50, processes: 4 },
      });
      ratios.push(...(r.fairness?.ratios ?? []));
      if (r.violations.length > 0) {
        failures.push(`seed ${seed}: ${r.violations[0]}\n  (config overridden: see this test)`);
      }
    }
    expect(failures, failures.join("\n")).toEqual([]);
    expect(ratios.length).toBe(16 * 4);
    expect(Math.min(...ratios)).toBeGreaterThanOrEqual(0.6);
    expect(Math.max(...ratios)).toBeLessThanOrEqual(1.4);
  });

  test.each(FOUND)("seed %i, which once found a violation, finds none", async (seed) => {
    const r = await runSeed(seed);
    expect(r.violations, replayCommand(seed)).toEqual([]);
  });

  test("a closed process's fallback bucket does not make the next outage part of its own", () => {
    // Capacity 10, no refill: the shared bucket's 10 taken by a lease, then an outage in
    // which p1 falls back on 10 and closes (its bucket stays in its table, admitting
    // nothing), then a later one in which p2 falls back on a fresh 10. Two outages: the
    // formula allows 10 + 2 x 10, and 30 were admitted. Counting p1's bucket as alive
    // until p2's began made them one outage (10 + 10) and reported a violation by 10.
    const capacity = 10;
    const nowOf = { ms: 0 };
    const p1 = { owner: 1, closed: false, share: undefined as LocalShare | undefined };
    const p2 = { owner: 2, closed: false, share: undefined as LocalShare | undefined };
    const observed = (p: typeof p1) => ({
      owner: p.owner,
      get closed() {
        return p.closed;
      },
      held: () => 0,
      fallback: () => p.share,
      level: (share: LocalShare) => share.available(nowOf.ms),
    });
    const checker = new Checker({ capacity, refillPerSecond: 0, bounded: true }, () => [
      observed(p1),
      observed(p2),
    ]);
    const admit = (p: typeof p1, source: "lease" | "local", atMs: number) => {
      nowOf.ms = atMs;
      checker.observe("k", atMs);
      if (source === "local") p.share?.take(1, atMs, true);
      const d = { allowed: true, limit: capacity, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 };
      checker.decided(p.owner, "k", 1, true, { ...d, source }, atMs, "test");
    };
    for (let i = 0; i < capacity; i++) admit(p1, "lease", i);
    p1.share = new LocalShare(capacity, 0, capacity, 100);
    for (let i = 0; i < capacity; i++) admit(p1, "local", 100 + i);
    p1.closed = true;
    p2.share = new LocalShare(capacity, 0, capacity, 1000);
    for (let i = 0; i < capacity; i++) admit(p2, "local", 1000 + i);
    expect(checker.violations).toEqual([]);
    expect(checker.admittedOf("k")).toBe(3 * capacity);
  });

  test("a call the server runs twice gives back and takes once, and answers the same", async () => {
    // The connection drops before the answer and the client sends the call again: the
    // store runs it twice. The record (what lease-token conservation is checked against)
    // must grow by one run, and the answer that comes back must be the first run's.
    const world = new World(0);
    const server = new Server(world, prng(1), 1, 1000);
    server.repeatWithinMs = 50;
    const backend = new MemoryBackend(server, 10, 0, 2000);
    const store = backend.storeFor(1, 1000) as LeaseStore;
    const ask = { charge: 0, need: 1, demand: 1 };
    const first = store.exchange([{ key: "k", give: 0, want: 4, ...ask }], "p", 1);
    while (world.runNext(Number.POSITIVE_INFINITY)) await settle();
    expect(await first).toMatchObject({ late: false, grants: [{ granted: 4 }] });
    server.repeatRate = 1;
    const twice = store.exchange([{ key: "k", give: 4, want: 6, ...ask, charge: 1 }], "p", 2);
    while (world.runNext(Number.POSITIVE_INFINITY)) await settle();
    expect(server.repeats).toBe(1);
    expect(await twice).toMatchObject({ late: false, grants: [{ granted: 6, tokens: 3 }] });
    expect(backend.store.record("k")).toEqual({ taken: 10, given: 4, charged: 1 });
    expect(server.records.get("k")).toEqual({ taken: 10, given: 4, charged: 1 });
    expect(backend.store.tokens("k")).toBe(3);
    expect(server.granting.get("k")).toBe(0);
    expect(server.giving.get("k")).toBe(0);
  });

  test("a process whose clock went back gets a new key's lease a batch window after the late answer", async () => {
    // The Redis scripts' answers (deadlines on the server's clock) behind the real
    // RedisLeaseStore; the process measures its offset to the server's clock, then its
    // clock goes back by more than timeoutMs: its next lease call reaches Redis late.
    const world = new World(1_000_000);
    const server = new Server(world, prng(7), 0.5, 30);
    let prefix = "";
    const backend = new RedisBackend(server, 1, 0.05, 500, () => prefix);
    let skewMs = 3000;
    const run = async (ms: number) => {
      const until = world.nowMs + ms;
      while (world.runNext(until)) await settle();
      world.nowMs = until;
    };
    const limiter = new LeasedTokenBucket({
      capacity: 1,
      refillPerSecond: 0.05,
      initialCredit: 0,
      batchWindowMs: 5,
      timeoutMs: 30,
      client: backend.storeFor(1) as RedisLike,
      prefix: "sim:",
      record: false,
      clock: () => world.nowMs + skewMs,
      scheduler: world.scheduler(1),
    });
    prefix = (limiter.store as RedisLeaseStore).keyOf("").toString();
    await run(50); // the first heartbeat measured the offset
    skewMs -= 524;
    await run(2000);
    expect(limiter.consume("new")).toMatchObject({ allowed: false, source: "pending" });
    await run(5 + 2); // sent after a batch window, answered late
    expect(limiter.stats.failedExchanges).toBe(1);
    // Two batch windows and two round trips after it asked, the lease is there.
    await run(5 + 2);
    expect(limiter.consume("new")).toMatchObject({ allowed: true, source: "lease" });
    expect(limiter.storeHealth().circuits[0]?.state).toBe("closed");
    const closing = limiter.close();
    await run(100);
    await closing;
  });

  test("a seed replays: the same steps, decisions and faults", async () => {
    const a = await runSeed(17);
    const b = await runSeed(17);
    expect(b).toEqual(a);
  });
});
