import { describe, expect, test } from "vitest";
import { LeasedTokenBucket, type LeaseStore, MemoryLeaseStore } from "../../../src/redis/index.js";
import type { Scheduler } from "../../../src/redis/leased/exchange.js";
import type { LeasedTokenBucketOptions } from "../../../src/redis/leased/options.js";
import { StoreTimeoutError } from "../../../src/store/errors.js";
import { type ManualClock, manualClock } from "../../support/manual-clock.js";
import { type ManualScheduler, manualScheduler } from "../../support/manual-scheduler.js";

// The heartbeats' count under faults that strike one process's heartbeats and not the
// others', or strike the answer and not the call: N limiters on one MemoryLeaseStore, on a
// manual clock and scheduler. The bound is the outage allowance of
// docs/distributed.md#invariants: the fallback shares of one outage add up to one bucket.

/** A store whose heartbeats fail per process, as told. */
class HeartbeatFaults implements LeaseStore {
  /** Every call fails, connection refused. */
  down = false;
  /** Processes whose heartbeats are refused (not run). */
  readonly refused = new Set<string>();
  /** Processes whose next heartbeat runs but whose answer is lost (a timeout). */
  readonly answerLost = new Set<string>();

  constructor(readonly inner: MemoryLeaseStore) {}

  groupOf(): string {
    return "";
  }

  exchange(...args: Parameters<LeaseStore["exchange"]>): ReturnType<LeaseStore["exchange"]> {
    if (this.down) return Promise.reject(new Error("connect ECONNREFUSED"));
    return this.inner.exchange(...args);
  }

  heartbeat(...args: Parameters<LeaseStore["heartbeat"]>): ReturnType<LeaseStore["heartbeat"]> {
    const [processId] = args;
    if (this.down || this.refused.has(processId)) {
      return Promise.reject(new Error("connect ECONNREFUSED"));
    }
    if (this.answerLost.delete(processId)) {
      return this.inner.heartbeat(...args).then(() => Promise.reject(new StoreTimeoutError(100)));
    }
    return this.inner.heartbeat(...args);
  }
}

interface World {
  readonly clock: ManualClock;
  readonly timers: ManualScheduler;
  readonly memory: MemoryLeaseStore;
  readonly store: HeartbeatFaults;
  limiter(options?: Partial<LeasedTokenBucketOptions>): LeasedTokenBucket;
}

/** capacity 100, no refill: whatever happens, one outage admits at most 100 in all. */
function world(): World {
  const clock = manualClock(1_000_000);
  const timers = manualScheduler(clock);
  const memory = new MemoryLeaseStore({
    capacity: 100,
    refillPerSecond: 0,
    clock,
    latencyMs: 1,
    scheduler: timers.schedule,
  });
  const store = new HeartbeatFaults(memory);
  return {
    clock,
    timers,
    memory,
    store,
    limiter: (options = {}) =>
      new LeasedTokenBucket({
        capacity: 100,
        refillPerSecond: 0,
        store,
        clock,
        scheduler: timers.schedule,
        heartbeatTtlMs: 3000,
        initialCredit: 0,
        ...options,
      }),
  };
}

/** Each limiter asks for `key` every 10 ms for `ms`; the units admitted in all. */
async function offer(w: World, limiters: readonly LeasedTokenBucket[], key: string, ms: number) {
  let admitted = 0;
  for (let t = 0; t < ms; t += 10) {
    for (const l of limiters) if (l.allow(key)) admitted++;
    await w.timers.advance(10);
  }
  return admitted;
}

describe("a heartbeat whose answer is lost", () => {
  test("a process whose joining heartbeat's answer was lost after a flush does not fall back on the count after it", async () => {
    // Three processes started 300 ms apart (beats every 1000 ms): their first heartbeats
    // count 1, 2 and 3. Redis then forgets the set, and each one's next heartbeat joins it
    // anew, but its answer is lost (a timeout after the script ran): the retry 100 ms later
    // finds the process live, joined before, and counts 1, 2 and 3 again.
    const w = world();
    const limiters: LeasedTokenBucket[] = [];
    for (let i = 0; i < 3; i++) {
      limiters.push(w.limiter());
      await w.timers.advance(300);
    }
    expect(limiters.map((l) => l.liveProcesses)).toEqual([1, 2, 3]);
    w.memory.flush();
    for (const l of limiters) w.store.answerLost.add(l.processId);
    await w.timers.advance(850); // each beat (lost) and retried
    expect(limiters.map((l) => l.liveProcesses)).toEqual([1, 2, 3]);
    w.store.down = true;
    // Before, they fell back on 1/1, 1/2 and 1/3 of the bucket: 183 in all.
    expect(await offer(w, limiters, "k", 2000)).toBeLessThanOrEqual(100);
  });
});

