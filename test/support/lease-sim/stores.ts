import { createHash } from "node:crypto";
import type { RedisKey, RedisLike } from "../../../src/redis/client.js";
import type { LeaseRequest, LeaseStore } from "../../../src/redis/leased/exchange.js";
import { MemoryLeaseStore } from "../../../src/redis/leased/memory-store.js";
import {
  type BucketConfig,
  type BucketState,
  exchangeKey,
  freshBucket,
  holdsNothing,
  repeated,
} from "../../../src/redis/leased/shared-bucket.js";
import { HEARTBEAT_SCRIPT, LEASE_SCRIPT } from "../../../src/redis/lua/lease.js";
import { StoreTimeoutError } from "../../../src/store/errors.js";
import type { Prng } from "./prng.js";
import { WORLD, type World } from "./world.js";

/**
 * The shared store of the lease simulator and the network to it, with every fault a store
 * can have: an outage (connections refused), a stall (requests queue, then run in order),
 * slow and lost replies (a lost reply ran on the server: only the answer is lost), a
 * refused write (`OOM`, `READONLY`: every script is refused), `FLUSHALL` and a restart
 * (all state lost; a restart also forgets the script cache and is down meanwhile). Two
 * kinds of store sit behind it: `MemoryLeaseStore` itself, and the Redis lease scripts'
 * answers modelled in TypeScript (src/redis/leased/shared-bucket.ts, the heartbeat set, the
 * deadline, the server's own clock) behind the real `RedisLeaseStore` on a fake client.
 * @module
 */

/** The lease script's block argument (`''`, `b<ms>`, `o<ms>`, `l<ms>`) as a change. */
export function blockChange(arg: string): LeaseRequest["block"] {
  if (arg === "") return undefined;
  const op = arg[0] === "b" ? "block" : arg[0] === "o" ? "once" : "lift";
  return { op, ms: Number(arg.slice(1)) };
}

/** True for a lease script's answer that it ran past its deadline (it wrote nothing). */
function isLate(value: unknown): boolean {
  return Array.isArray(value) && value[0] === -1 && value.length === 2;
}

/** The fault state of the store and the network, changed by the simulation. */
export class Server {
  /** Connections refused. */
  down = false;
  /** Every script refused (`OOM`/`READONLY`). */
  refusing: "OOM" | "READONLY" | undefined = undefined;
  /** Requests wait until then (server clock of the world, ms). */
  stallUntilMs = Number.NEGATIVE_INFINITY;
  /** Probability that a reply is lost. */
  lossRate = 0;
  /**
   * Probability that a call runs twice: its connection drops before the answer, and the
   * client sends it again (ioredis's resend, a cluster client's retry); the second run's
   * answer is the one that comes back.
   */
  repeatRate = 0;
  /** The second run comes up to this long after the first (ms). */
  repeatWithinMs = 0;
  /** Calls run a second time. */
  repeats = 0;
  /** Restarts and `FLUSHALL`s so far. */
  flushes = 0;
  /**
   * Tokens given back a second time, by caller key, by calls run again after a restart or
   * a flush forgot their first run (its record went with the buckets): as a lease held at
   * the flush and given back after it, they go to the fresh bucket.
   */
  readonly givenAgainAfterFlush = new Map<string, number>();
  /** Extra one-way latency (ms). */
  slowMs = 0;
  /** The server clock: the world's plus this (ms). */
  clockOffsetMs = 0;
  /** Taken, given back and charged per key, over the whole run (a flush does not reset it). */
  readonly records = new Map<string, { taken: number; given: number; charged: number }>();
  /** Tokens given back and not yet in the bucket, by caller key. */
  readonly giving = new Map<string, number>();
  /** Tokens taken from a bucket and not yet with the process that asked, by caller key. */
  readonly granting = new Map<string, number>();
  /** What the store did that it must not (a grant for a key it holds blocked). */
  readonly problems: string[] = [];
  /** Calls sent to the server and not yet answered or failed (any process). */
  outstanding = 0;
  /** Promises settled since the simulation last let them run. */
  settledCalls = 0;
  /** Requests waiting for a stall to end. */
  private readonly stalled: (() => void)[] = [];

