/**
 * The registry's performance targets, each judged on one run: a ratio to a reference row
 * measured in that same run (a bare `performance.now()`, a bare `Map.get` over the same keys
 * and access sequence, the keyed `TokenBucket` row, a peer's row), or an absolute bound
 * (bytes per key, microseconds per new key). Nothing here asserts: a missed target is
 * reported, never a failed run.
 * @module
 */
import { ALGORITHMS } from "../algorithms.bench.js";
import { PEERS } from "../peers.js";
import { ns } from "./format.js";
import { globalTargets, httpLeasedTarget } from "./global-section.js";
import { count, keyPatterns, newKeyBound } from "./keys.js";
import type { RunResults } from "./report.js";

/** How a value is held against its bound: at most (`<=`) or strictly below (`<`). */
export type Comparison = "<=" | "<";

/** One performance target as judged on one run. */
export interface Target {
  /** The part of the run that measures it. */
  readonly section: "core" | "http" | "redis" | "global";
  /** What is compared with what, in words. */
  readonly target: string;
  /** The measurements the value comes from (`58.2 ns vs 44.9 ns`), or `not measured`. */
  readonly measured: string;
  /** The bound as printed: `<= 1.2x`, `<= 40 B`, `< 1x`. */
  readonly bound: string;
  /**
   * The value as printed: a ratio target's ratio (`1.30x`); for an absolute bound (bytes,
   * microseconds) the value over the bound (`1.34x the bound`); `–` when not measured.
   */
  readonly ratio: string;
  /** The value judged (a ratio, bytes, microseconds); undefined when not measured. */
  readonly value: number | undefined;
  /** The bound's number, in the value's unit. */
  readonly limit: number;
  readonly comparison: Comparison;
  /** Undefined when not measured, or (HTTP) when the difference is inside the noise. */
  readonly met: boolean | undefined;
}

/** keyed TokenBucket, one hot key, over a bare `performance.now()`. */
export const HOT_LIMIT = 1.2;
/** keyed TokenBucket, 100k random keys, over `Map.get` (same keys, same order) + `performance.now()`. */
export const MEDIUM_LIMIT = 1.25;
/** keyed TokenBucket, 1M random keys, over `Map.get` + `performance.now()`. */
export const LARGE_LIMIT = 1.4;
/** Any keyed policy at 100k random keys, over the keyed TokenBucket row. */
export const POLICY_LIMIT = 2;
/** keyed TokenBucket with `coarseClock()`, one hot key, over a bare `performance.now()`. */
export const COARSE_LIMIT = 0.5;
/** Bytes per key beyond the key string, at 1M keys: the buckets and the fixed window. */
export const BYTES_LIMIT = 40;
/** The same for the policies with more state: the sliding counter and `allOf` of two. */
export const WIDE_BYTES_LIMIT = 48;
/** A keyed `SlidingWindowLog`: bytes per key beyond the key string and its entries, at 1M keys. */
export const LOG_KEY_BYTES_LIMIT = 120;
/** A keyed `SlidingWindowLog`: bytes per live entry (ten entries per key against one). */
export const LOG_ENTRY_BYTES_LIMIT = 16;
/** tollgate over rate-limiter-flexible (at least 4 times faster). */
export const RLF_LIMIT = 0.25;
/** tollgate over any peer (faster: strictly below 1). */
export const PEER_LIMIT = 1;
/** Microseconds per new key at the bound (a full registry of keys in use). */
export const NEW_KEY_LIMIT_US = 1;
/** tollgate's Redis checks: server CPU per check over rate-limiter-flexible's `RateLimiterRedis`. */
export const REDIS_CPU_LIMIT = 1.3;
/** tollgate's Redis checks: sequential p50 over a bare `PING` on the same connection. */
export const REDIS_PING_LIMIT = 1.15;
/** Share of no-limiter HTTP throughput the in-process limiter may cost. */
export const HTTP_LIMIT = 0.05;

