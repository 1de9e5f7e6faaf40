import { TimeHeap } from "../core/time-heap.js";
import type { Scheduler } from "../redis/leased/exchange.js";
import { LeasedTokenBucket } from "../redis/leased/leased-token-bucket.js";
import { MemoryLeaseStore } from "../redis/leased/memory-store.js";

/**
 * How `tollgate replay --nodes N` spreads requests over the simulated processes:
 * - `random` (default): each request goes to a node drawn from a seeded generator, as a
 *   load balancer without affinity does; the same `seed` gives the same spread;
 * - `round-robin`: request i to node i mod N;
 * - `key`: every request of a client to one node (a seeded hash of the key), as with sticky
 *   sessions; each key then lives on one node and leases add nothing but their delay.
 */
export type Spread = "random" | "round-robin" | "key";

/** The spreads, for the command line. */
export const SPREADS: readonly Spread[] = ["random", "round-robin", "key"];

/** Options of {@link NodesSimulation}. */
export interface NodesOptions {
  /** Simulated processes sharing the limit (an integer >= 1). */
  readonly nodes: number;
  /** The shared token bucket. */
  readonly capacity: number;
  readonly refillPerSecond: number;
  /** The simulated store's round-trip time, ms (>= 0): each answer arrives this long after its call. */
  readonly rttMs: number;
  readonly spread: Spread;
  /** Seed of the `random` and `key` spreads (an integer). */
  readonly seed: number;
  /** `LeasedTokenBucket`'s `initialCredit` (>= 0; the command line's default is the library's, 1). */
  readonly initialCredit: number;
  /** Each node's `maxKeys`. */
  readonly maxKeys: number | undefined;
}

/** What the simulation reports (see docs/replay.md#several-processes-sharing-one-limit). */
export interface NodesReport
  extends Pick<NodesOptions, "nodes" | "rttMs" | "spread" | "seed" | "initialCredit"> {
  /** Requests the N leased nodes admitted together. */
  readonly admitted: number;
  /** Requests the one exact shared bucket admitted on the same requests. */
  readonly exactAdmitted: number;
  /** `admitted / exactAdmitted` (1 when the exact bucket admitted nothing). */
  readonly utilisation: number;
  /** Sum over keys of what the nodes admitted above the exact bucket, in requests. */
  readonly overshoot: number;
  /** The largest such excess of one key. */
  readonly maxKeyOvershoot: number;
  /**
   * The bound on one key's excess over the shared bucket's own bound ({@link worstRunExcess}):
   * `nodes x initialCredit`. The excess over the exact bucket's admissions can be larger on
   * bursty traffic: credit paid back later from tokens the exact bucket let overflow.
   */
  readonly overshootBound: number;
  /** Keys whose excess over the shared bucket's own bound passed `nodes x initialCredit`. */
  readonly keysOverBound: number;
  /**
   * The worst excess of one key's leased admissions over the shared bucket's own bound
   * from the key's first request: max over t of admitted(first..t) - (capacity +
   * refillPerSecond x (t - first)). At most 0 for one exact bucket.
   */
  readonly worstRunExcess: number;
  /**
   * The same over every window [a, b] of the key's requests, not only from its first:
   * max of admitted(a..b) - (capacity + refillPerSecond x (b - a)). Tokens a node holds
   * when the window opens count against the bucket's level then, so this can pass the
   * run's figure by up to the leases held.
   */
  readonly worstWindowExcess: number;
  /** Keys admitted fewer requests than by the exact bucket. */
  readonly keysUnder: number;
  /** Lease calls to the simulated store (each one round trip for a batch of keys). */
  readonly exchanges: number;
  /** Lease calls per 1,000 decisions. */
  readonly exchangesPer1000: number;
  /** Heartbeat calls (one per node every third of `heartbeatTtlMs`, busy or not). */
  readonly heartbeats: number;
  /** Tokens the nodes took from the shared bucket, and gave back. */
  readonly tokensTaken: number;
  readonly tokensGivenBack: number;
  /** Decisions by where they came from (`lease`, `credit`, ...). */
  readonly sources: Readonly<Record<string, number>>;
  /** False when more keys came than the per-key comparison holds (`maxKeys`): it covers the first ones. */
  readonly perKeyExact: boolean;
}