  constructor(
    readonly world: World,
    private readonly random: Prng,
    /** Base one-way latency (ms). */
    readonly latencyMs: number,
    /** The processes' call timeout (ms). */
    private readonly timeoutMs: number,
  ) {}

  /** The server's clock now. */
  serverNow(): number {
    return this.world.nowMs + this.clockOffsetMs;
  }

  /** One-way delay of a message now. */
  private delay(): number {
    return this.latencyMs * (0.5 + this.random.next()) + this.slowMs * this.random.next();
  }

  /**
   * Sends a request from process `owner`: it reaches the server, runs `apply` there (in
   * order, after any stall) and its answer comes back, each after a delay; `done` gets the
   * answer or the error. Nothing comes back to a killed owner; a stopped one gets it when
   * it resumes.
   */
  call<T>(
    owner: number,
    apply: () => T,
    done: (error: unknown, value?: T) => void,
    gives: readonly (readonly [string, number])[] = [],
    takes: (value: T) => readonly (readonly [string, number])[] = () => [],
  ): void {
    this.outstanding++;
    // Tokens taken are on their way to the caller from when the server applies the call
    // until its answer arrives (or is lost).
    let taken: readonly (readonly [string, number])[] = [];
    const deliver = () => {
      for (const [key, n] of taken) this.granting.set(key, (this.granting.get(key) ?? 0) - n);
      taken = [];
    };
    // Tokens given back are on their way until the server applies them, or until the caller
    // learns the call failed or came late (they are lost then: never given twice).
    for (const [key, give] of gives) this.giving.set(key, (this.giving.get(key) ?? 0) + give);
    let arrived = gives.length === 0;
    const land = () => {
      if (arrived) return;
      arrived = true;
      for (const [key, give] of gives) this.giving.set(key, (this.giving.get(key) ?? 0) - give);
    };
    const finish = (error: unknown, value?: T) => {
      land();
      deliver();
      this.outstanding--;
      this.settledCalls++;
      done(error, value);
    };
    if (this.down) {
      this.world.add(owner, () => finish(new Error("connect ECONNREFUSED (simulated)")), 1, true);
      return;
    }
    this.world.add(
      WORLD,
      () => {
        const run = () => {
          let error: unknown;
          let value: T | undefined;
          if (this.down) error = new Error("read ECONNRESET (simulated)");
          else if (this.refusing === "OOM") {
            error = new Error("OOM command not allowed when used memory > 'maxmemory'.");
          } else if (this.refusing === "READONLY") {
            error = new Error("READONLY You can't write against a read only replica.");
          } else {
            try {
              value = apply();
              if (!isLate(value)) land();
              taken = takes(value);
              for (const [key, n] of taken) {
                this.granting.set(key, (this.granting.get(key) ?? 0) + n);
              }
            } catch (e) {
              error = e;
            }
          }
          if (error === undefined && this.random.chance(this.repeatRate)) {
            // What the first run took is on its way in the second run's answer; a store
            // that ran the call again would take (and give back) again, unaccounted.
            const flushes = this.flushes;
            this.world.add(
              WORLD,
              () => this.runAgain(owner, apply, finish, flushes, gives),
              this.random.next() * this.repeatWithinMs,
            );
            return;
          }
          if (this.random.chance(this.lossRate)) {
            // The answer is lost: the caller learns of it by its timeout (until then its
            // promise may still settle, so the simulation keeps letting promises run).
            this.world.add(
              WORLD,
              () => {
                land();
                deliver();
                this.outstanding--;
              },
              this.timeoutMs,
            );
            return;
          }
          this.world.add(owner, () => finish(error, value), this.delay(), true);
        };
        // A stalled server runs nothing until the stall ends, then all that waited, in order.
        if (this.world.nowMs < this.stallUntilMs) this.stalled.push(run);
        else run();
      },
      this.delay(),
    );
  }