/** The policies timed at 100k keys against the keyed TokenBucket row: id part and label. */
export const POLICY_ROWS: readonly { readonly id: string; readonly label: string }[] = [
  ...ALGORITHMS.filter((a) => a.name !== "TokenBucket").map((a) => ({
    id: `${a.name}.keyed`,
    label: `KeyedLimiter(${a.name})`,
  })),
  { id: "TokenBucket.allOf", label: "KeyedLimiter(allOf(TokenBucket, TokenBucket))" },
];

/** The memory rows with a bytes-per-key target: memory variant id (bench/memory.ts) and label. */
export const MEMORY_ROWS: readonly {
  readonly id: string;
  readonly label: string;
  /** Its bound in bytes per key. */
  readonly limit: number;
}[] = [
  // The log keeps entries beyond its key: its own two targets below.
  ...ALGORITHMS.filter((a) => a.name !== "SlidingWindowLog").map((a) => ({
    id: `tollgate.${a.name}`,
    label: `KeyedLimiter(${a.name})`,
    limit: a.name === "SlidingWindowCounter" ? WIDE_BYTES_LIMIT : BYTES_LIMIT,
  })),
  {
    id: "tollgate.TokenBucket.allOf",
    label: "KeyedLimiter(allOf(TokenBucket, TokenBucket))",
    limit: WIDE_BYTES_LIMIT,
  },
];

/** The policies timed with a new key at the bound: timing id and label. */
export const NEW_KEY_ROWS: readonly { readonly id: string; readonly label: string }[] = [
  ...ALGORITHMS.map((a) => ({ id: `${a.name}.keyed.new-key`, label: `KeyedLimiter(${a.name})` })),
  { id: "TokenBucket.allOf.new-key", label: "KeyedLimiter(allOf(TokenBucket, TokenBucket))" },
  {
    id: "allOf.TokenBucket+FixedWindow.new-key",
    label: "KeyedLimiter(allOf(TokenBucket, FixedWindow))",
  },
];

/** A ratio with two decimals, or three when it is within 0.5% of 1 (a near tie). */
export function times(v: number): string {
  return `${v.toFixed(Math.abs(v - 1) < 0.005 ? 3 : 2)}x`;
}

/** Whether `value` keeps its bound; undefined when it was not measured (or is not finite). */
export function judge(
  value: number | undefined,
  comparison: Comparison,
  limit: number,
): boolean | undefined {
  if (value === undefined || !Number.isFinite(value)) return undefined;
  return comparison === "<" ? value < limit : value <= limit;
}

/**
 * The verdict column: `not judged (quick run)` in quick mode (short timings and small key
 * sets say nothing about a target), `too wide to judge` when its rounds' spread is too wide
 * with the bound inside it (bench/support/spread.ts), else `pass`, `miss`, `not measured`,
 * or `within noise` (measured, but no verdict: the HTTP difference was inside the noise).
 */
export function verdict(t: Target & { readonly tooWide?: boolean }, quick: boolean): string {
  if (quick) return "not judged (quick run)";
  if (t.tooWide === true) return "too wide to judge";
  if (t.met === undefined) return t.value === undefined ? "not measured" : "within noise";
  return t.met ? "pass" : "miss";
}

/** `a / b`, or undefined when either is missing or `b` is not a positive number. */
export function div(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || !(b > 0) || !Number.isFinite(a) ? undefined : a / b;
}

/** `a + b`, or undefined when either is missing. */
function sum(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined ? undefined : a + b;
}

/** A target stated as a ratio of two rows of the run: `subject / reference <= limit`. */
export function ratioTarget(
  name: string,
  subject: number | undefined,
  reference: number | undefined,
  limit: number,
  options: { comparison?: Comparison; measured?: string } = {},
): Target {
  const comparison = options.comparison ?? "<=";
  const value = div(subject, reference);
  return {
    section: "core",
    target: name,
    measured:
      value === undefined
        ? "not measured"
        : (options.measured ?? `${ns(subject)} ns vs ${ns(reference)} ns`),
    bound: `${comparison} ${limit}x`,
    ratio: value === undefined ? "–" : times(value),
    value,
    limit,
    comparison,
    met: judge(value, comparison, limit),
  };
}

