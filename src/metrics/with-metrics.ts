/**
 * `withMetrics(limiter, options)`: a wrapper that counts a limiter's decisions. Counting
 * lives in a wrapper, not in the limiters, so a limiter without it pays nothing: the
 * fast paths of `KeyedLimiter` are untouched (docs/metrics.md#where-the-counters-live). @module
 */
import {
  checkInteger,
  checkNumber,
  checkOptionNames,
  checkOptions,
  hasMethods,
  mustBe,
} from "../core/errors.js";
import {
  type Decision,
  isUnkeyedLimiter,
  type Limiter,
  type Receipt,
  UnkeyedLimiterBase,
  type WaitOptions,
} from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";
import { keyedPolicyOf } from "../keyed/keyed-limiter.js";
import { type NearLimitKey, NearLimitKeys } from "./near-limit-keys.js";
import type { CircuitState, StoreHealth } from "./store-health.js";

/** Options of {@link withMetrics}. */
export interface MetricsOptions {
  /** The `limiter` label of every series (1 to 128 code units, unique per exposition). @default "default" */
  readonly name?: string | undefined;
  /**
   * An allowed decision is near its limit when `remaining <= nearLimitShare * limit`
   * (a share from 0 to 1). @default 0.1
   */
  readonly nearLimitShare?: number | undefined;
  /**
   * Keep the keys seen near their limit most often, at most this many (0 to 100): a bounded
   * top-N, never one series per client. @default 0 (none kept)
   */
  readonly nearLimitKeys?: number | undefined;
  /**
   * The store's health, read at each scrape; by default the limiter's own `storeHealth()`
   * when it has one. See {@link StoreHealth}.
   */
  readonly store?: (() => StoreHealth) | undefined;
}

const OPTIONS = optionNames<MetricsOptions>()(["name", "nearLimitShare", "nearLimitKeys", "store"]);
const HINTS: Readonly<Record<string, string>> = {
  label: 'use "name" (the limiter label)',
  prefix: 'use "name" (the limiter label); metric names are fixed (tollgate_*)',
  threshold: 'use "nearLimitShare" (a share of the limit, 0 to 1)',
  nearLimit: 'use "nearLimitShare" (a share of the limit, 0 to 1)',
  topKeys: 'use "nearLimitKeys" (most keys kept, 0 to 100)',
};

/** `value` when it is a number, else `undefined`. */
function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === "number" ? value : undefined;
}

/** A number option of `limiter`, or of the policy a `KeyedLimiter` copies; `undefined` if none. */
function ownOrPolicy(
  limiter: unknown,
  name: "windowMs" | "refillPerSecond" | "leakPerSecond",
): number | undefined {
  const own = (limiter as Record<string, unknown>)[name];
  return numberOrUndefined(
    own ?? (keyedPolicyOf(limiter) as Record<string, unknown> | undefined)?.[name],
  );
}

/** Most keys {@link MetricsOptions.nearLimitKeys} may keep. */
export const MAX_NEAR_LIMIT_KEYS = 100;

/** A snapshot of one limiter's metrics: plain data, counters since the wrapper was made. */
export interface LimiterMetrics {
  /** The `limiter` label. */
  readonly name: string;
  /** Decisions that allowed the request (`allow`, `consume`, a granted `wait`). */
  readonly allowed: number;
  /** Decisions that denied it (a rejected `wait` with a `RateLimitError` too). */
  readonly denied: number;
  /** Allowed decisions that left `remaining <= nearLimitShare * limit` (counted by `consume` and `wait`). */
  readonly nearLimit: number;
  /** The share `nearLimit` is counted at. */
  readonly nearLimitShare: number;
  /** Keys kept now, for a keyed limiter with `size`; else `undefined`. */
  readonly keys: number | undefined;
  /** The registry's `stats` (evictions, refusals), for a `KeyedLimiter`; else `undefined`. */
  readonly evictedIdle: number | undefined;
  /** Keys dropped while in use (at `maxKeys`/`maxBytes`). */
  readonly evictedLossy: number | undefined;
  /** New keys refused by a full registry. */
  readonly refused: number | undefined;
  /** The store's health, for a store-backed limiter; else `undefined`. */
  readonly store: StoreHealth | undefined;
  /** The top near-limit keys (empty unless `nearLimitKeys` > 0), most hits first. */
  readonly nearLimitKeys: readonly NearLimitKey[];
}