  /**
   * Runs a call again (its client sent it again on a new connection) and sends that answer
   * back: after any stall, refused while the server is down or refusing.
   */
  private runAgain<T>(
    owner: number,
    apply: () => T,
    finish: (error: unknown, value?: T) => void,
    flushesAtFirstRun: number,
    gives: readonly (readonly [string, number])[],
  ): void {
    const run = () => {
      let error: unknown;
      let value: T | undefined;
      this.repeats++;
      if (this.down) error = new Error("read ECONNRESET (simulated)");
      else if (this.refusing !== undefined) error = new Error(`${this.refusing} (simulated)`);
      else {
        const flushed = this.flushes !== flushesAtFirstRun;
        const before = gives.map(([key]) => this.records.get(key)?.given ?? 0);
        try {
          value = apply();
        } catch (e) {
          error = e;
        }
        for (const [i, [key]] of gives.entries()) {
          const again = (this.records.get(key)?.given ?? 0) - (before[i] as number);
          if (flushed && again > 0) {
            this.givenAgainAfterFlush.set(key, (this.givenAgainAfterFlush.get(key) ?? 0) + again);
          }
        }
      }
      this.world.add(owner, () => finish(error, value), this.delay(), true);
    };
    if (this.world.nowMs < this.stallUntilMs) this.stalled.push(run);
    else run();
  }

  /** Stalls the server for `ms` (longer, if a stall already lasts longer): requests queue. */
  stall(ms: number): void {
    const until = this.world.nowMs + ms;
    if (until > this.stallUntilMs) this.stallUntilMs = until;
    this.world.add(WORLD, () => this.drain(), ms);
  }

  /** Ends any stall now: the queued requests run, in order. */
  endStall(): void {
    this.stallUntilMs = Number.NEGATIVE_INFINITY;
    this.drain();
  }

  /** Runs the queued requests once no stall lasts. */
  private drain(): void {
    if (this.world.nowMs < this.stallUntilMs) return;
    for (const run of this.stalled.splice(0)) run();
  }

  /** Adds to a key's record. */
  recordOf(key: string): { taken: number; given: number; charged: number } {
    let r = this.records.get(key);
    if (r === undefined) {
      r = { taken: 0, given: 0, charged: 0 };
      this.records.set(key, r);
    }
    return r;
  }
}

/** A store the simulation can flush and read the shared buckets of. */
export interface SimBackend {
  readonly kind: "memory" | "redis";
  /** The store process `owner` talks to (with its timeouts on its own timers). */
  storeFor(owner: number, timeoutMs: number): LeaseStore | RedisLike;
  /** All state lost (`FLUSHALL`, or a restart). */
  flush(restart: boolean): void;
}

/**
 * `MemoryLeaseStore` on the server's clock, reached through {@link Server}: each process
 * gets a view whose calls time out after `timeoutMs` on its own timers (the call may still
 * run on the server later: the memory store has no deadline).
 */
export class MemoryBackend implements SimBackend {
  readonly kind = "memory";
  readonly store: MemoryLeaseStore;

  constructor(
    private readonly server: Server,
    capacity: number,
    refillPerSecond: number,
    staleMs: number,
  ) {
    this.store = new MemoryLeaseStore({
      capacity,
      refillPerSecond,
      clock: () => server.serverNow(),
      staleMs,
    });
  }

  flush(): void {
    this.store.flush();
  }

  storeFor(owner: number, timeoutMs: number): LeaseStore {
    const server = this.server;
    const store = this.store;
    const world = server.world;
    const timed = <T>(
      apply: () => T,
      gives: readonly (readonly [string, number])[] = [],
      takes: () => readonly (readonly [string, number])[] = () => [],
    ): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        let settled = false;
        const timer = world.add(
          owner,
          () => {
            if (settled) return;
            settled = true;
            server.settledCalls++;
            reject(new StoreTimeoutError(timeoutMs));
          },
          timeoutMs,
          true,
        );
        server.call(
          owner,
          apply,
          (error, value) => {
            if (settled) return;
            settled = true;
            timer.cancelled = true;
            if (error === undefined) resolve(value as T);
            else reject(error);
          },
          gives,
          () => takes(),
        );
      });
    return {
      groupOf: () => "",
      exchange: (requests: readonly LeaseRequest[], processId: string, sequence: number) => {
        let taken: [string, number][] = [];
        return timed(
          () => {
            taken = [];
            // Each key once: a call may carry two requests for one key (a lift, then a
            // block), and the record's change is that of the whole call.
            const before = [...new Set(requests.map((r) => r.key))].map((key) => ({
              key,
              ...store.record(key),
            }));
            // The memory store answers at once: its answer is read on the way back.
            const answer = store.exchange(requests, processId, sequence);
            for (const b of before) {
              const after = store.record(b.key);
              const r = server.recordOf(b.key);
              r.taken += after.taken - b.taken;
              r.given += after.given - b.given;
              r.charged += after.charged - b.charged;
              taken.push([b.key, after.taken - b.taken]);
              if (after.taken > b.taken && store.blockedMs(b.key) > 0) {
                server.problems.push(`t=${world.nowMs} ${b.key}: a grant while blocked`);
              }
            }
            return answer;
          },
          requests.map((r) => [r.key, r.give] as const),
          () => taken,
        ).then((answer) => answer);
      },
      heartbeat: (processId: string, ttlMs: number, leave: boolean, sequence: number) =>
        timed(() => store.heartbeat(processId, ttlMs, leave, sequence)).then((answer) => answer),
    };
  }
}