/** A target stated as an absolute bound: `value <= limit` in `unit` (`B`, `µs`). */
export function absoluteTarget(
  name: string,
  value: number | undefined,
  limit: number,
  unit: string,
  digits = 1,
): Target {
  const ok = value !== undefined && Number.isFinite(value);
  return {
    section: "core",
    target: name,
    measured: ok ? `${value.toFixed(digits)} ${unit}` : "not measured",
    bound: `<= ${limit} ${unit}`,
    ratio: ok ? `${times(value / limit)} the bound` : "–",
    value: ok ? value : undefined,
    limit,
    comparison: "<=",
    met: judge(ok ? value : undefined, "<=", limit),
  };
}

function timingOf(r: RunResults, id: string): number | undefined {
  return r.timings[id]?.nsPerOp;
}

/** `0.123` -> `12.3% fewer`; a negative share (faster than the reference: noise) -> `… more`. */
function fewer(share: number): string {
  return share >= 0
    ? `${(share * 100).toFixed(1)}% fewer`
    : `${(-share * 100).toFixed(1)}% more (noise)`;
}

/** The performance targets, evaluated on this run, in report order. */
export function targets(r: RunResults): Target[] {
  const patterns = keyPatterns(r.quick);
  const [hot, medium, large] = [patterns[0]!, patterns[1]!, patterns[2]!];
  const tb = (p: string) => timingOf(r, `TokenBucket.keyed.allow.${p}`);
  const now = timingOf(r, "floor.performance-now");
  const floor = (p: string) => sum(timingOf(r, `floor.map-get.${p}`), now);
  const floorText = (p: string) =>
    `${ns(tb(p))} ns vs ${ns(timingOf(r, `floor.map-get.${p}`))} + ${ns(now)} = ${ns(floor(p))} ns`;
  const out: Target[] = [
    ratioTarget(
      `KeyedLimiter(TokenBucket), ${hot.label}: at most ${HOT_LIMIT}x performance.now()`,
      tb("hot"),
      now,
      HOT_LIMIT,
    ),
    ratioTarget(
      `KeyedLimiter(TokenBucket) on coarseClock(), ${hot.label}: at most ${COARSE_LIMIT}x performance.now()`,
      timingOf(r, "TokenBucket.keyed.allow.hot.coarse"),
      timingOf(r, "coarse.performance-now"),
      COARSE_LIMIT,
    ),
    ratioTarget(
      `KeyedLimiter(TokenBucket), ${medium.label}: at most ${MEDIUM_LIMIT}x (Map.get + performance.now())`,
      tb("medium"),
      floor("medium"),
      MEDIUM_LIMIT,
      { measured: floorText("medium") },
    ),
    ratioTarget(
      `KeyedLimiter(TokenBucket), ${large.label}: at most ${LARGE_LIMIT}x (Map.get + performance.now())`,
      tb("large"),
      floor("large"),
      LARGE_LIMIT,
      { measured: floorText("large") },
    ),
    ...POLICY_ROWS.map((p) =>
      ratioTarget(
        `${p.label}, ${medium.label}: at most ${POLICY_LIMIT}x KeyedLimiter(TokenBucket)`,
        timingOf(r, `${p.id}.allow.medium`),
        tb("medium"),
        POLICY_LIMIT,
      ),
    ),
  ];
  const memoryKeys = r.memory === undefined ? "1M" : count(r.memory.keys);
  for (const m of MEMORY_ROWS) {
    const found = r.memory?.results.find((x) => x.id === m.id);
    out.push(
      absoluteTarget(
        `${m.label}, ${memoryKeys} keys: at most ${m.limit} B per key beyond the key string`,
        found?.ok === true ? found.measured.bytesPerKey : undefined,
        m.limit,
        "B",
      ),
    );
  }
  out.push(...logMemoryTargets(r, memoryKeys));
  for (const p of patterns) {
    const rlf = timingOf(r, `peer.rlf.${p.id}`);
    const v = div(tb(p.id), rlf);
    out.push(
      ratioTarget(
        `KeyedLimiter(TokenBucket) vs rate-limiter-flexible, ${p.label}: at least 4x faster`,
        tb(p.id),
        rlf,
        RLF_LIMIT,
        v === undefined
          ? {}
          : { measured: `${ns(tb(p.id))} ns vs ${ns(rlf)} ns (${(1 / v).toFixed(1)}x faster)` },
      ),
    );
  }
  for (const p of patterns) {
    // The peer that comes closest (the largest tollgate/peer ratio) decides; every peer must
    // be measured for a verdict.
    const closest = closestPeer(
      tb(p.id),
      PEERS.map((peer) => ({
        name: peer.name.split(" ")[0]!,
        ns: timingOf(r, `peer.${peer.id}.${p.id}`),
      })),
    );
    const reference = closest?.ns;
    out.push(
      ratioTarget(
        `KeyedLimiter(TokenBucket) vs every peer, ${p.label}: faster than each`,
        tb(p.id),
        reference,
        PEER_LIMIT,
        {
          comparison: "<",
          measured: `${ns(tb(p.id))} ns vs ${ns(reference)} ns (closest: ${closest?.name ?? "–"})`,
        },
      ),
    );
  }
  const bound = count(newKeyBound(r.quick));
  for (const row of NEW_KEY_ROWS) {
    const t = timingOf(r, row.id);
    out.push(
      absoluteTarget(
        `${row.label}, a new key at the bound (maxKeys ${bound}, every key in use): at most ${NEW_KEY_LIMIT_US} µs`,
        t === undefined ? undefined : t / 1000,
        NEW_KEY_LIMIT_US,
        "µs",
        2,
      ),
    );
  }
  out.push(...globalTargets(r), httpTarget(r), httpLeasedTarget(r), ...redisTargets(r));
  return out;
}