/** Anything that gives a {@link LimiterMetrics} snapshot: what `metricsText` and `observeMetrics` read. */
export interface MetricsSource {
  metrics(): LimiterMetrics;
}

/** A keyed limiter `withMetrics` can wrap: `consume(key, cost)`, sync or async. */
export interface KeyedDecider {
  consume(key: string, cost?: number): Decision | PromiseLike<Decision>;
}

/** The checked options. @internal */
interface MetricsConfig {
  readonly name: string;
  readonly share: number;
  readonly top: NearLimitKeys | undefined;
  readonly store: (() => StoreHealth) | undefined;
  /** A store-backed limiter's `circuits()`, when `store` is not given. */
  readonly circuits:
    | (() => readonly { node: string | undefined; state: CircuitState }[])
    | undefined;
}

function checkMetricsOptions(where: string, limiter: object, options: unknown): MetricsConfig {
  const o = options === undefined ? {} : checkOptions<MetricsOptions>(where, options);
  checkOptionNames(where, o, OPTIONS, HINTS);
  const name = o.name ?? "default";
  if (typeof name !== "string" || name.length < 1 || name.length > 128) {
    const Type = typeof name === "string" ? RangeError : TypeError;
    throw mustBe(where, "name", "a string of 1 to 128 code units", name, Type);
  }
  const share =
    o.nearLimitShare === undefined
      ? 0.1
      : checkNumber(where, "nearLimitShare", o.nearLimitShare, 0, true);
  if (share > 1) throw mustBe(where, "nearLimitShare", "a finite number from 0 to 1", share);
  const topN =
    o.nearLimitKeys === undefined
      ? 0
      : checkInteger(where, "nearLimitKeys", o.nearLimitKeys, 0, MAX_NEAR_LIMIT_KEYS);
  if (o.store !== undefined && typeof o.store !== "function") {
    throw mustBe(where, "store", "a function () => StoreHealth", o.store, TypeError);
  }
  const own = (limiter as { storeHealth?: unknown }).storeHealth;
  const store =
    o.store ??
    (typeof own === "function" ? () => (own as () => StoreHealth).call(limiter) : undefined);
  const circuitsOf = (limiter as { circuits?: unknown }).circuits;
  const circuits =
    store === undefined && typeof circuitsOf === "function"
      ? () => (circuitsOf as NonNullable<MetricsConfig["circuits"]>).call(limiter)
      : undefined;
  return { name, share, top: topN > 0 ? new NearLimitKeys(topN) : undefined, store, circuits };
}

/** The snapshot of counters and what the limiter itself tells. @internal */
function snapshot(config: MetricsConfig, counts: Counts, limiter: object): LimiterMetrics {
  const circuits = config.circuits;
  const store =
    config.store?.() ??
    (circuits === undefined
      ? undefined
      : {
          failures: counts.storeFailures,
          circuits: circuits().map(({ node, state }) => ({ node: node ?? "", state })),
        });
  const stats = (limiter as { stats?: unknown }).stats as
    | { evictedIdle?: unknown; evictedLossy?: unknown; refused?: unknown }
    | undefined;
  return {
    name: config.name,
    allowed: counts.allowed,
    denied: counts.denied,
    nearLimit: counts.nearLimit,
    nearLimitShare: config.share,
    keys: numberOrUndefined((limiter as { size?: unknown }).size),
    evictedIdle: numberOrUndefined(stats?.evictedIdle),
    evictedLossy: numberOrUndefined(stats?.evictedLossy),
    refused: numberOrUndefined(stats?.refused),
    store,
    nearLimitKeys: config.top?.top() ?? [],
  };
}

