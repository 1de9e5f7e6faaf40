import type { BucketKernel } from "../algorithms/bucket-kernel.js";
import {
  checkSnapshot,
  checkStateAt,
  decodeBlockEnd,
  encodeNumber,
  encodeState,
  type KeySnapshot,
  type LimiterSnapshot,
  type RegistrySnapshot,
  SNAPSHOT_BLOCKS_VERSION,
  SNAPSHOT_VERSION,
  type SnapshotNumber,
  type SnapshotOptions,
} from "../algorithms/snapshot.js";
import { checkTimeMs } from "../algorithms/time.js";
import { isLimiter } from "../composite/all-of.js";
import { blockedDenial } from "../core/blocks.js";
import {
  checkCost,
  checkInteger,
  checkNumber,
  checkOptionNames,
  checkOptions,
  describe,
  mustBe,
  RateLimitError,
} from "../core/errors.js";
import type { Decision, Limiter, Receipt, WaitOptions } from "../core/limiter.js";
import { decisionMs } from "../core/numeric.js";
import { optionNames } from "../core/option-names.js";
import { ChargeReceipt, checkReceipt, deniedReceipt } from "../core/receipt.js";
import { isReconfigurable, type Reconfigurable } from "../core/reconfigure.js";
import { checkWaitOptions, jittered } from "../core/wait.js";
import { BLOCKED, SlabEngine } from "./engine.js";
import { KeyWaiters } from "./key-waiters.js";
import { type BucketWaiting, joinSlabs, type Slab, slabOf } from "./layouts/index.js";
import { LimiterMap, REFUSED_RETRY_MS } from "./limiter-map.js";
import {
  armSweepTimer,
  checkedFactory,
  checkKey,
  checkSweepInterval,
  MAX_KEYS_LIMIT,
  policyHint,
  WHERE,
} from "./options.js";
import type { KeyedPlans } from "./plan-options.js";
import { checkPlans, isPlans, type PlanTable } from "./plans.js";
import { KeyedReceipt, ReceiptGuard } from "./receipts.js";
import type { KeyedLimiterStats } from "./stats.js";

export type { KeyedPlans } from "./plan-options.js";
export type { KeyedLimiterStats } from "./stats.js";

/** A limiter the registry can copy per key: any built-in limiter, or an `allOf` of them. */
export interface CloneableLimiter extends Limiter {
  /** A fresh limiter with the same options (clock included) and no usage. */
  clone(): Limiter;
}

/** Options of {@link KeyedLimiter}; see docs/keyed.md#bounds for what each bound costs. */
export interface KeyedLimiterOptions {
  /** Most keys kept at once, an integer from 1 to 2^28. @default 1_000_000 */
  readonly maxKeys?: number | undefined;
  /**
   * Most bytes kept, as accounted (key strings at 2 bytes per UTF-16 code unit, slots,
   * logs, the trace table; see docs/keyed.md#bounds), an integer from 2^16 to 2^53 - 1.
   * @default 268_435_456 (256 MiB)
   */
  readonly maxBytes?: number | undefined;
  /**
   * Longest key, in UTF-16 code units (1 to 16,383; V8 hashes longer strings by their
   * length alone, which would make every lookup a scan): a longer key throws a `RangeError`
   * and changes nothing (`tollgate/http` folds such keys into one shared key instead). @default 512
   */
  readonly maxKeyLength?: number | undefined;
  /** Most pending `wait` calls (0 to 2^31 - 1); a `wait` past it rejects at once. @default 10_000 */
  readonly maxWaiters?: number | undefined;
  /**
   * At the bound, when no idle key can go: `"evict"` drops the key in use that is idle
   * soonest and keeps its trace, so that it never comes back fresher than it left; `"refuse"`
   * denies new keys until room is made. See docs/keyed.md#bounds. @default "evict"
   */
  readonly whenFull?: "evict" | "refuse" | undefined;
  /**
   * Period of the one background sweep, in ms (> 0, or `Infinity` for none); unref'd, and
   * it holds the registry weakly. @default 60_000
   */
  readonly sweepIntervalMs?: number | undefined;
}

/** The option names of {@link KeyedLimiterOptions}, checked by the constructor. */
const KEYED_OPTIONS = optionNames<KeyedLimiterOptions>()([
  "maxKeys",
  "maxBytes",
  "maxKeyLength",
  "maxWaiters",
  "whenFull",
  "sweepIntervalMs",
]);
const NO_TTL =
  "keys have no time to live: a key is dropped once idle (a fresh limiter would decide the same), by the incremental sweep or the one of sweepIntervalMs";
const NO_BLOCK_OPTION =
  "a block is a call, not an option: keyed.block(key, ms) blocks one key for ms";
/** Hints for names from caches and other limiters' stores. */
const KEYED_HINTS: Readonly<Record<string, string>> = {
  max: 'use "maxKeys" (the most keys kept at once)',
  maxSize: 'use "maxKeys" (the most keys kept at once)',
  maxMemory: 'use "maxBytes" (the most bytes kept)',
  maxKeySize: 'use "maxKeyLength" (UTF-16 code units)',
  maxKeyLen: 'use "maxKeyLength" (UTF-16 code units)',
  onFull: 'use "whenFull" ("evict" or "refuse")',
  whenFul: 'use "whenFull" ("evict" or "refuse")',
  ttl: NO_TTL,
  ttlMs: NO_TTL,
  idleTimeoutMs: NO_TTL,
  cleanupIntervalMs: 'use "sweepIntervalMs" (milliseconds)',
  sweepInterval: 'use "sweepIntervalMs" (milliseconds)',
  blockDuration: NO_BLOCK_OPTION,
  blockDurationMs: NO_BLOCK_OPTION,
};

/** Default {@link KeyedLimiterOptions.maxKeys}. */
export const DEFAULT_MAX_KEYS = 1_000_000;
/** Default {@link KeyedLimiterOptions.maxBytes}: 256 MiB. */
export const DEFAULT_MAX_BYTES = 2 ** 28;
/** Default {@link KeyedLimiterOptions.maxKeyLength}. */
export const DEFAULT_MAX_KEY_LENGTH = 512;
/** Largest {@link KeyedLimiterOptions.maxKeyLength}: V8 hashes longer strings by length alone. */
export const MAX_KEY_LENGTH_LIMIT = 16_383;
/** Default {@link KeyedLimiterOptions.maxWaiters}. */
export const DEFAULT_MAX_WAITERS = 10_000;

/** The limiter each registry's keys copy, for registries built from one (not a function). */
const policies = new WeakMap<object, CloneableLimiter>();

/**
 * The limiter whose configuration every key of `limiter` copies, when `limiter` is a
 * {@link KeyedLimiter} built from one; `undefined` otherwise. Internal: `tollgate/http`
 * reads the policy's window for the `w=` of `RateLimit-Policy`.
 */
export function keyedPolicyOf(limiter: unknown): CloneableLimiter | undefined {
  return typeof limiter === "object" && limiter !== null ? policies.get(limiter) : undefined;
}