/**
 * The Redis targets, on the side-by-side rows of one run: for the token bucket and the fixed
 * window, server CPU per check (`INFO commandstats` usec per call of the commands sent) at
 * most {@link REDIS_CPU_LIMIT}x rate-limiter-flexible's, and sequential p50 at most
 * {@link REDIS_PING_LIMIT}x a bare `PING`.
 */
export function redisTargets(r: RunResults): Target[] {
  const rows = r.redis !== undefined && "rows" in r.redis ? (r.redis.rows ?? []) : [];
  const row = (id: string) => rows.find((x) => x.id === id);
  const ping = row("ping");
  const rlf = row("rlf.redis");
  const out: Target[] = [];
  for (const [id, label] of [
    ["tollgate.token-bucket", "RedisTokenBucket"],
    ["tollgate.fixed-window", "RedisFixedWindow"],
  ] as const) {
    const x = row(id);
    const cpu = ratioTarget(
      `Redis: ${label}.consume server CPU per check at most ${REDIS_CPU_LIMIT}x RateLimiterRedis's`,
      x?.serverUsPerCall,
      rlf?.serverUsPerCall,
      REDIS_CPU_LIMIT,
      {
        measured: `${x?.serverUsPerCall.toFixed(2)} µs vs ${rlf?.serverUsPerCall.toFixed(2)} µs (commandstats)`,
      },
    );
    const p50 = ratioTarget(
      `Redis: ${label}.consume p50 at most ${REDIS_PING_LIMIT}x a bare PING on the same connection`,
      x?.p50Us,
      ping?.p50Us,
      REDIS_PING_LIMIT,
      { measured: `${x?.p50Us.toFixed(1)} µs vs ${ping?.p50Us.toFixed(1)} µs` },
    );
    out.push({ ...cpu, section: "redis" }, { ...p50, section: "redis" });
  }
  return out;
}

/**
 * The peer closest to `subject` (the fastest: the largest subject/peer ratio), or undefined
 * when a peer was not measured (no verdict on part of the peers).
 */