/** The counters of a metered limiter. @internal */
interface Counts {
  allowed: number;
  denied: number;
  nearLimit: number;
  readonly storeFailures: number;
}

/** Counts `d` on `counts`; a near-limit one of `key` is a hit of `config.top` too. @internal */
function countDecision(counts: Counts, config: MetricsConfig, d: Decision, key?: string): void {
  if (!d.allowed) {
    counts.denied++;
    return;
  }
  counts.allowed++;
  if (d.remaining <= config.share * d.limit) {
    counts.nearLimit++;
    if (key !== undefined) config.top?.hit(key);
  }
}

/** The methods a {@link MeteredKeyedLimiter} forwards when its limiter has them. */
const FORWARDED = ["refund", "block", "blockOnce", "blockedMs", "unblock", "reconfigure"] as const;

/** True for a store-backed decision answered by the failure policy instead of the store. */
function isPolicyAnswer(d: Decision): boolean {
  const source = (d as { source?: unknown }).source;
  return source === "local" || source === "open" || source === "closed";
}

/** A wrong argument (a programming error), not a store failure. */
function isArgumentError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof RangeError;
}

/**
 * `waiting` (a `wait`), its grant passed to `count`, its rejection with a `RateLimitError`
 * (of any copy of tollgate) counted as a denial of `metered`.
 */
function countedWait(
  waiting: Promise<Decision>,
  metered: Counts,
  config: MetricsConfig,
  key?: string,
): Promise<Decision> {
  return waiting.then(
    (d) => {
      countDecision(metered, config, d, key);
      return d;
    },
    (error: unknown) => {
      if (error instanceof Error && error.name === "RateLimitError") metered.denied++;
      throw error;
    },
  );
}

/**
 * A keyed limiter (a `KeyedLimiter`, a `tollgate/redis` limiter, any `consume(key, cost)`)
 * that counts its decisions; every method forwards to `limiter`. `peek` counts nothing.
 * Made by {@link withMetrics}.
 */
export class MeteredKeyedLimiter<L extends KeyedDecider = KeyedDecider> implements MetricsSource {
  /** Decisions counted so far. @internal */
  allowed = 0;
  /** @internal */
  denied = 0;
  /** @internal */
  nearLimit = 0;
  /** @internal Async calls answered by a failure policy (`source` local/open/closed) or rejected. */
  storeFailures = 0;
  /** @internal */
  private readonly config: MetricsConfig;

  /**
   * `limiter.refund(key, cost)`, when the wrapped limiter has it (`KeyedLimiter`, the Redis
   * limiters): so `tollgate/http`'s `refundIf` works through the wrapper. A store's
   * rejection counts as a store failure.
   */
  declare readonly refund?: (key: string, cost?: number) => unknown;
  /** `limiter.block(key, durationMs)`, when it has it; a store's rejection counts as a store failure. */
  declare readonly block?: (key: string, durationMs: number) => unknown;
  /** `limiter.blockOnce(key, durationMs)` (the Redis limiters), when it has it; counted as {@link block}. */
  declare readonly blockOnce?: (key: string, durationMs: number) => unknown;
  /** `limiter.blockedMs(key)` (`KeyedLimiter`), when it has it. */
  declare readonly blockedMs?: (key: string) => number;
  /** `limiter.unblock(key)` (`KeyedLimiter`), when it has it. */
  declare readonly unblock?: (key: string) => boolean;
  /** `limiter.reconfigure(options)`, when it has it. */
  declare readonly reconfigure?: (options: object) => void;
  /**
   * `limiter.charge(key, cost)` (`consume` with a receipt: a `KeyedLimiter`, the Redis
   * limiters), when it has it, counted as {@link consume}: `tollgate/http` charges through it.
   */
  declare readonly charge?: (key: string, cost?: number) => Receipt | PromiseLike<Receipt>;