/**
 * Many limiters, one per key (an API key, a user id, an IP address): `allow(key, cost)` on
 * every request. `policy`: a limiter every key copies (clock included), plans
 * ({@link KeyedPlans}), or a function `(key) => Limiter` for limiters of your own.
 *
 * Good for: built-in policies, `allOf` and plans of them take the slab fast path, bit for
 * bit one limiter per key; `maxKeys` and `maxBytes` bound memory, and a flood of keys never
 * makes it forget a client in use (docs/keyed.md#bounds). Watch out: a function or a
 * subclass takes the generic path (one limiter per key), where a full registry refuses new
 * keys (and the function must not call the registry for a key it does not hold).
 * @throws {TypeError} For a bad policy or an unknown option; {RangeError} for an option out
 *   of its range (docs/semantics.md#options).
 * @example
 * new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })).allow("key-1") //=> true
 */
export class KeyedLimiter {
  /** Most keys kept at once. */
  readonly maxKeys!: number;
  /** Most bytes kept, as accounted. */
  readonly maxBytes!: number;
  /** Longest key, in UTF-16 code units. */
  readonly maxKeyLength!: number;
  /** Most pending `wait` calls. */
  readonly maxWaiters!: number;
  /** What a full registry does when no idle key can go. */
  readonly whenFull!: "evict" | "refuse";
  /** @internal The slab of the fast path; `undefined` on the generic path. */
  protected readonly engine: SlabEngine | undefined;
  /** @internal The generic path's map; `undefined` on the fast path. */
  protected readonly map: LimiterMap | undefined;
  /** @internal The fast path's waiters, beside their slots. */
  protected readonly waiters: KeyWaiters | undefined;
  /** @internal A slot's worth of doubles, to decide for a key without a slot. */
  protected readonly scratch: Float64Array | undefined;
  /** @internal The limiter new keys copy on the generic path; `reconfigure` replaces it. */
  private template: CloneableLimiter | undefined;
  /** @internal What refunds through receipts need on the fast path, from the first `charge`. */
  private guard: ReceiptGuard | undefined;
  /** @internal The units each leaf is asked to give back in one refund. */
  private asked: Float64Array | undefined;
  /** @internal The units each leaf gave back in one refund. */
  private given: Float64Array | undefined;
  /** @internal A one-leaf receipt's mark, as the layouts read marks. */
  private marks: Float64Array | undefined;
  /** @internal The plans of a plan registry (`{ plans, plan }`); `undefined` otherwise. */
  protected readonly plans: PlanTable | undefined;

  constructor(
    policy: CloneableLimiter | ((key: string) => Limiter) | KeyedPlans,
    options?: KeyedLimiterOptions,
  ) {
    const plans = isPlans(policy) ? checkPlans(policy) : undefined;
    const slab = plans !== undefined ? joinSlabs(plans.layout, plans.slabs) : slabOf(policy);
    const o = options === undefined ? {} : checkOptions<KeyedLimiterOptions>(WHERE, options);
    checkOptionNames(WHERE, o, KEYED_OPTIONS, KEYED_HINTS);
    const int = (name: keyof KeyedLimiterOptions, min: number, max: number, fallback: number) =>
      checkInteger(WHERE, name, o[name], min, max, fallback);
    this.maxKeys = int("maxKeys", 1, MAX_KEYS_LIMIT, DEFAULT_MAX_KEYS);
    this.maxBytes = int("maxBytes", 2 ** 16, 2 ** 53 - 1, DEFAULT_MAX_BYTES);
    this.maxKeyLength = int("maxKeyLength", 1, MAX_KEY_LENGTH_LIMIT, DEFAULT_MAX_KEY_LENGTH);
    this.maxWaiters = int("maxWaiters", 0, 2 ** 31 - 1, DEFAULT_MAX_WAITERS);
    this.whenFull = checkWhenFull(o.whenFull);
    const { maxKeys, maxBytes } = this;
    const sweepIntervalMs = checkSweepInterval(o.sweepIntervalMs);
    if (slab !== undefined) {
      this.engine = new SlabEngine({
        ...slab,
        maxKeys,
        maxBytes,
        maxKeyLength: this.maxKeyLength,
        whenFull: this.whenFull,
      });
      this.waiters = new KeyWaiters(this.engine, slab, this);
      this.scratch = new Float64Array(Math.max(1, slab.layout.doubles));
      this.map = undefined;
      if (plans !== undefined) {
        this.plans = plans;
        plans.engine = this.engine;
        this.waiters.usePlans(plans);
      }
    } else if (
      typeof policy === "function" &&
      /^class\b/.test(Function.prototype.toString.call(policy))
    ) {
      // A class is a function too, but calling it per key throws without `new`.
      throw new TypeError(
        `${WHERE}: policy must be a limiter with clone() or a function (key) => Limiter, got the class ${policy.name || "(anonymous)"}; pass an instance: new KeyedLimiter(new ${policy.name || "Limiter"}({ ... }))`,
      );
    } else if (typeof policy === "function") {
      this.map = new LimiterMap(checkedFactory(policy, "policy"), maxKeys, maxBytes);
    } else if (isLimiter(policy) && typeof (policy as CloneableLimiter).clone === "function") {
      this.template = policy as CloneableLimiter;
      this.map = new LimiterMap(
        checkedFactory(() => this.template!.clone(), "policy.clone()"),
        maxKeys,
        maxBytes,
        "policy.clone()",
      );
    } else {
      throw new TypeError(
        `${WHERE}: policy must be a limiter with clone() or a function (key) => Limiter, got ${describe(policy)}${policyHint(policy, KEYED_OPTIONS)}`,
      );
    }
    if (sweepIntervalMs !== Number.POSITIVE_INFINITY) {
      armSweepTimer(this, sweepIntervalMs);
    }
    if (typeof policy !== "function" && plans === undefined) {
      policies.set(this, policy as CloneableLimiter);
    }
  }

  /** Number of keys with kept state: at most `maxKeys`. */
  get size(): number {
    return this.engine?.size ?? this.map!.size;
  }

  /** Counters since creation (`clear()` keeps them), the bytes kept now, and keys per plan. */
  get stats(): KeyedLimiterStats {
    const plans = this.plans;
    if (plans !== undefined) return { ...this.engine!.stats, plans: plans.sizes() };
    return this.engine?.stats ?? this.map!.stats;
  }

  /**
   * `consume(key, cost).allowed`, without allocating on a known key.
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `cost` is NaN, negative or infinite.
   */
  allow(key: string, cost?: number): boolean {
    const k = this.checkKey(key);
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const e = this.engine;
    if (e === undefined) return this.map!.allow(k, c);
    const now = e.now();
    const slot = e.find(k);
    if (slot < 0) return this.allowNew(k, c, now);
    if (e.flags[slot] !== 0) return this.decideKept(slot, c, now, true).allowed;
    return e.layout.allowAt(e.state, slot * e.stride, slot, now, c);
  }