const NUMBER_TEXT = (x: number): string =>
  x === Number.POSITIVE_INFINITY ? "inf" : x === Number.NEGATIVE_INFINITY ? "-inf" : String(x);

/**
 * The Redis lease scripts' answers, modelled: buckets by Redis key (the shared-bucket model,
 * on the server's clock; a full bucket without contenders has no state, as in the script),
 * the heartbeat set, the deadline of every lease call, the script cache (a restart forgets
 * it: `NOSCRIPT`, and the client sends the source). Each process gets a `RedisLike` over it,
 * given to a real `LeasedTokenBucket`, so the real `RedisLeaseStore` (offset, deadlines,
 * replies) runs on it.
 */
export class RedisBackend implements SimBackend {
  readonly kind = "redis";
  private readonly buckets = new Map<string, BucketState>();
  /** Heartbeat sets: live processes and join marks, each with the time it lapses. */
  private readonly sets = new Map<
    string,
    { live: Map<string, number>; marks: Map<string, number> }
  >();
  private scripts = new Set<string>();
  private readonly config: BucketConfig;
  private readonly bySha: Map<string, string>;

  constructor(
    private readonly server: Server,
    capacity: number,
    refillPerSecond: number,
    staleMs: number,
    /** Redis keys start with this; the caller's key follows it. */
    private readonly keyPrefix: () => string,
  ) {
    this.config = { capacity, refillPerSecond, staleMs };
    this.bySha = new Map([
      [LEASE_SCRIPT.sha1, "lease"],
      [HEARTBEAT_SCRIPT.sha1, "heartbeat"],
    ]);
    this.scripts = new Set(this.bySha.keys());
  }

  flush(restart: boolean): void {
    this.buckets.clear();
    this.sets.clear();
    if (restart) this.scripts.clear();
  }

  storeFor(owner: number): RedisLike {
    const server = this.server;
    const run = (sha1: string, keys: readonly RedisKey[], args: readonly string[]) =>
      new Promise<unknown>((resolve, reject) => {
        server.call(
          owner,
          () => {
            if (!this.scripts.has(sha1)) throw new Error("NOSCRIPT No matching script.");
            return this.bySha.get(sha1) === "lease"
              ? this.lease(keys, args)
              : this.heartbeat(keys, args);
          },
          (error, value) => (error === undefined ? resolve(value) : reject(error)),
          this.bySha.get(sha1) === "lease" ? this.givesOf(keys, args) : [],
          (value) => this.takesOf(keys, value),
        );
      });
    return {
      evalSha: run,
      evalScript: (source, keys, args) => {
        const sha1 = createHash("sha1").update(source, "utf8").digest("hex");
        this.scripts.add(sha1);
        return run(sha1, keys, args);
      },
    };
  }

  /** The tokens a lease call's answer carries to its caller, by caller key. */
  private takesOf(keys: readonly RedisKey[], value: unknown): [string, number][] {
    if (!Array.isArray(value) || isLate(value)) return [];
    const prefix = this.keyPrefix();
    return keys.map((k, i) => [String(k).slice(prefix.length), Number(value[i * 6])]);
  }