export function closestPeer(
  subject: number | undefined,
  peers: readonly { readonly name: string; readonly ns: number | undefined }[],
): { readonly name: string; readonly ns: number } | undefined {
  let best: { name: string; ns: number } | undefined;
  for (const peer of peers) {
    if (div(subject, peer.ns) === undefined) return undefined;
    if (best === undefined || peer.ns! < best.ns) best = { name: peer.name, ns: peer.ns! };
  }
  return best;
}

/** The HTTP target: the share of no-limiter throughput the in-process limiter costs. */
function httpTarget(r: RunResults): Target {
  const http = r.http !== undefined && "rows" in r.http ? r.http : undefined;
  const none = http?.rows.find((row) => row.id === "none")?.requestsPerSecond;
  const memory = http?.rows.find((row) => row.id === "memory")?.requestsPerSecond;
  const cpuNone = http?.rows.find((row) => row.id === "none")?.cpuUsPerRequest;
  const cpuMemory = http?.rows.find((row) => row.id === "memory")?.cpuUsPerRequest;
  const cpuShare =
    cpuNone !== undefined && cpuMemory !== undefined ? 1 - cpuNone / cpuMemory : undefined;
  const share = none !== undefined && memory !== undefined ? 1 - memory / none : undefined;
  const middlewareUs = http?.middlewareNs === undefined ? undefined : http.middlewareNs / 1000;
  const parts = [
    share === undefined ? undefined : `${fewer(share)} req/s`,
    cpuShare === undefined ? undefined : `requests per server CPU-second ${fewer(cpuShare)}`,
    middlewareUs === undefined || cpuNone === undefined
      ? undefined
      : `middleware alone ${middlewareUs.toFixed(2)} µs = ${((middlewareUs / cpuNone) * 100).toFixed(1)}% of a bare request's ${cpuNone.toFixed(1)} µs of server CPU`,
  ].filter((p): p is string => p !== undefined);
  return {
    section: "http",
    target: `HTTP: tollgate in-process costs at most ${HTTP_LIMIT * 100}% of no-limiter throughput`,
    value: share,
    measured: parts.length === 0 ? "not measured" : parts.join("; "),
    bound: `<= ${HTTP_LIMIT * 100}%`,
    ratio: share === undefined ? "–" : `${(share * 100).toFixed(1)}%`,
    limit: HTTP_LIMIT,
    comparison: "<=",
    // A limited server measured faster than the bare one means the difference is inside the
    // noise: no verdict then (the middleware-alone figure is the precise one).
    met: share === undefined || share < 0 ? undefined : share <= HTTP_LIMIT,
  };
}

/**
 * The keyed `SlidingWindowLog`'s memory: from its keys with one entry (`b1`) and with ten
 * (`b10`), bytes per live entry `(b10 - b1) / 9` and per key `b1` less one entry.
 */
function logMemoryTargets(r: RunResults, memoryKeys: string): Target[] {
  const bytes = (id: string): number | undefined => {
    const found = r.memory?.results.find((x) => x.id === id);
    return found?.ok === true ? found.measured.bytesPerKey : undefined;
  };
  const one = bytes("tollgate.SlidingWindowLog");
  const ten = bytes("tollgate.SlidingWindowLog.ten");
  const entry = one === undefined || ten === undefined ? undefined : (ten - one) / 9;
  const key = one === undefined || entry === undefined ? undefined : one - entry;
  const label = `KeyedLimiter(SlidingWindowLog), ${memoryKeys} keys`;
  return [
    absoluteTarget(
      `${label}: at most ${LOG_KEY_BYTES_LIMIT} B per key beyond the key string and its entries`,
      key,
      LOG_KEY_BYTES_LIMIT,
      "B",
    ),
    absoluteTarget(
      `${label}: at most ${LOG_ENTRY_BYTES_LIMIT} B per live entry (ten entries per key against one)`,
      entry,
      LOG_ENTRY_BYTES_LIMIT,
      "B",
    ),
  ];
}