  /**
   * Takes `cost` units from the key's limiter when they are available (creating its state
   * on first use); a denied request changes nothing. See {@link Limiter.consume}.
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `cost` is NaN, negative or infinite.
   */
  consume(key: string, cost?: number): Decision {
    return this.decide(key, cost, true, false, 0);
  }

  /**
   * What `consume(key, cost)` would answer now; changes nothing, and keeps nothing for an
   * unknown key (on the generic path the policy may be called to answer).
   * @throws {TypeError} If `key` is not a string or `cost` not a number.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `cost` is NaN, negative or infinite.
   */
  peek(key: string, cost?: number): Decision {
    return this.decide(key, cost, false, false, 0);
  }

  /**
   * `consume(key, cost).allowed` as of `timeMs` (milliseconds on the policy's clock) rather
   * than a clock reading, Go's `AllowN(t, n)`: for replaying a log or deciding a batch at one
   * reading. One latest time serves the whole registry: a time behind it (from the clock or
   * an earlier call) counts as it, and a far-future one moves every key there, so never
   * pass a time a client chose. See docs/semantics.md#explicit-time.
   * @throws {TypeError} If `key` is not a string, `timeMs` or `cost` not a number, or (on
   *   the generic path) the key's limiter cannot decide at an explicit time (a custom one
   *   without `allowAt`). {RangeError} If `key` is too long, `timeMs` or `cost` is NaN or
   *   infinite, `cost` negative, or `timeMs` past a window's float-step bound.
   */
  allowAt(key: string, timeMs: number, cost?: number): boolean {
    const where = `${WHERE}.allowAt`;
    const k = this.checkKey(key);
    const t = checkTimeMs(where, timeMs);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    const e = this.engine;
    if (e === undefined) return this.map!.allow(k, c, t);
    const now = e.nowAt(t);
    const slot = e.find(k);
    if (slot < 0) return this.allowNew(k, c, now);
    if (e.flags[slot] !== 0) return this.decideKept(slot, c, now, true).allowed;
    return e.layout.allowAt(e.state, slot * e.stride, slot, now, c);
  }

  /** `consume(key, cost)` as of `timeMs`: see {@link allowAt} for the time. */
  consumeAt(key: string, timeMs: number, cost?: number): Decision {
    return this.decide(key, cost, true, true, timeMs);
  }

  /** `peek(key, cost)` as of `timeMs`: see {@link allowAt} for the time. */
  peekAt(key: string, timeMs: number, cost?: number): Decision {
    return this.decide(key, cost, false, true, timeMs);
  }

  /**
   * @internal The one decision walk of `consume` and `peek` (`take` false changes nothing)
   * and, with `at`, of their forms as of `timeMs` (`consumeAt`, `peekAt`). `allow` and
   * `allowAt` keep their own walk, which answers without making a {@link Decision}.
   */
  private decide(
    key: string,
    cost: number | undefined,
    take: boolean,
    at: boolean,
    timeMs: number,
  ): Decision {
    const where = at ? `${WHERE}.${take ? "consumeAt" : "peekAt"}` : WHERE;
    const k = this.checkKey(key);
    const t = at ? checkTimeMs(where, timeMs) : undefined;
    const c = cost === undefined ? 1 : checkCost(where, cost);
    const e = this.engine;
    if (e === undefined) return this.map!.decide(k, c, take, t);
    const now = t === undefined ? e.now() : e.nowAt(t);
    const slot = e.find(k);
    if (slot < 0) return take ? this.consumeNew(k, c, now) : this.peekNew(k, c, now);
    return this.decideKept(slot, c, now, take);
  }

  /**
   * `sweep()` as of `timeMs`: drops every key whose state is fresh again by then (see
   * {@link allowAt} for the time); returns how many it dropped. On the generic path each
   * key's limiter judges at the later of its clock and the latest time it was given.
   * @throws {TypeError} If `timeMs` is not a number. {RangeError} If it is NaN or infinite.
   */
  sweepAt(timeMs: number): number {
    const t = checkTimeMs(`${WHERE}.sweepAt`, timeMs);
    const e = this.engine;
    return e === undefined ? this.map!.sweep() : e.sweep(e.nowAt(t));
  }

  /**
   * The state of `key` as plain, JSON-safe data (docs/semantics.md#snapshots): its kernel
   * slot (a fresh state for a key not kept, or what its trace holds), the registry's latest
   * time, the algorithm and the policy's options, and when its block ends if it is blocked.
   * @throws {TypeError} For a bad key, or on the generic path (a policy function or a
   *   custom policy: snapshot each key's own limiter). {RangeError} For a key whose bucket
   *   holds units for waiters.
   */
  snapshot(key: string): KeySnapshot {
    const where = `${WHERE}.snapshot`;
    const k = this.checkKey(key);
    const { algorithm, options } = this.snapshotHeader(where);
    const e = this.engine!;
    const now = e.now();
    const slot = e.lookup(k);
    const values =
      slot >= 0 ? this.saveKept(where, slot) : e.layout.saveSlot(this.unkept(k, now), 0, -1);
    const latestMs = encodeNumber(now);
    const state = encodeState(values);
    const snapshot = { version: SNAPSHOT_VERSION, algorithm, options, latestMs, state };
    const blockedMs = slot >= 0 ? e.blockedMs(slot, now) : e.tracedBlockMs(k, now);
    if (!(blockedMs > 0)) return snapshot;
    const blockedUntilMs = encodeNumber(now + blockedMs);
    return { ...snapshot, version: SNAPSHOT_BLOCKS_VERSION, blockedUntilMs };
  }

  /**
   * Gives `key` the state of a {@link snapshot} of a key of a registry with the same
   * algorithm and options (kept as a new key when not held): it then decides exactly as
   * that key did, blocked until the snapshot's block ends if it has one (a block already in
   * place here is never shortened). The registry's latest time becomes the later of both;
   * the key's receipts from before give nothing back.
   * @throws {TypeError} For a bad key, something that is not such a snapshot (naming what
   *   differs), or on the generic path. {RangeError} When the registry is full and cannot
   *   keep the key, the key's bucket holds units for waiters, or the block's end is not a
   *   finite time after `latestMs`. Either way nothing changes.
   */
  restore(key: string, snapshot: KeySnapshot): void {
    const where = `${WHERE}.restore`;
    if (typeof key === "object" && key !== null && snapshot === undefined) {
      throw new TypeError(
        `${where}: takes the key first, restore(key, snapshot), got one argument, an object; a snapshotAll() is restored with restoreAll(snapshot)`,
      );
    }
    const k = this.checkKey(key);
    const { algorithm, options } = this.snapshotHeader(where);
    const { state, latestMs } = checkSnapshot(where, snapshot, algorithm, options, "one", true);
    const b = snapshot.blockedUntilMs;
    const untilMs =
      b === undefined ? b : decodeBlockEnd(where, "snapshot.blockedUntilMs", b, latestMs);
    const e = this.engine!;
    checkStateAt(where, () => e.layout.loadSlot(new Float64Array(e.layout.doubles), 0, -1, state)); // its shape
    const now = this.restoreTime(latestMs);
    this.loadKey(where, k, state, now);
    if (untilMs !== undefined) this.restoreBlock(k, untilMs, now);
  }