describe("heartbeats that fail for one process while the store answers", () => {
  test("a process whose heartbeats failed until its membership lapsed does not fall back on the count before", async () => {
    // Two processes count 2. The first one's heartbeats then fail for longer than
    // heartbeatTtlMs while its exchanges are answered: the store forgets it, and the
    // second counts 1 from then on. Then every call fails.
    const w = world();
    const first = w.limiter();
    const second = w.limiter();
    await w.timers.advance(2000);
    expect([first.liveProcesses, second.liveProcesses]).toEqual([2, 2]);
    w.store.refused.add(first.processId);
    for (let t = 0; t < 8000; t += 500) {
      first.allow("warm"); // its exchanges are answered meanwhile
      await w.timers.advance(500);
    }
    expect(second.liveProcesses).toBe(1);
    expect(second.fallbackProcesses).toBe(1);
    w.store.down = true;
    // Before, the first fell back on half the bucket and the second on all of it: 150.
    expect(await offer(w, [first, second], "k", 2000)).toBeLessThanOrEqual(100);
  });
});

/** A process's timers that a SIGSTOP holds and a SIGCONT runs, late, in order. */
function stoppable(schedule: Scheduler) {
  let stopped = false;
  const held: (() => void)[] = [];
  return {
    schedule: ((run, delayMs) =>
      schedule(() => (stopped ? held.push(run) : run()), delayMs)) as Scheduler,
    stop() {
      stopped = true;
    },
    resume() {
      stopped = false;
      for (const run of held.splice(0)) run();
    },
  };
}

describe("a process stopped while Redis forgot the set", () => {
  test("a process resumed after a flush it slept through does not fall back on its count from before", async () => {
    // The second process starts 500 ms after the first; both count 2. The second is then
    // stopped (SIGSTOP) right after a heartbeat, and Redis forgets the set: the first
    // joins anew and from then on counts 1 (one heartbeat refused shifts its beats, so
    // its count from before the flush leaves its window). The second resumes before its
    // membership would have lapsed, into an outage, its last count still 2.
    const w = world();
    const first = w.limiter();
    await w.timers.advance(500);
    const proc = stoppable(w.timers.schedule);
    const second = w.limiter({ scheduler: proc.schedule });
    await w.timers.advance(1010); // the second's heartbeats at 500 and 1500 answered: 2
    expect([first.liveProcesses, second.liveProcesses]).toEqual([2, 2]);
    proc.stop();
    w.memory.flush();
    await w.timers.advance(480); // the first joins anew at 2000 (refused, then at 2100)
    w.store.refused.add(first.processId);
    await w.timers.advance(20);
    w.store.refused.delete(first.processId);
    // At 4200 the first has counted 1 since the flush (before, its window also lacked the 2
    // it counted before: it fell back on the whole bucket).
    await w.timers.advance(2190);
    expect(first.liveProcesses).toBe(1);
    w.store.down = true;
    proc.resume();
    // The second sent no heartbeat while stopped: its count from before is stale.
    expect(second.fallbackProcesses).toBeUndefined();
    // Before, the second fell back on half the bucket beside the first's whole: 150.
    expect(await offer(w, [first, second], "k", 2000)).toBeLessThanOrEqual(100);
  });
});

describe("expectedProcesses below the fleet's count", () => {
  test("processes not counted again after a flush divide by the larger count they had, not by a lower expectedProcesses", async () => {
    // expectedProcesses 2 for a fleet of 4 (an autoscaler added two): counted, each divides
    // by the heartbeats' 4. Redis then forgets the set, and every process joins anew, so
    // none is counted for a while; an outage comes then.
    const w = world();
    const limiters = Array.from({ length: 4 }, () => w.limiter({ expectedProcesses: 2 }));
    await w.timers.advance(3000);
    expect(limiters.map((l) => l.fallbackProcesses)).toEqual([4, 4, 4, 4]);
    w.memory.flush();
    await w.timers.advance(1000);
    w.store.down = true;
    expect(limiters.map((l) => l.fallbackProcesses)).toEqual([4, 4, 4, 4]);
    // Before, each fell back on half the bucket: 200 in all.
    expect(await offer(w, limiters, "k", 2000)).toBeLessThanOrEqual(100);
  });
});

describe("a store that cannot tell whether a heartbeat joined", () => {
  test("a store that always answers joined is never counted: its fallback denies, or takes expectedProcesses", async () => {
    const w = world();
    const inner = w.store;
    const unsure: LeaseStore = {
      groupOf: () => "",
      exchange: (...args) => inner.exchange(...args),
      heartbeat: (...args) => inner.heartbeat(...args).then(({ live }) => ({ live, joined: true })),
    };
    const bare = w.limiter({ store: unsure });
    const expecting = w.limiter({ store: unsure, expectedProcesses: 3 });
    await w.timers.advance(10_000);
    expect([bare.liveProcesses, expecting.liveProcesses]).toEqual([2, 2]);
    expect([bare.fallbackProcesses, expecting.fallbackProcesses]).toEqual([undefined, 3]);
    w.store.down = true;
    expect(await offer(w, [bare], "k", 500)).toBe(0);
    expect(await offer(w, [expecting], "k", 500)).toBe(33); // its share: 100 / 3 units
  });
});