  /** The tokens a lease call gives back, by caller key. */
  private givesOf(keys: readonly RedisKey[], args: readonly string[]): [string, number][] {
    const prefix = this.keyPrefix();
    return keys.map((k, i) => [String(k).slice(prefix.length), Number(args[7 + i * 6])]);
  }

  /**
   * The lease script: ARGV capacity, rate, maxTtl, record, staleMs, tag, sequence, then per
   * key 6, deadline.
   */
  private lease(keys: readonly RedisKey[], args: readonly string[]): unknown[] {
    const now = this.server.serverNow();
    const deadline = args[args.length - 1] as string;
    if (deadline !== "" && now > Number(deadline)) return [-1, NUMBER_TEXT(now)];
    const tag = args[5] as string;
    const sequence = Number(args[6]);
    const keepUntil = deadline === "" ? Number.NEGATIVE_INFINITY : Number(deadline);
    const prefix = this.keyPrefix();
    const out: unknown[] = [];
    for (let i = 0; i < keys.length; i++) {
      const redisKey = String(keys[i]);
      const base = 7 + i * 6;
      const request: LeaseRequest = {
        key: redisKey,
        give: Number(args[base]),
        charge: Number(args[base + 1]),
        want: Number(args[base + 2]),
        need: Number(args[base + 3]),
        demand: Number(args[base + 4]),
        block: blockChange(args[base + 5] as string),
      };
      let state = this.buckets.get(redisKey);
      // As the script: a call this key ran already is answered from its record, no write.
      const again = state === undefined ? undefined : repeated(state, tag, sequence, now);
      if (again !== undefined) {
        out.push(
          NUMBER_TEXT(again.granted),
          NUMBER_TEXT(again.waitMs),
          NUMBER_TEXT(again.tokens),
          NUMBER_TEXT(again.back),
          NUMBER_TEXT(again.blockedMs),
          NUMBER_TEXT(again.liftedAgoMs),
        );
        continue;
      }
      if (state === undefined) state = freshBucket(this.config.capacity, now);
      const answer = exchangeKey(state, request, tag, now, this.config, sequence, keepUntil);
      if (answer.granted > 0 && answer.blockedMs > 0) {
        this.server.problems.push(`t=${now} ${redisKey}: a grant while blocked`);
      }
      // As the script: no key for a bucket that holds nothing a fresh one would not.
      if (holdsNothing(state, this.config.capacity, now)) this.buckets.delete(redisKey);
      else this.buckets.set(redisKey, state);
      const r = this.server.recordOf(redisKey.slice(prefix.length));
      r.taken += answer.granted;
      r.given += answer.back;
      r.charged += request.charge > 0 ? request.charge : 0;
      out.push(
        NUMBER_TEXT(answer.granted),
        NUMBER_TEXT(answer.waitMs),
        NUMBER_TEXT(answer.tokens),
        NUMBER_TEXT(answer.back),
        NUMBER_TEXT(answer.blockedMs),
        NUMBER_TEXT(answer.liftedAgoMs),
      );
    }
    out.push(NUMBER_TEXT(now));
    return out;
  }

  /**
   * The heartbeat script: KEYS the set; ARGV id, ttlMs, leave, sequence. A join leaves a
   * mark until the membership it began lapses, and the same call run again answers joined.
   */
  private heartbeat(keys: readonly RedisKey[], args: readonly string[]): unknown[] {
    const now = this.server.serverNow();
    const name = String(keys[0]);
    let set = this.sets.get(name);
    if (set === undefined) {
      set = { live: new Map(), marks: new Map() };
      this.sets.set(name, set);
    }
    for (const [id, until] of set.live) if (until < now) set.live.delete(id);
    const id = args[0] as string;
    const mark = `${id}:${args[3]}`;
    let joined = 0;
    if (args[2] === "1") set.live.delete(id);
    else {
      const lapses = now + Number(args[1]);
      joined = set.live.has(id) ? 0 : 1;
      set.live.set(id, lapses);
      if (joined === 1) {
        for (const [m, until] of set.marks) if (until < now) set.marks.delete(m);
        set.marks.set(mark, lapses);
      } else if ((set.marks.get(mark) ?? Number.NEGATIVE_INFINITY) >= now) joined = 1;
    }
    return [set.live.size, NUMBER_TEXT(now), joined];
  }
}