/** One key's counts in a {@link NodesSimulation}. */
interface KeyCounts {
  exact: number;
  leased: number;
  readonly firstMs: number;
  /** min over leased admissions i (1-based) of `i - 1 - refill x t_i`, seconds. */
  leastStart: number;
  /** The worst excess over the bucket's bound from the first request. */
  worstRun: number;
}

/** 32-bit FNV-1a of `text`, mixed with `seed`. */
function hash(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** mulberry32: a small seeded generator of 32-bit integers. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The nodes' `heartbeatTtlMs` (heartbeats go every third of it). */
const HEARTBEAT_TTL_MS = 3_600_000;

/** Rounds away float noise (`t x r` at epoch-ms scale) to 6 decimals. */
function round6(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

/** A timer of the simulation's scheduler; `run` is cleared when it runs or is cancelled. */
interface Timer {
  run: (() => void) | undefined;
}

/** Lets every queued promise callback run (the store's answers, the limiters' handling). */
async function settle(): Promise<void> {
  for (let i = 0; i < 16; i++) await Promise.resolve();
}

/**
 * N processes sharing one leased limit, simulated on the log's clock: N real `LeasedTokenBucket`s
 * (the library's lease logic, unchanged) on one `MemoryLeaseStore` (the lease script's semantics in
 * memory) with a manual clock and scheduler, so a run is deterministic. Time only moves forward, to
 * each request's log time; the timers due by then (batch windows, store answers after `rttMs`,
 * heartbeats, idle sweeps) run first, in time order, each at its own time.
 */
export class NodesSimulation {
  private nowMs = Number.NEGATIVE_INFINITY;
  /** Pending timers, by time, then creation order. */
  private readonly timers = new TimeHeap<Timer>();
  private limiters: LeasedTokenBucket[] = [];
  private readonly draw: () => number;
  private sequence = 0;
  /** Each key's {@link KeyCounts}, for the first `maxKeys` keys. */
  private readonly perKey = new Map<string, KeyCounts>();
  private worstRunExcess = Number.NEGATIVE_INFINITY;
  private worstWindowExcess = Number.NEGATIVE_INFINITY;
  private perKeyExact = true;
  private admitted = 0;
  private exactAdmitted = 0;
  private readonly sources = new Map<string, number>();

  constructor(readonly options: NodesOptions) {
    this.draw = generator(options.seed);
  }

  /** The manual scheduler: timers run only in {@link advanceTo}. */
  private readonly schedule: Scheduler = (run, delayMs) => {
    const timer: Timer = { run };
    this.timers.push(this.nowMs + Math.max(0, delayMs), timer);
    return () => {
      timer.run = undefined;
    };
  };

  /**
   * Runs the timers due by `timeMs` in time order, each at its time: those due at
   * one instant together, in creation order, then what their answers set off. The promise
   * callbacks settle once per instant, not once per timer: the nodes' periodic sweeps all
   * fall on the same instants, and a log of days holds millions of them.
   */
  private async advanceTo(timeMs: number): Promise<void> {
    await settle();
    const timers = this.timers;
    for (;;) {
      const atMs = timers.firstMs;
      if (!(atMs <= timeMs)) break;
      if (atMs > this.nowMs) this.nowMs = atMs;
      // In creation order; a timer set by one of these for this instant runs next round.
      const due: Timer[] = [];
      while (timers.size > 0 && timers.firstMs === atMs) due.push(timers.pop());
      for (const t of due) {
        const run = t.run;
        t.run = undefined;
        run?.();
      }
      await settle();
    }
    if (timeMs > this.nowMs) this.nowMs = timeMs;
  }

  /** The nodes, made at the first request's time (their timers start then). */
  private start(timeMs: number): LeasedTokenBucket[] {
    this.nowMs = timeMs;
    const o = this.options;
    // The shared bucket and every node: one bucket, one clock, one scheduler.
    const shared = {
      capacity: o.capacity,
      refillPerSecond: o.refillPerSecond,
      clock: () => this.nowMs,
      scheduler: this.schedule,
    };
    const store = new MemoryLeaseStore({ ...shared, latencyMs: o.rttMs });
    this.limiters = Array.from(
      { length: o.nodes },
      () =>
        new LeasedTokenBucket({
          ...shared,
          store,
          initialCredit: o.initialCredit,
          // The live count only sizes the fallback when the store fails, which the simulation
          // does not model: a heartbeat every 20 min keeps days of log time cheap.
          heartbeatTtlMs: HEARTBEAT_TTL_MS,
          ...(o.maxKeys === undefined ? {} : { maxKeys: o.maxKeys }),
        }),
    );
    return this.limiters;
  }

  /** The node of the next request of `key`. */
  private nodeOf(key: string): number {
    const n = this.options.nodes;
    const i = this.sequence++;
    if (this.options.spread === "round-robin") return i % n;
    if (this.options.spread === "key") return hash(key, this.options.seed) % n;
    return this.draw() % n;
  }

  /**
   * Decides one request (cost 1) of `key` at log time `timeMs` (never before the last one)
   * on its node, and records it against the exact bucket's decision `exactAllowed`.
   */
  async allow(timeMs: number, key: string, exactAllowed: boolean): Promise<boolean> {
    const limiters = this.limiters.length > 0 ? this.limiters : this.start(timeMs);
    await this.advanceTo(timeMs);
    const decision = limiters[this.nodeOf(key)]!.consume(key);
    this.sources.set(decision.source, (this.sources.get(decision.source) ?? 0) + 1);
    if (decision.allowed) this.admitted++;
    if (exactAllowed) this.exactAdmitted++;
    let counts = this.perKey.get(key);
    if (counts === undefined && this.perKeyExact) {
      if (this.perKey.size >= (this.options.maxKeys ?? 1_000_000)) this.perKeyExact = false;
      else {
        counts = {
          exact: 0,
          leased: 0,
          firstMs: timeMs,
          leastStart: Number.POSITIVE_INFINITY,
          worstRun: Number.NEGATIVE_INFINITY,
        };
        this.perKey.set(key, counts);
      }
    }
    if (counts !== undefined) {
      if (exactAllowed) counts.exact++;
      if (decision.allowed) {
        const r = this.options.refillPerSecond;
        const t = timeMs / 1000;
        const i = ++counts.leased;
        const start = i - 1 - r * t;
        if (start < counts.leastStart) counts.leastStart = start;
        const end = i - r * t;
        const cap = this.options.capacity;
        const run = i - r * (t - counts.firstMs / 1000) - cap;
        const window = end - counts.leastStart - cap;
        if (run > counts.worstRun) counts.worstRun = run;
        if (run > this.worstRunExcess) this.worstRunExcess = run;
        if (window > this.worstWindowExcess) this.worstWindowExcess = window;
      }
    }
    return decision.allowed;
  }

  /** The report; stops the nodes' timers (without running them). */
  finish(): NodesReport {
    const o = this.options;
    const credit = o.initialCredit;
    const bound = o.nodes * credit;
    let overshoot = 0;
    let maxKeyOvershoot = 0;
    let keysOverBound = 0;
    let keysUnder = 0;
    for (const { exact, leased, worstRun } of this.perKey.values()) {
      const excess = leased - exact;
      if (excess > 0) overshoot += excess;
      if (excess > maxKeyOvershoot) maxKeyOvershoot = excess;
      if (round6(worstRun) > bound) keysOverBound++;
      if (excess < 0) keysUnder++;
    }
    this.timers.clear();
    const decisions = [...this.sources.values()].reduce((a, b) => a + b, 0);
    const stats = this.limiters.map((l) => l.stats);
    const total = (pick: (s: (typeof stats)[number]) => number) =>
      stats.reduce((a, s) => a + pick(s), 0);
    const exchanges = total((s) => s.exchanges);
    return {
      nodes: o.nodes,
      rttMs: o.rttMs,
      spread: o.spread,
      seed: o.seed,
      initialCredit: credit,
      admitted: this.admitted,
      exactAdmitted: this.exactAdmitted,
      utilisation: this.exactAdmitted === 0 ? 1 : this.admitted / this.exactAdmitted,
      overshoot,
      maxKeyOvershoot,
      overshootBound: bound,
      keysOverBound,
      worstRunExcess: round6(Math.max(0, this.worstRunExcess)),
      worstWindowExcess: round6(Math.max(0, this.worstWindowExcess)),
      keysUnder,
      exchanges,
      exchangesPer1000: decisions === 0 ? 0 : (exchanges / decisions) * 1000,
      heartbeats: total((s) => s.heartbeats),
      tokensTaken: total((s) => s.tokensTaken),
      tokensGivenBack: total((s) => s.tokensGivenBack),
      sources: Object.fromEntries([...this.sources].sort((a, b) => b[1] - a[1])),
      perKeyExact: this.perKeyExact,
    };
  }
}
