import type { RedisLike } from "../../../src/redis/client.js";
import type { LeaseStore } from "../../../src/redis/leased/exchange.js";
import type { LeaseTable } from "../../../src/redis/leased/lease-table.js";
import {
  type LeasedReceipt,
  LeasedTokenBucket,
} from "../../../src/redis/leased/leased-token-bucket.js";
import type { LocalShare } from "../../../src/redis/leased/local-share.js";
import type { LeasedTokenBucketOptions } from "../../../src/redis/leased/options.js";
import type { RedisLeaseStore } from "../../../src/redis/leased/redis-store.js";
import { Checker, type Observed } from "./checker.js";
import { type Prng, prng } from "./prng.js";
import { MemoryBackend, RedisBackend, Server, type SimBackend } from "./stores.js";
import { settle, WORLD, World } from "./world.js";

/**
 * One seeded run of the lease simulator: N real `LeasedTokenBucket`s on one store (the
 * `MemoryLeaseStore`, or the Redis scripts' answers behind the real `RedisLeaseStore`),
 * on virtual time, with every fault drawn from the seed; {@link Checker} checks the
 * invariants after every step, then the run heals and checks liveness, and one run in
 * eight ends with a fairness phase. `npx tsx test/support/lease-sim/run.ts --seed <n>`
 * replays one.
 * @module
 */