  /** `limiter` is the one wrapped; see {@link withMetrics} for the options. */
  constructor(
    readonly limiter: L,
    options?: MetricsOptions,
  ) {
    this.config = checkMetricsOptions("withMetrics", limiter, options);
    // Forwarded only when the wrapped limiter has them, so that `tollgate/http`'s checks at
    // creation (`refundIf`, `blockDurationMs`) see what the limiter can do.
    const target = limiter as unknown as Record<string, unknown>;
    const charge = target.charge;
    if (typeof charge === "function") {
      Object.defineProperty(this, "charge", {
        value: (key: string, cost?: number) =>
          this.counted(key, charge.call(limiter, key, cost) as ReturnType<L["consume"]>),
      });
    }
    for (const name of FORWARDED) {
      const method = target[name];
      if (typeof method !== "function") continue;
      const counted = name === "refund" || name === "block" || name === "blockOnce";
      Object.defineProperty(this, name, {
        value: (...args: unknown[]) => {
          const result: unknown = method.apply(limiter, args);
          if (counted && typeof (result as PromiseLike<unknown>)?.then === "function") {
            (result as PromiseLike<unknown>).then(undefined, (error: unknown) => {
              if (!isArgumentError(error)) this.storeFailures++;
            });
          }
          return result;
        },
      });
    }
  }

  /** The `limiter` label. */
  get name(): string {
    return this.config.name;
  }

  /** The wrapped limiter's `windowMs` (or its policy's), for the `w=` of `tollgate/http`. */
  get windowMs(): number | undefined {
    return ownOrPolicy(this.limiter, "windowMs");
  }

  /** The wrapped bucket's `refillPerSecond` (or its policy's), for the `t=` of `tollgate/http`. */
  get refillPerSecond(): number | undefined {
    return ownOrPolicy(this.limiter, "refillPerSecond");
  }

  /** The wrapped bucket's `leakPerSecond` (or its policy's), for the `t=` of `tollgate/http`. */
  get leakPerSecond(): number | undefined {
    return ownOrPolicy(this.limiter, "leakPerSecond");
  }

  /** The wrapped limiter's `maxKeyLength`, when it has one. */
  get maxKeyLength(): number | undefined {
    return numberOrUndefined((this.limiter as { maxKeyLength?: unknown }).maxKeyLength);
  }

  /** `limiter.allow(key, cost)`, counted (no near-limit: `allow` gives no `remaining`). */
  allow(key: string, cost?: number): boolean {
    const ok = (this.limiter as unknown as { allow(k: string, c?: number): boolean }).allow(
      key,
      cost,
    );
    if (ok) this.allowed++;
    else this.denied++;
    return ok;
  }

  /** `limiter.consume(key, cost)`, counted when it answers (a promise: when it resolves). */
  consume(key: string, cost?: number): ReturnType<L["consume"]> {
    return this.counted(key, this.limiter.consume(key, cost) as ReturnType<L["consume"]>);
  }

  /** @internal Counts a decision (or a promise of one) of `key` when it answers. */
  private counted(key: string, result: ReturnType<L["consume"]>): ReturnType<L["consume"]> {
    if (typeof (result as Decision).allowed === "boolean") {
      countDecision(this, this.config, result as Decision, key);
    } else if (typeof (result as PromiseLike<Decision>)?.then === "function") {
      (result as PromiseLike<Decision>).then(
        (d) => {
          if (isPolicyAnswer(d)) this.storeFailures++;
          countDecision(this, this.config, d, key);
        },
        (error: unknown) => {
          if (!isArgumentError(error)) this.storeFailures++;
        },
      );
    }
    return result as ReturnType<L["consume"]>;
  }

  /** `limiter.peek(key, cost)`: counts nothing. */
  peek(key: string, cost?: number): Decision | PromiseLike<Decision> {
    return (this.limiter as unknown as { peek(k: string, c?: number): Decision }).peek(key, cost);
  }

  /** `limiter.wait(key, cost, options)`: a grant counts as allowed, a `RateLimitError` as denied. */
  wait(key: string, cost?: number, options?: WaitOptions): Promise<Decision> {
    const waiting = (
      this.limiter as unknown as { wait(k: string, c?: number, o?: WaitOptions): Promise<Decision> }
    ).wait(key, cost, options);
    return countedWait(waiting, this, this.config, key);
  }