  /**
   * Every kept key's state as plain, JSON-safe data, for a graceful restart: the header of
   * {@link snapshot}, the keys, their states one after another (`width` numbers each, or
   * with `width` 0 each after its length), and the trace table of keys pushed out in use
   * (docs/keyed.md#bounds), so they stay limited, and the blocked keys with when each block
   * ends. Waiters are not part of it, nor blocks of keys pushed out while blocked.
   * @throws {TypeError} On the generic path. {RangeError} While a bucket key holds units
   *   for waiters.
   */
  snapshotAll(): RegistrySnapshot {
    const where = `${WHERE}.snapshotAll`;
    const { algorithm, options } = this.snapshotHeader(where);
    const e = this.engine!;
    const width = e.layout.savedWidth;
    const keys: string[] = [];
    const state: SnapshotNumber[] = [];
    const now = e.now();
    const blocked: string[] = [];
    const untilMs: SnapshotNumber[] = [];
    e.forEachKey((key, slot) => {
      const values = this.saveKept(where, slot);
      keys.push(key);
      if (width === 0) state.push(values.length);
      for (const v of values) state.push(encodeNumber(v));
      const blockedMs = e.blockedMs(slot, now);
      if (blockedMs > 0) {
        blocked.push(key);
        untilMs.push(encodeNumber(now + blockedMs));
      }
    });
    const trace = e.saveTrace(now);
    const latestMs = encodeNumber(now);
    const all = { version: SNAPSHOT_VERSION, algorithm, options, latestMs, keys, width, state };
    const traced = trace === undefined ? all : { ...all, trace };
    if (blocked.length === 0) return traced;
    const blocks = { keys: blocked, untilMs };
    return { ...traced, version: SNAPSHOT_BLOCKS_VERSION, blocks };
  }

  /**
   * Restores every key of a {@link snapshotAll} of a registry with the same algorithm and options
   * (a key held here takes the snapshot's state; others stay as they are), and its blocks (a block
   * already in place here is never shortened). All are checked before any changes.
   * @throws {TypeError} For something that is not such a snapshot (naming what differs), a bad or
   *   repeated key in it, or on the generic path. {RangeError} When the keys would not fit within
   *   `maxKeys`, or a block's end is not a finite time after `latestMs`, nothing changing; or a log
   *   key's entries would not fit within `maxBytes`, the keys before it restored.
   */
  restoreAll(snapshot: RegistrySnapshot): void {
    const where = `${WHERE}.restoreAll`;
    const { algorithm, options } = this.snapshotHeader(where);
    const { state, latestMs } = checkSnapshot(where, snapshot, algorithm, options, "all", true);
    const keys = (snapshot as { keys?: unknown }).keys;
    if (!Array.isArray(keys))
      throw mustBe(where, "snapshot.keys", "an array of keys", keys, TypeError);
    const e = this.engine!;
    const width = e.layout.savedWidth;
    if (snapshot.width !== width) {
      throw new TypeError(
        `${where}: snapshot.width is ${describe(snapshot.width)}, this policy's is ${width}`,
      );
    }
    const states: number[][] = [];
    const probe = new Float64Array(e.layout.doubles);
    let at = 0;
    const seen = new Set<string>();
    for (const key of keys) {
      this.checkKey(key);
      if (seen.has(key)) {
        throw new TypeError(`${where}: snapshot.keys holds ${JSON.stringify(key)} twice`);
      }
      seen.add(key);
      const n = width === 0 ? (state[at++] ?? -1) : width;
      if (!Number.isInteger(n) || n < 0 || at + n > state.length) {
        throw new TypeError(`${where}: snapshot.state does not split into ${keys.length} keys`);
      }
      states.push(state.slice(at, at + n));
      const one = states[states.length - 1]!;
      checkStateAt(where, () => e.layout.loadSlot(probe, 0, -1, one)); // its shape
      at += n;
    }
    if (at !== state.length)
      throw new TypeError(`${where}: snapshot.state has numbers past its keys`);
    const t = snapshot.trace;
    const trace = t === undefined ? undefined : e.checkTrace(where, t);
    const blocks = this.checkBlocks(where, snapshot.blocks, latestMs);
    const fresh = keys.filter((key) => e.lookup(key as string) < 0).length;
    if (e.size + fresh > this.maxKeys) {
      throw new RangeError(
        `${where}: ${fresh} new keys do not fit: ${e.size} of maxKeys (${this.maxKeys}) are kept`,
      );
    }
    const now = this.restoreTime(latestMs);
    if (trace !== undefined) e.loadTrace(trace);
    for (let i = 0; i < keys.length; i++) this.loadKey(where, keys[i] as string, states[i]!, now);
    for (const [key, untilMs] of blocks) this.restoreBlock(key, untilMs, now);
  }

  /**
   * @internal A snapshot's `blocks` checked: each key once, each end a finite time after
   * `latestMs` (a snapshot holds only blocks in force).
   */
  private checkBlocks(where: string, blocks: unknown, latestMs: number): Map<string, number> {
    const checked = new Map<string, number>();
    if (blocks === undefined) return checked;
    const { keys, untilMs } = (blocks ?? {}) as { keys?: unknown; untilMs?: unknown };
    if (!Array.isArray(keys) || !Array.isArray(untilMs) || keys.length !== untilMs.length) {
      throw new TypeError(
        `${where}: snapshot.blocks must be { keys, untilMs }, two arrays of one length, got ${blocksShape(blocks, keys, untilMs)}`,
      );
    }
    for (let i = 0; i < keys.length; i++) {
      const key = this.checkKey(keys[i]);
      if (checked.has(key)) {
        throw new TypeError(`${where}: snapshot.blocks.keys holds ${JSON.stringify(key)} twice`);
      }
      checked.set(
        key,
        decodeBlockEnd(where, `snapshot.blocks.untilMs[${i}]`, untilMs[i], latestMs),
      );
    }
    return checked;
  }

  /** @internal Blocks `key` until `untilMs` at the restore's `now`, as {@link block} does; an ended block is none. */
  private restoreBlock(key: string, untilMs: number, now: number): void {
    if (!(untilMs > now)) return;
    this.plans?.select(key);
    this.engine!.block(key, untilMs, now);
  }

  /** @internal The registry's time for a restore: the later of its latest and the snapshot's. */
  private restoreTime(latestMs: number): number {
    const e = this.engine!;
    const t = e.nowAt(latestMs);
    return t === Number.NEGATIVE_INFINITY ? e.now() : t;
  }