/** The faults the simulator injects, by kind. */
export const FAULT_KINDS = [
  "outage",
  "restart",
  "stall",
  "slow",
  "loss",
  "oom",
  "readonly",
  "flushall",
  "kill",
  "start",
  "startDuringOutage",
  "sigstop",
  "clockJump",
  "flood",
  "close",
  "repeat",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** What one seed did and found. */
export interface SeedResult {
  readonly seed: number;
  /** Decisions plus timers run. */
  readonly steps: number;
  readonly decisions: number;
  readonly faults: Partial<Record<FaultKind, number>>;
  readonly violations: readonly string[];
  /** The drawn configuration, one line. */
  readonly config: string;
  /** Per-process admissions over the fairness window, as ratios to an equal share. */
  readonly fairness?: {
    readonly ratios: readonly number[];
    /** Decisions in the measured window, by process, source and outcome. */
    readonly sources: Readonly<Record<string, number>>;
    readonly afterOutage: boolean;
    readonly capacity: number;
    readonly refillPerSecond: number;
    readonly processes: number;
    readonly utilisation: number;
  };
}

/** Options of {@link runSeed}, for tests. */
export interface SeedOptions {
  /** `'always'` / `'never'` run the fairness phase; by default one seed in eight. */
  readonly fairness?: "always" | "never";
  /** Overrides of the drawn configuration. */
  readonly config?: Partial<DrawnConfig>;
  /** No faults (the fairness and efficiency runs). */
  readonly calm?: boolean;
}

/** The drawn configuration of a run. */
export interface DrawnConfig {
  kind: "memory" | "redis";
  processes: number;
  capacity: number;
  refillPerSecond: number;
  initialCredit: number;
  batchWindowMs: number;
  heartbeatTtlMs: number;
  idleAfterMs: number;
  leaseTtlMs: number;
  timeoutMs: number;
  maxKeys: number;
  maxLeaseShare: number;
  expectedProcesses: number | undefined;
  failure: "local" | "closed" | "open";
  latencyMs: number;
  /** Decisions per second over all processes. */
  perSecond: number;
  chaosMs: number;
}

function draw(g: Prng, overrides: Partial<DrawnConfig>): DrawnConfig {
  const processes = g.range(1, 5);
  const config: DrawnConfig = {
    kind: g.chance(0.5) ? "memory" : "redis",
    processes,
    capacity: g.pick([1, 3, 10, 100, 1000]),
    refillPerSecond: g.pick([0, 0.05, 1, 10, 50, 500, 2000]),
    initialCredit: g.pick([0, 1, 1, 2]),
    batchWindowMs: g.pick([1, 5, 5, 20]),
    heartbeatTtlMs: g.pick([600, 3000, 10_000]),
    idleAfterMs: g.pick([500, 2000]),
    leaseTtlMs: g.pick([2000, 10_000]),
    timeoutMs: g.pick([30, 100, 1000]),
    maxKeys: g.pick([4, 16, 64, 1000]),
    maxLeaseShare: g.pick([0.2, 0.2, 0.5, 1]),
    // Set, it is at least the most processes alive at once (starts add at most 3).
    expectedProcesses: g.chance(0.3) ? processes + 3 : undefined,
    failure: g.chance(0.8) ? "local" : g.chance(0.5) ? "closed" : "open",
    latencyMs: g.logUniform(0.2, 5),
    perSecond: g.pick([20, 60, 150]),
    chaosMs: g.pick([3000, 6000]),
  };
  return { ...config, ...overrides };
}

/** The time after the store is healthy again within which everything works again (ms). */
export function livenessMs(c: DrawnConfig): number {
  const sweep = Math.max(c.batchWindowMs, Math.min(c.idleAfterMs, c.leaseTtlMs) / 4);
  const roundTrip = 3 * c.latencyMs + 1;
  return (
    c.timeoutMs +
    Math.max(Math.min(c.heartbeatTtlMs / 3, 1000), 250) +
    sweep +
    2 * c.batchWindowMs +
    2 * roundTrip
  );
}

interface Proc extends Observed {
  readonly limiter: LeasedTokenBucket;
  skewMs: number;
  closed: boolean;
}

/** Internals of a process's limiter, for a violation's message. */
function debugOf(p: { limiter: LeasedTokenBucket }): string {
  const x = p.limiter as unknown as {
    batcher: { queue: Map<string, string[]>; cancel: unknown };
    down: Map<string, unknown>;
    inFlight: Set<unknown>;
  };
  const hb = (
    p.limiter as unknown as { heartbeat: { failingSinceMs?: number; lastOkAtMs: number } }
  ).heartbeat;
  return `heartbeat failing since ${hb.failingSinceMs}, last answered ${hb.lastOkAtMs}; process ${p.limiter.processId.slice(0, 4)}, batcher ${[...x.batcher.queue.values()].flat().length} keys (timer ${x.batcher.cancel !== undefined}), down ${JSON.stringify([...x.down])}, calls in flight ${x.inFlight.size}`;
}

/**
 * Runs seed `seed`. Errors made meanwhile carry no stack (the store's failures are many,
 * and their stacks are most of a run's cost); the limit is put back after.
 */
export async function runSeed(seed: number, options: SeedOptions = {}): Promise<SeedResult> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return await simulate(seed, options);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

async function simulate(seed: number, options: SeedOptions): Promise<SeedResult> {
  const g = prng(seed);
  const c = draw(g, options.config ?? {});
  const world = new World(1_000_000);
  const server = new Server(world, g, c.latencyMs, c.timeoutMs);
  // A client sends a call again once it has a new connection: within a few call timeouts
  // here (the Redis scripts' deadlines turn a later one away; a stall delays it further).
  server.repeatWithinMs = 3 * c.timeoutMs;
  server.clockOffsetMs = g.range(-5000, 5000);
  const staleMs = c.idleAfterMs;
  let keyPrefix = "";
  const backend: SimBackend =
    c.kind === "memory"
      ? new MemoryBackend(server, c.capacity, c.refillPerSecond, staleMs)
      : new RedisBackend(server, c.capacity, c.refillPerSecond, staleMs, () => keyPrefix);
  const procs: Proc[] = [];
  let nextOwner = 1;
  const faults: Partial<Record<FaultKind, number>> = {};
  const fault = (kind: FaultKind) => {
    faults[kind] = (faults[kind] ?? 0) + 1;
  };
  const checker = new Checker(
    {
      capacity: c.capacity,
      refillPerSecond: c.refillPerSecond,
      bounded: c.failure !== "open",
    },
    () => procs,
    (key) => (server.giving.get(key) ?? 0) + (server.granting.get(key) ?? 0),
    (key) => server.givenAgainAfterFlush.get(key) ?? 0,
  );

  const startProcess = (overrides: Partial<LeasedTokenBucketOptions> = {}): Proc => {
    const owner = nextOwner++;
    const skewMs = g.range(-60_000, 60_000);
    const proc = { skewMs } as Proc;
    const clock = () => world.nowMs + proc.skewMs;
    const store = backend.storeFor(owner, c.timeoutMs);
    const options: LeasedTokenBucketOptions = {
      capacity: c.capacity,
      refillPerSecond: c.refillPerSecond,
      initialCredit: c.initialCredit,
      batchWindowMs: c.batchWindowMs,
      heartbeatTtlMs: c.heartbeatTtlMs,
      idleAfterMs: c.idleAfterMs,
      leaseTtlMs: c.leaseTtlMs,
      maxKeys: c.maxKeys,
      maxLeaseShare: c.maxLeaseShare,
      expectedProcesses: c.expectedProcesses,
      failure: c.failure,
      clock,
      scheduler: world.scheduler(owner),
      ...overrides,
      ...(c.kind === "memory"
        ? { store: store as LeaseStore }
        : {
            client: store as RedisLike,
            prefix: "sim:",
            timeoutMs: c.timeoutMs,
            record: false,
          }),
    };
    const limiter = new LeasedTokenBucket(options);
    if (c.kind === "redis") keyPrefix = (limiter.store as RedisLeaseStore).keyOf("").toString();
    const table = (limiter as unknown as { table: LeaseTable }).table;
    Object.assign(proc, {
      owner,
      limiter,
      closed: false,
      // Held: spendable, or on the way back (not yet in the bucket).
      held: (key: string) => {
        const e = table.entries.get(key);
        const returning = (limiter as unknown as { returns: Map<string, number> }).returns.get(key);
        return (e === undefined ? 0 : e.tokens + e.give) + (returning ?? 0);
      },
      fallback: (key: string) => table.entries.get(key)?.fallback,
      level: (share: LocalShare) => share.available(clock()),
    });
    procs.push(proc);
    return proc;
  };
  const alive = () => procs.filter((p) => !world.isStopped(p.owner));
  const kill = (p: Proc) => {
    world.kill(p.owner);
    procs.splice(procs.indexOf(p), 1);
    checker.stopped(world.nowMs);
  };

  for (let i = 0; i < c.processes; i++) startProcess();

  // Runs the timers due by `untilMs`, letting every answer settle after each.
  let timers = 0;
  // Promises settle only when a store answers or a call times out (the timers that do are
  // marked), or when a process closes: only then do they need their turns.
  world.settlingDelayMs = c.timeoutMs;
  const runUntil = async (untilMs: number) => {
    while (world.runNext(untilMs)) {
      timers++;
      if (world.settling) await settle();
    }
    if (untilMs > world.nowMs) world.nowMs = untilMs;
  };

  // Keys: a few hot ones, a pool, and new ones (floods).
  const hot = ["h0", "h1"];
  const pool = Array.from({ length: 12 }, (_, i) => `k${i}`);
  let fresh = 0;
  const pickKey = () => {
    const x = g.next();
    if (x < 0.45) return g.pick(hot);
    if (x < 0.95) return g.pick(pool);
    return `n${fresh++}`;
  };
  const pickCost = () => {
    const x = g.next();
    if (x < 0.85) return 1;
    if (x < 0.9) return 2;
    if (x < 0.94) return 0.5;
    if (x < 0.97) return 0;
    return c.capacity + 1;
  };

  let decisions = 0;
  // Receipts of charges, to refund later (the newest few), and each process's resets of a
  // key (a receipt of a charge before one gives nothing back).
  const receipts: { p: Proc; receipt: LeasedReceipt; resets: number }[] = [];
  const resets = new Map<string, number>();
  const resetsOf = (p: Proc, key: string) => resets.get(`${p.owner} ${key}`) ?? 0;
  const heldOf = (key: string) => {
    let held = 0;
    for (const p of procs) held += p.held(key);
    return held;
  };
  /** A refund by `p` of `key` that gave back `given`: checked against the bounds. */
  const refunded = (key: string, given: number, heldBefore: number, now: number) => {
    checker.refunded(key, given, heldOf(key) - heldBefore, now);
  };
  const decide = (p: Proc, key: string, cost: number, label: string) => {
    const now = world.nowMs;
    checker.observe(key, now);
    const method = g.next();
    let took = true;
    let d: ReturnType<LeasedTokenBucket["consume"]>;
    // The block this process knows of the key, before the call (blockedMs changes nothing).
    let blockedHere = false;
    try {
      blockedHere = p.limiter.blockedMs(key) > 0;
      if (method < 0.08) {
        took = false;
        d = p.limiter.peek(key, cost);
      } else if (method < 0.1) {
        p.limiter.reset(key);
        resets.set(`${p.owner} ${key}`, resetsOf(p, key) + 1);
        return;
      } else if (method < 0.13) {
        const receipt = p.limiter.charge(key, cost);
        if (receipt.units > 0) {
          receipts.push({ p, receipt, resets: resetsOf(p, key) });
          if (receipts.length > 64) receipts.shift();
        }
        if (receipt.units !== (receipt.allowed && receipt.source !== "open" ? cost : 0)) {
          checker.fail(
            `${label} t=${now} p${p.owner} ${key}: a ${receipt.source} receipt of ${receipt.units} units for cost ${cost}`,
          );
        }
        d = receipt;
      } else if (method < 0.155) {
        if (receipts.length === 0) return;
        const held = g.pick(receipts);
        const r = held.receipt;
        const q = held.p;
        if (!procs.includes(q)) return; // killed: its receipts went with it
        const units = g.chance(0.5) ? undefined : r.units * g.next();
        const before = r.refunded;
        const heldBefore = heldOf(r.key as string);
        checker.observe(r.key as string, now);
        const given = units === undefined ? q.limiter.refund(r) : q.limiter.refund(r, units);
        const most = Math.min(units ?? Number.POSITIVE_INFINITY, r.units - before);
        const where = `${label} t=${now} p${q.owner} ${r.key}: refund of a ${r.source} receipt of ${r.units} (refunded ${before})`;
        if (!(given >= 0 && given <= most + 1e-9))
          checker.fail(`${where} gave ${given}, most ${most}`);
        if (given > 0 && resetsOf(q, r.key as string) !== held.resets) {
          checker.fail(`${where} gave ${given} after a reset of the key`);
        }
        if (given > 0 && q.closed) checker.fail(`${where} gave ${given} after close()`);
        const localNow = now + q.skewMs;
        if (given > 0 && c.refillPerSecond > 0 && localNow >= r.refundableUntilMs) {
          checker.fail(`${where} gave ${given} after the refill repaid it`);
        }
        refunded(r.key as string, given, heldBefore, now);
        return;
      } else if (method < 0.165) {
        const heldBefore = heldOf(key);
        const given = p.limiter.refund(key, cost);
        if (!(given >= 0 && given <= cost + 1e-9)) {
          checker.fail(`${label} t=${now} p${p.owner} ${key}: refund of ${cost} gave ${given}`);
        }
        refunded(key, given, heldBefore, now);
        return;
      } else if (method < 0.172) {
        // Blocks on the pool's keys only (the hot keys carry the efficiency and fairness runs).
        if (!key.startsWith("k")) return;
        const ms = g.logUniform(5, 3000);
        const left = g.chance(0.5) ? p.limiter.block(key, ms) : p.limiter.blockOnce(key, ms);
        if (!(left > 0)) checker.fail(`${label} t=${now} p${p.owner} ${key}: block left ${left}`);
        return;
      } else if (method < 0.176) {
        p.limiter.unblock(key);
        return;
      } else {
        d = p.limiter.consume(key, cost);
      }
    } catch (error) {
      checker.fail(`${label} t=${now} p${p.owner} ${key}: threw ${String(error)}`);
      return;
    }
    decisions++;
    if (blockedHere && d.allowed) {
      checker.fail(`${label} t=${now} p${p.owner} ${key}: blocked here, yet ${d.source} allowed`);
    }
    if (d.source === "blocked" && (d.allowed || !blockedHere)) {
      checker.fail(
        `${label} t=${now} p${p.owner} ${key}: ${JSON.stringify(d)}, blocked here ${blockedHere}`,
      );
    }
    if (p.closed && d.source !== "stopped") {
      checker.fail(`${label} t=${now} p${p.owner} ${key}: closed, yet ${d.source}`);
    }
    if (!p.closed && d.source === "stopped") {
      checker.fail(`${label} t=${now} p${p.owner} ${key}: not closed, yet stopped`);
    }
    if (d.source === "full") {
      const table = (p.limiter as unknown as { table: LeaseTable }).table;
      if (table.size < c.maxKeys)
        checker.fail(`${label} t=${now} p${p.owner}: full at ${table.size}`);
    }
    checker.decided(p.owner, key, cost, took, d, now, label);
    if (took && d.allowed && d.source === "lease") {
      const r = server.records.get(c.kind === "memory" ? key : key);
      // A call run again after a flush forgot its first run gives back again, to the fresh
      // bucket (as a lease held at the flush does): not a token made up.
      const givenAgain = server.givenAgainAfterFlush.get(key) ?? 0;
      checker.conserved(key, r?.taken ?? 0, (r?.given ?? 0) - givenAgain, now);
    }
  };

  // The faults, at times drawn now (the last quarter of the chaos stays calm enough to end).
  const chaosEnd = world.nowMs + c.chaosMs;
  const during = (fromMs: number, ms: number, on: () => void, off: () => void) => {
    world.add(WORLD, on, fromMs - world.nowMs);
    world.add(WORLD, off, fromMs + ms - world.nowMs);
  };
  const faultCount = options.calm ? 0 : g.range(2, 9);
  for (let i = 0; i < faultCount; i++) {
    const atMs = world.nowMs + 300 + g.next() * (c.chaosMs - 600);
    const lengthMs = Math.min(g.logUniform(10, 8000), chaosEnd - atMs);
    const kind = g.pick(FAULT_KINDS);
    switch (kind) {
      case "outage":
        during(
          atMs,
          lengthMs,
          () => {
            server.down = true;
            fault("outage");
          },
          () => {
            server.down = false;
          },
        );
        if (g.chance(0.5)) {
          world.add(
            WORLD,
            () => {
              if (procs.length < c.processes + 3) {
                startProcess();
                fault("startDuringOutage");
              }
            },
            atMs + lengthMs * g.next() - world.nowMs,
          );
        }
        break;
      case "restart":
        during(
          atMs,
          Math.min(lengthMs, 2000),
          () => {
            server.down = true;
            backend.flush(true);
            server.flushes++;
            checker.flushed();
            fault("restart");
          },
          () => {
            server.down = false;
          },
        );
        break;
      case "stall":
        world.add(
          WORLD,
          () => {
            server.stall(lengthMs);
            fault("stall");
          },
          atMs - world.nowMs,
        );
        break;
      case "slow":
        during(
          atMs,
          lengthMs,
          () => {
            server.slowMs = g.logUniform(10, 2000);
            fault("slow");
          },
          () => {
            server.slowMs = 0;
          },
        );
        break;
      case "loss":
        during(
          atMs,
          lengthMs,
          () => {
            server.lossRate = 0.2 + 0.8 * g.next();
            fault("loss");
          },
          () => {
            server.lossRate = 0;
          },
        );
        break;
      case "repeat":
        during(
          atMs,
          lengthMs,
          () => {
            server.repeatRate = 0.2 + 0.8 * g.next();
            fault("repeat");
          },
          () => {
            server.repeatRate = 0;
          },
        );
        break;
      case "oom":
      case "readonly":
        during(
          atMs,
          lengthMs,
          () => {
            server.refusing = kind === "oom" ? "OOM" : "READONLY";
            fault(kind);
          },
          () => {
            server.refusing = undefined;
          },
        );
        break;
      case "flushall":
        world.add(
          WORLD,
          () => {
            backend.flush(false);
            server.flushes++;
            checker.flushed();
            fault("flushall");
          },
          atMs - world.nowMs,
        );
        break;
      case "kill":
        world.add(
          WORLD,
          () => {
            const victims = procs.filter((p) => !p.closed);
            if (victims.length === 0) return;
            kill(g.pick(victims));
            fault("kill");
            if (g.chance(0.7)) world.add(WORLD, () => startProcess(), g.logUniform(10, 5000));
          },
          atMs - world.nowMs,
        );
        break;
      case "start":
      case "startDuringOutage":
        world.add(
          WORLD,
          () => {
            if (procs.length >= c.processes + 3) return;
            startProcess();
            fault("start");
          },
          atMs - world.nowMs,
        );
        break;
      case "sigstop":
        world.add(
          WORLD,
          () => {
            const p = g.pick(procs);
            if (p === undefined || world.isStopped(p.owner)) return;
            world.stop(p.owner);
            fault("sigstop");
            world.add(WORLD, () => world.resume(p.owner), lengthMs);
          },
          atMs - world.nowMs,
        );
        break;
      case "clockJump":
        world.add(
          WORLD,
          () => {
            const p = g.pick(procs);
            if (p === undefined) return;
            // A clock that goes back: the limiter holds its time until it catches up.
            p.skewMs -= g.logUniform(1, 5000);
            fault("clockJump");
          },
          atMs - world.nowMs,
        );
        break;
      case "flood": {
        const keys = g.range(c.maxKeys, 3 * c.maxKeys + 20);
        world.add(
          WORLD,
          () => {
            fault("flood");
            for (let k = 0; k < keys; k++) {
              world.add(
                WORLD,
                () => {
                  const live = alive().filter((p) => !p.closed);
                  if (live.length > 0) decide(g.pick(live), `f${fresh++}`, 1, "flood");
                },
                (k * 200) / keys,
              );
            }
          },
          atMs - world.nowMs,
        );
        break;
      }
      case "close":
        world.add(
          WORLD,
          () => {
            const open = procs.filter((p) => !p.closed);
            if (open.length === 0) return;
            const p = g.pick(open);
            p.closed = true;
            checker.stopped(world.nowMs);
            void p.limiter.close();
            world.settling = true;
            fault("close");
            if (g.chance(0.6)) world.add(WORLD, () => startProcess(), g.logUniform(10, 3000));
          },
          atMs - world.nowMs,
        );
        break;
    }
  }

  // The chaos: decisions at random times on random live processes.
  const gapMs = () => (-Math.log(1 - g.next()) * 1000) / c.perSecond;
  for (let at = world.nowMs + gapMs(); at < chaosEnd; at += gapMs()) {
    await runUntil(at);
    const live = alive();
    if (live.length === 0) continue;
    decide(g.pick(live), pickKey(), pickCost(), "chaos");
  }
  await runUntil(chaosEnd);

  // Heal: the store answers again, stopped processes go on.
  server.down = false;
  server.refusing = undefined;
  server.endStall();
  server.lossRate = 0;
  server.repeatRate = 0;
  server.slowMs = 0;
  for (const p of procs) world.resume(p.owner);
  const live = livenessMs(c);
  // Light traffic, then quiet: everything must be back by then.
  const healed = world.nowMs;
  for (let at = healed + gapMs() * 4; at < healed + live; at += gapMs() * 4) {
    await runUntil(at);
    const open = procs.filter((p) => !p.closed);
    if (open.length > 0) decide(g.pick(open), g.pick(pool), 1, "heal");
  }
  await runUntil(healed + live);
  for (const p of procs) {
    if (p.closed) continue;
    const health = p.limiter.storeHealth().circuits[0]?.state;
    if (health !== "closed") {
      checker.fail(
        `liveness p${p.owner}: storeHealth ${health} ${live} ms after the store healed (at ${healed}, local clock ${p.skewMs} ms ahead); ${debugOf(p)}`,
      );
    }
    // A new key: admitted on credit, or by its first lease an exchange window and a round
    // trip later; a full table may hold it back for as long while entries are in calls.
    const key = `live-${p.owner}`;
    const sources: string[] = [];
    let admitted = false;
    for (let attempt = 0; attempt < 3 && !admitted; attempt++) {
      if (attempt > 0)
        await runUntil(world.nowMs + 2 * c.batchWindowMs + 2 * (3 * c.latencyMs + 1));
      const d = p.limiter.consume(key);
      sources.push(d.source);
      admitted = d.allowed;
    }
    if (!admitted) {
      const table = (p.limiter as unknown as { table: LeaseTable }).table;
      const entries = [...table.entries.values()]
        .slice(0, 4)
        .map(
          (e) =>
            `${e.key}{inFlight ${e.inFlight} queued ${e.queued} charge ${e.charge} sent ${e.sentCharge} fallback ${e.fallback !== undefined} deniedUntil ${e.deniedUntilMs}}`,
        );
      checker.fail(
        `liveness p${p.owner}: a new key denied (${sources.join(", then ")}) after the store healed (at ${healed}, checked at ${world.nowMs}, local clock ${p.skewMs} ms ahead); table ${table.size}, pinned ${table.pinned}: ${entries.join(", ")}; ${debugOf(p)}`,
      );
    }
  }
  await runUntil(world.nowMs + live);
  for (const p of procs) {
    if (p.closed) continue;
    // A call under way is fine (a give-back of the sweep); a charge or a fallback bucket
    // still held after the store healed is not.
    const table = (p.limiter as unknown as { table: LeaseTable }).table;
    const held = [...table.entries.values()].filter(
      (e) => e.charge > 0 || e.sentCharge > 0 || e.fallback !== undefined,
    );
    if (held.length > 0) {
      const first = held
        .slice(0, 3)
        .map(
          (e) =>
            `${e.key}{inFlight ${e.inFlight} queued ${e.queued} charge ${e.charge} sent ${e.sentCharge} fallback ${e.fallback !== undefined}}`,
        );
      checker.fail(
        `liveness p${p.owner}: ${held.length} entries still hold a charge or a fallback bucket after the store healed: ${first.join(", ")}`,
      );
    }
  }

  // Fairness: equal demand on one hot key, saturated.
  let fairness: SeedResult["fairness"];
  const wantsFairness =
    options.fairness === "always" || (options.fairness !== "never" && g.chance(0.125));
  if (wantsFairness) fairness = await fairnessPhase();

  async function fairnessPhase(): Promise<SeedResult["fairness"]> {
    // New processes on the same store, after the others closed: shares are measured where
    // a window holds enough tokens to tell (a refill of at least 5 per second).
    // Decisions of at most a quarter of the capacity, at most 100 per second per process,
    // and room in the bucket for every process's next request twice over (a request that
    // needs the whole bucket goes to whoever asks when it is full: no share to be fair with).
    const n = Math.max(2, Math.min(5, c.processes));
    const offered = (4 * c.refillPerSecond) / n;
    const perSecond = Math.min(100, Math.max(50, offered / (c.capacity / 4)), offered);
    if (c.refillPerSecond < 5 || offered / 100 > c.capacity / 4) return undefined;
    if (2 * n * (offered / perSecond) > c.capacity) return undefined;
    // And a lease (a fifth of the capacity) for two requests at least: a request that needs
    // a whole lease makes each process's rate that of its round trips, not of its share.
    if (2 * (offered / perSecond) > 0.2 * c.capacity) return undefined;
    for (const p of procs.filter((x) => !x.closed)) {
      p.closed = true;
      void p.limiter.close();
    }
    checker.stopped(world.nowMs);
    await runUntil(world.nowMs + 200);
    return measureFairness(n);
  }

  async function measureFairness(n: number): Promise<SeedResult["fairness"]> {
    const members: Proc[] = [];
    // The default lease cap (a fifth of the capacity): what one process may take at once,
    // and so the most it can get ahead of the others right after an outage.
    const share = 0.2;
    for (let i = 0; i < n; i++) members.push(startProcess({ maxLeaseShare: share }));
    const key = "fair";
    const r = c.refillPerSecond;
    // Each offers 4 equal shares; decisions of cost 1 up to 50/s, larger costs above.
    const offered = (4 * r) / n;
    const perSecond = Math.min(100, Math.max(50, offered / (c.capacity / 4)), offered);
    const cost = offered / perSecond;
    // Long enough for 40 decisions per process, and for one lease to be a fifth of a share.
    const windowMs = Math.max(
      4000,
      (40 * 1000 * n * cost) / r,
      (5 * n * share * c.capacity * 1000) / r,
    );
    // Long enough for the processes to be counted (their fallback shares the limit).
    const warmMs = (c.heartbeatTtlMs / 3) * 1.5 + 500;
    const afterOutage = g.chance(0.5);
    const start = world.nowMs;
    const counts = new Map<number, number>();
    const sources = new Map<string, number>();
    let tick = 0;
    const step = 1000 / perSecond / n;
    let measuring = false;
    let measuredFrom = 0;
    for (let at = start; at < start + warmMs + windowMs; at += step) {
      if (afterOutage && !measuring && at >= start + warmMs * 0.5) {
        server.down = true;
      }
      if (at >= start + warmMs && !measuring) {
        server.down = false;
        measuring = true;
        measuredFrom = at;
      }
      await runUntil(at);
      const p = members[tick++ % n] as Proc;
      const d = p.limiter.consume(key, cost);
      decisions++;
      if (measuring) {
        const label = `p${p.owner} ${d.source} ${d.allowed ? "allowed" : "denied"}`;
        sources.set(label, (sources.get(label) ?? 0) + 1);
      }
      if (measuring && d.allowed) counts.set(p.owner, (counts.get(p.owner) ?? 0) + cost);
    }
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const equal = total / n;
    const ratios = members.map((p) => (equal > 0 ? (counts.get(p.owner) ?? 0) / equal : 0));
    const utilisation = total / ((r * (world.nowMs - measuredFrom)) / 1000);
    for (const [i, ratio] of ratios.entries()) {
      if (ratio < 0.6 || ratio > 1.4) {
        checker.fail(
          `fairness: process ${i + 1} of ${n} got ${ratio.toFixed(2)} of an equal share (capacity ${c.capacity}, ${r}/s${afterOutage ? ", after an outage" : ""})`,
        );
      }
    }
    return {
      ratios,
      sources: Object.fromEntries(sources),
      afterOutage,
      capacity: c.capacity,
      refillPerSecond: r,
      processes: n,
      utilisation,
    };
  }

  for (const problem of server.problems.slice(0, 5)) checker.fail(`store: ${problem}`);
  const config = `${c.kind} n=${c.processes} capacity=${c.capacity} refill=${c.refillPerSecond}/s credit=${c.initialCredit} batch=${c.batchWindowMs} hb=${c.heartbeatTtlMs} idle=${c.idleAfterMs} ttl=${c.leaseTtlMs} timeout=${c.timeoutMs} maxKeys=${c.maxKeys} share=${c.maxLeaseShare} expected=${c.expectedProcesses ?? "-"} failure=${c.failure} latency=${c.latencyMs.toFixed(2)} rate=${c.perSecond}/s`;
  return {
    seed,
    steps: decisions + timers,
    decisions,
    faults,
    violations: checker.violations,
    config,
    ...(fairness === undefined ? {} : { fairness }),
  };
}