  /** `limiter.reset(key)`. */
  reset(key: string): unknown {
    return (this.limiter as unknown as { reset(k: string): unknown }).reset(key);
  }

  /** A snapshot of the counters and of what the limiter tells (keys, evictions, store). */
  metrics(): LimiterMetrics {
    return snapshot(this.config, this, this.limiter);
  }
}

/**
 * An unkeyed limiter that counts its decisions (every method forwards; `peek` counts nothing). A
 * limiter itself: `tollgate/http` takes it as one global limit. Made by {@link withMetrics}.
 */
export class MeteredLimiter extends UnkeyedLimiterBase implements Limiter, MetricsSource {
  /** @internal Always 0: an unkeyed limiter has no store. */
  readonly storeFailures = 0;
  /** @internal */
  allowed = 0;
  /** @internal */
  denied = 0;
  /** @internal */
  nearLimit = 0;
  /** @internal */
  private readonly config: MetricsConfig;

  /** `limiter` is the one wrapped; see {@link withMetrics} for the options. */
  constructor(
    readonly limiter: Limiter,
    options?: MetricsOptions,
  ) {
    super();
    this.config = checkMetricsOptions("withMetrics", limiter, options);
  }

  /** The `limiter` label. */
  get name(): string {
    return this.config.name;
  }

  /** The wrapped limiter's `windowMs`, for the `w=` of `tollgate/http`. */
  get windowMs(): number | undefined {
    return ownOrPolicy(this.limiter, "windowMs");
  }

  /** The wrapped bucket's `refillPerSecond`, for the `t=` of `tollgate/http`. */
  get refillPerSecond(): number | undefined {
    return ownOrPolicy(this.limiter, "refillPerSecond");
  }

  /** The wrapped bucket's `leakPerSecond`, for the `t=` of `tollgate/http`. */
  get leakPerSecond(): number | undefined {
    return ownOrPolicy(this.limiter, "leakPerSecond");
  }

  allow(cost?: number): boolean {
    const ok = this.limiter.allow(cost);
    if (ok) this.allowed++;
    else this.denied++;
    return ok;
  }

  consume(cost?: number): Decision {
    const d = this.limiter.consume(cost);
    countDecision(this, this.config, d);
    return d;
  }

  peek(cost?: number): Decision {
    return this.limiter.peek(cost);
  }

  reset(): void {
    this.limiter.reset();
  }

  isIdle(): boolean {
    return this.limiter.isIdle();
  }

  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return countedWait(this.limiter.wait(cost, options), this, this.config);
  }

  /** A snapshot of the counters. */
  metrics(): LimiterMetrics {
    return snapshot(this.config, this, this.limiter);
  }
}

/**
 * Wraps a limiter so that its decisions are counted: allowed, denied, near the limit, plus
 * what the limiter tells (keys, evictions, the store's health). Read them with `metrics()`,
 * `metricsText` (Prometheus) or `observeMetrics` (OpenTelemetry). Use the wrapper in place
 * of the limiter; an unwrapped limiter pays nothing (docs/metrics.md).
 * @throws {TypeError} For an unknown option or a limiter without `consume`; {RangeError} for a bad value.
 * @example
 * const api = withMetrics(new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })), { name: "api" });
 */
export function withMetrics(limiter: Limiter, options?: MetricsOptions): MeteredLimiter;
export function withMetrics<L extends KeyedDecider>(
  limiter: L,
  options?: MetricsOptions,
): MeteredKeyedLimiter<L>;
export function withMetrics(
  limiter: Limiter | KeyedDecider,
  options?: MetricsOptions,
): MeteredLimiter | MeteredKeyedLimiter {
  if (isUnkeyedLimiter(limiter)) return new MeteredLimiter(limiter, options);
  if (!hasMethods(limiter, "consume")) {
    const range = "a tollgate limiter or an object with consume(key, cost)";
    throw mustBe("withMetrics", "limiter", range, limiter, TypeError);
  }
  return new MeteredKeyedLimiter(limiter as KeyedDecider, options);
}