  /** @internal The policy's algorithm and options, for a snapshot; the fast path only. */
  private snapshotHeader(where: string): Pick<LimiterSnapshot, "algorithm" | "options"> {
    const plans = this.plans;
    if (plans !== undefined) {
      // The plans' names in the algorithm, their options in order as an allOf's parts: a
      // snapshot restores only where every plan is the same.
      const parts = plans.policies.map((p) =>
        (p as unknown as { snapshot(): LimiterSnapshot }).snapshot(),
      );
      const algorithm = `plans ${plans.quoted} of ${parts[parts.length - 1]!.algorithm}`;
      return { algorithm, options: parts.map((part) => part.options) as SnapshotOptions };
    }
    const policy = policies.get(this) as { snapshot?: () => LimiterSnapshot } | undefined;
    if (this.engine === undefined || policy?.snapshot === undefined) {
      throw new TypeError(
        `${where}: a registry on the generic path (a policy function or a custom policy) has no snapshots: snapshot each key's own limiter`,
      );
    }
    const { algorithm, options } = policy.snapshot();
    return { algorithm, options };
  }

  /** @internal A kept slot's saved state; refused while its bucket holds units for waiters. */
  private saveKept(where: string, slot: number): number[] {
    const e = this.engine!;
    if (this.waiters!.hasLedger(slot)) {
      throw new RangeError(
        `${where}: key ${JSON.stringify(e.keys[slot])} has waiters holding units, which cannot leave the process: snapshot once they are served`,
      );
    }
    return e.layout.saveSlot(e.state, slot * e.stride, slot);
  }

  /** @internal Writes a checked state into `key`'s slot (made when not held) at `now`. */
  private loadKey(where: string, key: string, state: readonly number[], now: number): void {
    const e = this.engine!;
    let slot = e.lookup(key);
    if (slot >= 0 && this.waiters!.hasLedger(slot)) {
      throw new RangeError(`${where}: key ${JSON.stringify(key)} has waiters holding units`);
    }
    // The receipts from before stay void while the state they charged could count: until
    // the replaced state's idle time, not only the loaded one's (an empty state's is now).
    const before = slot < 0 ? now : e.layout.idleAtMs(e.state, slot * e.stride, slot, now);
    if (slot < 0) slot = e.insert(key, now);
    if (slot < 0) {
      throw new RangeError(
        `${where}: the registry is full (maxKeys or maxBytes) and cannot keep the key`,
      );
    }
    e.layout.loadSlot(e.state, slot * e.stride, slot, state);
    if (this.guard !== undefined) {
      const idleAt = e.layout.idleAtMs(e.state, slot * e.stride, slot, now);
      this.guard.reset(key, now, idleAt > before ? idleAt : before);
    }
  }

  /**
   * Resolves once `cost` units of the key were taken, first-in, first-out behind the key's earlier
   * waiters, with the policy's own waiting (docs/waiting.md). A key with waiters is never swept or
   * evicted and counts toward the bounds. Rejects (never throws) for a bad key, cost or option,
   * with a `RateLimitError` at once past `maxWaiters` or when a full registry cannot keep the key.
   */
  wait(key: string, cost?: number, options?: WaitOptions): Promise<Decision> {
    return jittered(
      options,
      () => this.waitNow(key, cost, options),
      () => this.refund(key, cost),
    );
  }

  /** @internal {@link wait} without its jitter. */
  private waitNow(key: string, cost?: number, options?: WaitOptions): Promise<Decision> {
    try {
      const k = this.checkKey(key);
      const call = "wait(key, 1, { maxWaitMs: 100 })";
      const c = checkCost(`${WHERE}.wait`, cost, call);
      const { signal } = checkWaitOptions(`${WHERE}.wait`, options, call);
      if (this.map !== undefined) {
        if (signal?.aborted) return Promise.reject(signal.reason);
        return this.map.wait(k, c, options);
      }
      this.plans?.select(k);
      const limit = this.engine!.layout.limit;
      if (!(c <= limit)) throw new RangeError(`${WHERE}.wait: cost ${c} exceeds limit ${limit}`);
      if (signal?.aborted) return Promise.reject(signal.reason);
      if (this.blockedMs(k) > 0) {
        return Promise.reject(
          new RateLimitError(`${WHERE}.wait: the key is blocked`, this.peek(k, c)),
        );
      }
      return this.waiters!.wait(k, c, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Changes the policy of every key live, as the policy's own `reconfigure` (same options:
   * an object for one algorithm, an array per part for an `allOf`): every kept key carries
   * its state over by its algorithm's rule (docs/semantics.md#changing-limits-live), slab
   * and trace table included (a key pushed out earlier comes back as it would be had it been
   * kept, never fresher), keys created later start from the new options, and waiters are
   * re-planned (one whose cost is now above the limit is rejected with the `RangeError` a
   * fresh `wait` gets). The options are checked in full first: a bad one throws and changes
   * nothing. The registry's own options (`maxKeys`, `maxBytes`, `maxKeyLength`,
   * `maxWaiters`, `whenFull`, `sweepIntervalMs`) are not part of it, and the limiter given to
   * the constructor is not changed (it is a template). O(keys); see docs/keyed.md#changing-limits-live.
   * @example
   * const perUser = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))
   * perUser.reconfigure({ refillPerSecond: 2 })
   * @throws {TypeError} For a registry built from a function `(key) => Limiter` (its keys'
   *   limiters are the function's: reconfigure those), a policy without `reconfigure`, or as
   *   the policy's `reconfigure` throws; nothing changes.
   * @throws {RangeError} As the policy's `reconfigure`; nothing changes.
   */
  reconfigure(options: object | readonly (object | undefined)[]): void;
  /**
   * Changes one plan of a registry built from plans (`{ plans, plan }`) live, as
   * {@link reconfigure} changes a registry's one policy: the keys of plan `plan` (kept,
   * pushed out with a trace, waiting) carry their state over to `options`, keys of that
   * plan created later start from them, and the other plans' keys are not touched.
   * Checked in full first: a bad option throws and changes nothing. O(keys).
   * @example
   * perUser.reconfigure("pro", { refillPerSecond: 20 })
   * @throws {TypeError} For a name that is not a plan, a registry not built from plans, or
   *   as the plan's `reconfigure` throws; nothing changes.
   * @throws {RangeError} As the plan's `reconfigure`; nothing changes.
   */
  reconfigure(plan: string, options: object | readonly (object | undefined)[]): void;
  reconfigure(
    planOrOptions: string | object | readonly (object | undefined)[],
    planOptions?: object | readonly (object | undefined)[],
  ): void {
    if (typeof planOrOptions === "string" || this.plans !== undefined) {
      this.reconfigurePlan(planOrOptions, planOptions);
      return;
    }
    const options = planOrOptions;
    const policy = policies.get(this);
    if (policy === undefined) {
      throw new TypeError(
        `${WHERE}.reconfigure: this registry was built from a function (key) => Limiter; reconfigure the limiters it returns, or build it from a limiter`,
      );
    }
    const next = reconfigured(policy, "the policy", options);
    if (this.map !== undefined) {
      this.map.forEach((limiter) => {
        (limiter as unknown as Reconfigurable).planReconfigure(options)();
      });
      this.template = next;
    } else {
      const slab = slabOf(next)!;
      this.retune(slab, slab.bucket, -1);
    }
    policies.set(this, next);
  }

  /** @internal `reconfigure(plan, options)` of a plan registry. */
  private reconfigurePlan(
    name: unknown,
    options: object | readonly (object | undefined)[] | undefined,
  ): void {
    const where = `${WHERE}.reconfigure`;
    const plans = this.plans;
    if (plans === undefined) {
      throw new TypeError(
        `${where}: reconfigure(plan, options) is for a registry built from plans ({ plans, plan }); this one has one policy: reconfigure(options)`,
      );
    }
    if (typeof name !== "string") {
      throw new TypeError(
        `${where}: a registry built from plans changes one plan at a time: reconfigure(plan, options), with plan one of ${plans.quoted}`,
      );
    }
    const id = plans.idOfName(where, name);
    const policy = plans.policies[id]! as CloneableLimiter;
    const next = reconfigured(policy, `plan ${JSON.stringify(name)}`, options);
    const nextSlab = slabOf(next)!;
    const slabs = [...plans.slabs];
    slabs[id] = nextSlab;
    this.retune(joinSlabs(plans.layout.with(id, nextSlab.layout), slabs), nextSlab.bucket, id);
    plans.policies[id] = next;
    plans.slabs[id] = nextSlab;
  }

  /**
   * @internal `reconfigure` on the fast path: every kept key (waiting ones by `bucket`, the
   * waiting numbers of `slab`; of plan id `plan` only, when not -1) carried over to `slab` now,
   * receipts from before voided.
   */
  private retune(slab: Slab, bucket: BucketWaiting | undefined, plan: number): void {
    const e = this.engine!;
    const now = e.now();
    this.guard?.voidAll();
    const waiters = this.waiters!;
    waiters.retune(bucket, now, plan);
    e.retune(slab, now, (slot) => waiters.hasLedger(slot));
    waiters.replan();
  }

  /**
   * `consume(key, cost)` with a {@link Receipt}: the decision, the key, and what the charge
   * took and when, for `refund(receipt, units?)` later (docs/semantics.md#refunds). A
   * denied charge's receipt takes and gives back nothing.
   * @example
   * const receipt = perUser.charge("user-1", 1000) // the most the answer may cost
   * if (receipt.allowed) perUser.refund(receipt, 1000 - used) // settle: give back the rest
   * @throws {TypeError} If `key` is not a string or `cost` not a number; on the generic path,
   *   when the key's limiter has no `charge()`.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `cost` is NaN, negative or infinite.
   */
  charge(key: string, cost?: number): Receipt {
    const k = this.checkKey(key);
    const c = cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost);
    if (this.map !== undefined) {
      const { decision, receipt, atMs } = this.map.charge(k, c);
      if (receipt === undefined) return deniedReceipt(decision, k, atMs, this);
      const until = receipt.refundableUntilMs;
      return new ChargeReceipt(decision, k, c, receipt.atMs, until, this, 0, 0, 0, [
        receipt as ChargeReceipt,
      ]);
    }
    const e = this.engine!;
    const decision = this.consume(k, c);
    const now = e.seen[0]!;
    const slot = decision.allowed && c > 0 ? e.lookup(k) : -1;
    if (slot < 0) return deniedReceipt(decision, k, now, this);
    const layout = e.layout;
    const guard = (this.guard ??= new ReceiptGuard(this.maxKeys));
    const n = layout.leafCount;
    this.asked ??= new Float64Array(n);
    this.given ??= new Float64Array(n);
    this.marks ??= new Float64Array(n);
    const marks = n === 1 ? this.marks : new Float64Array(n);
    const until = layout.markReceipt(e.state, slot * e.stride, slot, now, marks, 0);
    const entry = guard.size === 0 ? undefined : guard.live(k, now);
    if (entry !== undefined && until > entry.untilMs) entry.untilMs = until;
    const many = n === 1 ? undefined : marks;
    return new KeyedReceipt(decision, k, c, now, until, this, guard.epoch, marks[0]!, many, entry);
  }

  /**
   * Gives back units a key took earlier and returns how many came back (docs/semantics.md#refunds).
   * Through the receipt of a {@link charge}: `units` of what it took (default: all it still holds),
   * by the policy's receipt rule (nothing once those units no longer count, nor after a `reset` of
   * the key, a `clear` or a `reconfigure` since the charge). Without one: `cost` units (default 1)
   * of `key`, by the policy's refund rule, never past the fresh state (a `FixedWindow` policy, or
   * an `allOf` with one, refuses: it cannot tell which window the units came from). Waiters of the
   * key that then fit are served first-in, first-out. A key the registry does not hold (never used,
   * idle and dropped, or pushed out) is left as it is: a refund never creates state.
   * @throws {TypeError} If `key` is not a string, `cost` or `units` not a number, the receipt is
   *   another limiter's, a refund without receipt is refused, or (generic path) the key's limiter
   *   has no `refund()`.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `cost` or `units` is NaN,
   *   negative or infinite.
   */
  refund(receipt: Receipt, units?: number): number;
  refund(key: string, cost?: number): number;
  refund(key: string | Receipt, cost?: number): number {
    if (typeof key === "object" && key !== null) return this.refundReceipt(key, cost);
    const k = this.checkKey(key);
    const c = cost === undefined ? 1 : checkCost(`${WHERE}.refund`, cost);
    if (this.map !== undefined) return this.map.refund(k, c);
    const e = this.engine!;
    if (!e.layout.refundsWithoutReceipt) {
      throw new TypeError(
        `${WHERE}.refund: give the receipt of the charge (refund(receipt, units)): the policy has a FixedWindow, which cannot tell which window the units were charged in`,
      );
    }
    const now = e.now();
    const slot = e.lookup(k);
    if (slot < 0 || c === 0) return 0;
    const s = slot * e.stride;
    const guard = this.guard;
    const idleAt = guard === undefined ? 0 : e.layout.idleAtMs(e.state, s, slot, now);
    if (guard !== undefined && !guard.canCredit(k, now)) guard.epoch++; // cannot track it: void all
    const given = (this.given ??= new Float64Array(e.layout.leafCount));
    let credit = e.flags[slot] !== 0 ? this.waiters!.refund(slot, c, now, given) : -1;
    if (credit < 0) credit = e.layout.refundAt(e.state, s, slot, now, c, given, 0);
    if (guard !== undefined && credit > 0) guard.credit(k, now, idleAt, credit);
    // The least any part gave back, as AllOf.refund and the key's own limiter answer: not
    // capped at `c` (a log's or counter's refund may give back a float step more).
    let least = given[0]!;
    for (let i = 1; i < given.length; i++) if (given[i]! < least) least = given[i]!;
    return least;
  }

  /** @internal `refund(receipt, units)`. */
  private refundReceipt(receipt: unknown, units: unknown): number {
    const where = `${WHERE}.refund`;
    const r = checkReceipt(where, receipt, this, units);
    const c = r.receipt;
    const key = c.key!;
    if (this.map !== undefined) {
      const inner = c.parts?.[0];
      if (inner === undefined || r.units === 0) return 0;
      const given = this.map.refundReceipt(key, inner, r.units);
      c.refunded += given;
      return given;
    }
    if (!(c instanceof KeyedReceipt) || r.units === 0) return 0;
    const e = this.engine!;
    const guard = this.guard!;
    const now = e.now();
    if (c.epoch !== guard.epoch) return 0;
    const slot = e.lookup(key);
    if (slot < 0) return 0; // idle and dropped, or pushed out: its units are gone or kept
    const entry = guard.live(key, now);
    let creditSince: number;
    if (c.entry === entry) {
      if (entry !== undefined && entry.epoch !== c.entryEpoch) return 0;
      creditSince = entry === undefined ? 0 : entry.credited - c.credited;
    } else if (c.entry === undefined && entry!.epoch === 0) {
      creditSince = entry!.credited; // made after the charge, by credits only
    } else return 0; // reset since, or its entry's time has passed (so has the receipt's)
    const layout = e.layout;
    const n = layout.leafCount;
    const asked = this.asked!;
    const given = this.given!;
    const by = c.refundedBy;
    for (let i = 0; i < n; i++) {
      const left = c.units - (by === undefined ? c.refunded : by[i]!);
      asked[i] = r.units < left ? r.units : left;
      given[i] = 0;
    }
    const marks = c.marks ?? this.marks!;
    if (c.marks === undefined) marks[0] = c.a;
    const s = slot * e.stride;
    const idleAt = layout.idleAtMs(e.state, s, slot, now);
    if (!guard.canCredit(key, now)) return 0; // a credit it could not record: nothing back
    let credit: number;
    if (e.flags[slot] !== 0 && this.waiters!.hasLedger(slot)) {
      // A waiting bucket key: its ledger holds units for the waiters; give back as refund does.
      const bound = (layout as BucketKernel).receiptBound(c.a, now, asked[0]!, creditSince);
      given[0] = 0;
      credit = bound > 0 ? this.waiters!.refund(slot, bound, now, given) : 0;
    } else {
      credit = layout.refundMarkedAt(e.state, s, slot, now, marks, asked, creditSince, given, 0);
      if (e.flags[slot] !== 0) this.waiters!.wake(slot);
    }
    if (credit > 0) guard.credit(key, now, idleAt, credit);
    if (by === undefined) {
      c.refunded += given[0]!;
      return given[0]!;
    }
    let least = Number.POSITIVE_INFINITY;
    let refunded = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      by[i] = by[i]! + given[i]!;
      if (given[i]! < least) least = given[i]!;
      if (by[i]! < refunded) refunded = by[i]!;
    }
    c.refunded = refunded;
    return least;
  }

  /**
   * Blocks the key for `durationMs` from now (a ban after abuse): every request of it is
   * denied, with `retryAfterMs` and `resetAfterMs` at least the time left, until then; the
   * key's usage is kept and decides again afterwards. A longer block already in place
   * stays (a block never shortens another: {@link unblock} lifts it). A blocked key is kept
   * like any key: it counts toward `maxKeys` and `maxBytes`, is never swept while blocked,
   * and a blocked key pushed out at the bound keeps its block in the block trace, so that no
   * flood of new keys lifts it (docs/keyed.md#blocking). Waits already pending are not
   * cancelled; a new `wait` of a blocked key rejects at once.
   * @throws {TypeError} If `key` is not a string or `durationMs` not a number.
   * @throws {RangeError} If `key` is longer than `maxKeyLength`, or `durationMs` is not a
   *   finite number > 0; on the generic path, when the full registry cannot keep the key.
   */
  block(key: string, durationMs: number): void {
    const k = this.checkKey(key);
    const ms = checkNumber(`${WHERE}.block`, "durationMs", durationMs, 0, false);
    if (this.map !== undefined) this.map.block(k, ms);
    else {
      const now = this.engine!.now();
      this.plans?.select(k);
      this.engine!.block(k, now + ms, now);
    }
  }

  /**
   * Lifts the key's block, if any; its usage stays as it is ({@link reset} lifts the block
   * and forgets the usage). Returns whether the key was blocked.
   * @throws {TypeError} If `key` is not a string. {RangeError} If it is longer than `maxKeyLength`.
   */
  unblock(key: string): boolean {
    const blocked = this.blockedMs(key) > 0; // checks the key
    if (this.map !== undefined) this.map.lift(key);
    else this.engine!.unblock(key);
    return blocked;
  }

  /**
   * Milliseconds until the key's block ends; 0 when it is not blocked. Changes nothing.
   * @throws {TypeError} If `key` is not a string. {RangeError} If it is longer than `maxKeyLength`.
   */
  blockedMs(key: string): number {
    const k = this.checkKey(key);
    if (this.map !== undefined) return this.map.blockedMs(k);
    const e = this.engine!;
    const now = e.now();
    const slot = e.lookup(k);
    return slot >= 0 ? e.blockedMs(slot, now) : e.tracedBlockMs(k, now);
  }

  /**
   * Forgets the key's usage and lifts its block: its next request starts fresh. Pending
   * waiters keep waiting.
   */
  reset(key: string): void {
    const k = this.checkKey(key);
    if (this.map !== undefined) this.map.reset(k);
    else {
      const guard = this.guard;
      if (guard !== undefined) {
        const e = this.engine!;
        const now = e.now();
        const slot = e.lookup(k);
        const idleAt = slot < 0 ? now : e.layout.idleAtMs(e.state, slot * e.stride, slot, now);
        guard.reset(k, now, idleAt);
      }
      this.engine!.unblock(k);
      if (!this.waiters!.reset(k)) this.engine!.reset(k);
    }
  }

  /** Forgets every key. Pending waiters keep waiting; `stats` keep counting. */
  clear(): void {
    this.guard?.voidAll();
    if (this.map !== undefined) this.map.clear();
    else {
      this.waiters!.resetAll();
      this.engine!.clear();
    }
  }

  /** Drops every key whose state is fresh again, now; returns how many it dropped. */
  sweep(): number {
    return (this.engine ?? this.map!).sweep();
  }

  /**
   * @internal Checks a key: a string of at most `maxKeyLength` code units.
   * @throws {TypeError} For a non-string; {RangeError} for a longer key.
   */
  protected checkKey(key: unknown): string {
    checkKey(key);
    if ((key as string).length > this.maxKeyLength) {
      throw new RangeError(
        `${WHERE}: key must be at most maxKeyLength (${this.maxKeyLength}) UTF-16 code units, got ${(key as string).length}`,
      );
    }
    return key as string;
  }

  /** @internal `allow` of a key without a slot (fast path). */
  protected allowNew(key: string, cost: number, now: number): boolean {
    const e = this.engine!;
    this.plans?.select(key);
    if (e.tracedBlockMs(key, now) > 0) return false;
    if (e.traceOf(key, now) < 0) {
      const scratch = this.scratch!;
      e.layout.init(scratch, 0, -1, now);
      // A new key denied, or asked for nothing, is kept only when it does not start idle
      // (fewer initial tokens): its refill runs from its first use, as a new
      // TokenBucket's from its construction.
      if (cost === 0 || !e.layout.fitsAt(scratch, 0, -1, now, cost)) {
        if (!e.layout.isIdle(scratch, 0, -1, now)) e.insert(key, now);
        return cost === 0;
      }
    } else if (cost === 0) return true;
    const slot = e.insert(key, now);
    if (slot < 0) return false;
    if (e.flags[slot] !== 0) return this.decideKept(slot, cost, now, true).allowed;
    return e.layout.allowAt(e.state, slot * e.stride, slot, now, cost);
  }

  /** @internal `consume` of a key without a slot (fast path). */
  protected consumeNew(key: string, cost: number, now: number): Decision {
    const e = this.engine!;
    if (e.tracedBlockMs(key, now) > 0) return this.peekNew(key, cost, now); // blocked
    this.plans?.select(key);
    if (e.traceOf(key, now) < 0) {
      const fresh = this.decideWithoutSlot(key, cost, now);
      // As allowNew: a fresh state that is not idle is kept, even when denied.
      if (!fresh.allowed || cost === 0) {
        if (!e.layout.isIdle(this.scratch!, 0, -1, now)) e.insert(key, now);
        return fresh;
      }
    }
    const slot = e.insert(key, now);
    if (slot < 0) return this.refusal(now);
    return this.decideKept(slot, cost, now, true);
  }

  /**
   * @internal `peek` of a key without a slot: as `consume` would answer, a refusal while
   * the registry is full and cannot keep it, else {@link decideWithoutSlot}.
   */
  protected peekNew(key: string, cost: number, now: number): Decision {
    const decision = this.decideWithoutSlot(key, cost, now);
    const blockedMs = this.engine!.tracedBlockMs(key, now);
    if (blockedMs > 0) return this.blocked(decision, key, -1, now, blockedMs);
    if (decision.allowed && cost > 0 && this.engine!.wouldRefuse(key, now)) {
      return this.refusal(now);
    }
    return decision;
  }

  /** @internal The decision of a key without a slot: a fresh state, or the one its trace gives. */
  protected decideWithoutSlot(key: string, cost: number, now: number): Decision {
    return this.engine!.layout.decideAt(this.unkept(key, now), 0, -1, now, cost, false);
  }

  /** @internal The scratch slot, holding the state of slotless `key` (its plan selected first). */
  private unkept(key: string, now: number): Float64Array {
    const e = this.engine!;
    this.plans?.select(key);
    const scratch = this.scratch!;
    const o = e.traceOf(key, now);
    if (o < 0) e.layout.init(scratch, 0, -1, now);
    else e.layout.restore(scratch, 0, -1, e.trace, o, now);
    return scratch;
  }

  /**
   * @internal The decision of a kept slot: a blocked key's denial (its state peeked); for a
   * pinned slot (a key with waiters), a bucket ledger holding units for them decides; else
   * the slot as usual.
   */
  protected decideKept(slot: number, cost: number, now: number, take: boolean): Decision {
    const e = this.engine!;
    const flags = e.flags[slot]!;
    if (flags === 0) return e.layout.decideAt(e.state, slot * e.stride, slot, now, cost, take);
    const blockedMs = (flags & BLOCKED) !== 0 ? e.blockedMs(slot, now) : 0;
    const t = take && !(blockedMs > 0);
    const decision =
      this.waiters!.decide(slot, cost, now, t) ??
      e.layout.decideAt(e.state, slot * e.stride, slot, now, cost, t);
    return blockedMs > 0 ? this.blocked(decision, e.keys[slot]!, slot, now, blockedMs) : decision;
  }

  /**
   * @internal The denial of a blocked key, from its state's decision `state` for the cost
   * (peeked): nothing usable until the block ends (`blockedMs` from now) and the state
   * allows; `resetAfterMs` is when both the block and the usage are over.
   */
  protected blocked(
    state: Decision,
    key: string,
    slot: number,
    now: number,
    blockMs: number,
  ): Decision {
    let resetAfterMs = state.resetAfterMs;
    if (state.allowed) {
      // The allowed state counts the cost in its reset: the usage without it is wanted.
      const e = this.engine!;
      resetAfterMs =
        slot < 0
          ? this.decideWithoutSlot(key, 0, now).resetAfterMs
          : e.layout.decideAt(e.state, slot * e.stride, slot, now, 0, false).resetAfterMs;
    }
    return blockedDenial(state.limit, state.retryAfterMs, resetAfterMs, decisionMs(blockMs));
  }

  /** @internal The denial of a new key the full registry could not keep (`whenFull: "refuse"`). */
  protected refusal(now: number): Decision {
    const soonest = this.engine!.soonestIdleMs;
    const { limit } = this.engine!.layout;
    const ms =
      soonest > now && soonest !== Number.POSITIVE_INFINITY
        ? decisionMs(soonest - now)
        : REFUSED_RETRY_MS;
    // Nothing is kept for the key, nor usable until then.
    return { allowed: false, limit, remaining: 0, retryAfterMs: ms, resetAfterMs: ms };
  }
}

/**
 * A copy of `policy` (`what`, for the error) that took `options`: they are checked in full
 * before any key changes.
 * @throws {TypeError} For a policy without `reconfigure`; as its `reconfigure` throws.
 */
function reconfigured(policy: CloneableLimiter, what: string, options: unknown): CloneableLimiter {
  if (!isReconfigurable(policy)) {
    throw new TypeError(
      `${WHERE}.reconfigure: ${what} (${describe(policy)}) has no reconfigure(options)`,
    );
  }
  const next = policy.clone() as CloneableLimiter & Reconfigurable;
  next.planReconfigure(options)();
  return next;
}

/** Checks `whenFull`. @throws {TypeError} For anything but "evict" or "refuse". */
function checkWhenFull(value: unknown): "evict" | "refuse" {
  if (value === undefined) return "evict";
  if (value === "evict" || value === "refuse") return value;
  const lower = typeof value === "string" ? value.toLowerCase() : "";
  const hint = lower === "evict" || lower === "refuse" ? ` (did you mean "${lower}"?)` : "";
  throw new TypeError(
    `${WHERE}: whenFull must be "evict" or "refuse", got ${describe(value)}${hint}`,
  );
}

/** What a snapshot's `blocks` holds instead of two arrays of one length, as words. */
function blocksShape(blocks: unknown, keys: unknown, untilMs: unknown): string {
  if (blocks === null || typeof blocks !== "object" || Array.isArray(blocks)) {
    return describe(blocks);
  }
  if (!Array.isArray(keys)) return `keys ${describe(keys)}`;
  if (!Array.isArray(untilMs)) return `untilMs ${describe(untilMs)}`;
  return `${keys.length} keys and ${untilMs.length} untilMs`;
}
