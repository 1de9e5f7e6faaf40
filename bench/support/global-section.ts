/**
 * Section 7 of `npm run bench`: the global limit (bench/global.bench.ts, 4 processes on one
 * private redis-server), its Markdown and its targets:
 * - a `LeasedTokenBucket` check's p50 at most 1.5x, its p99 at most 3x, the in-process
 *   `KeyedLimiter(TokenBucket)` consume timed interleaved in the same processes and run;
 * - at most one Redis round trip per 100 decisions on the hot key (10 per 1,000);
 * - admitted at most the exact bound of one shared bucket (`capacity + refillPerSecond x T`,
 *   credit 0), and at least 99% of it (the key is saturated, so an exact shared bucket
 *   would admit the bound);
 * - HTTP: `rateLimit` with a `LeasedTokenBucket` loses at most 1.1x the req/s the in-process
 *   row loses against the bare server, each in a process that holds a Redis client.
 * @module
 */
import {
  GLOBAL_CAPACITY,
  GLOBAL_PROCESSES,
  GLOBAL_REFILL_PER_SECOND,
  type GlobalResults,
  type GlobalRow,
  PACED_CAPACITY,
  PACED_PER_SECOND,
  PACED_REFILL_PER_SECOND,
  runGlobalBench,
} from "../global.bench.js";
import { int, ns, table, us } from "./format.js";
import { benchRedis } from "./redis-server.js";
import type { RunResults } from "./report.js";
import { absoluteTarget, div, ratioTarget, type Target } from "./targets.js";

/** Leased p50 over the in-process consume of the same processes and run. */
export const LEASED_P50_LIMIT = 1.5;
/** Leased p99 over the in-process consume of the same processes and run. */
export const LEASED_P99_LIMIT = 3;
/** Redis round trips per 1,000 leased decisions on a hot key. */
export const LEASED_ROUND_TRIPS_LIMIT = 10;
/** Admitted over the exact shared bound, at most (credit 0). */
export const LEASED_BOUND_LIMIT = 1;
/** Share of the exact shared bound admitted, at least, on a saturated key. */
export const LEASED_UTILISATION = 0.99;
/** HTTP req/s lost with leases over the req/s lost in process. */
export const HTTP_LEASED_LIMIT = 1.1;
/** Redis commands (a script's inner ones included) per 1,000 checks of the paced row. */
export const PACED_COMMANDS_LIMIT = 10;
/** Share of the exact shared bound the paced (contended) row admits, at least. */
export const PACED_UTILISATION = 0.98;

/** The section's results, or why it was skipped, plus where the server came from. */
export type GlobalSection =
  | (GlobalResults & { readonly origin: string })
  | { readonly skipped: string };

/** Runs the section against a private redis-server (or REDIS_URL). */
export async function runGlobalSection(
  quick: boolean,
  progress: (text: string) => void,
): Promise<GlobalSection> {
  progress("finding a server");
  const available = await benchRedis();
  if (!available.ok) return { skipped: available.reason };
  try {
    const result = await runGlobalBench(available.redis.url, { quick, progress });
    return { origin: available.redis.origin, ...result };
  } finally {
    await available.redis.stop();
  }
}

function rowOf(r: RunResults, id: string): GlobalRow | undefined {
  const g = r.global;
  return g === undefined || "skipped" in g ? undefined : g.rows.find((row) => row.id === id);
}

function latency(v: number): string {
  return v >= 10_000 ? `${us(v)} µs` : `${ns(v)} ns`;
}

/** The section's Markdown (empty when it did not run). */
export function globalSection(r: RunResults): string[] {
  const g = r.global;
  if (g === undefined) return [];
  const title = `## 7. Global limit: ${GLOBAL_PROCESSES} processes, one Redis`;
  if ("skipped" in g) return [title, "", `Global limit rows skipped: ${g.skipped}.`];
  const rows = g.rows.map((row) => [
    row.name,
    latency(row.p50Ns),
    latency(row.p99Ns),
    int(row.checksPerSecond),
    row.commandsPer1000.toFixed(1),
    row.roundTripsPer1000.toFixed(2),
    `${int(row.admitted)} / ${int(row.bound)} = ${((row.admitted / row.bound) * 100).toFixed(1)}%`,
  ]);
  const leased = g.rows.find((row) => row.id === "leased");
  return [
    title,
    "",
    table(
      [
        "limiter",
        "p50 per check",
        "p99 per check",
        "checks/s, all processes",
        "Redis commands per 1,000 checks",
        "round trips per 1,000 checks",
        "admitted / exact bound",
      ],
      "lrrrrrr",
      rows,
    ),
    "",
    `One hot key, capacity ${int(g.capacity)}, ${int(g.refillPerSecond)} per second, ` +
      `${GLOBAL_PROCESSES} child processes checking as fast as they can for ${g.durationMs / 1000} s ` +
      "each (the synchronous rows yield to the event loop every 100 checks; the Redis rows keep " +
      "one check in flight per process), started together. Exact bound: what one shared bucket " +
      "admits at most, `capacity + refillPerSecond x T`, T from the first start to the last end. " +
      "The in-process row is per process, so it admits up to N times that. rate-limiter-flexible " +
      `is a fixed window of ${int(GLOBAL_REFILL_PER_SECOND)} points per second (its own bound is ` +
      "points x windows touched). Commands: `INFO commandstats` after `CONFIG RESETSTAT`, " +
      "including those a script runs; round trips: script calls and other top-level commands. " +
      "Latencies are medians over the processes; in-process checks include about 20 ns of " +
      "`process.hrtime.bigint()` each. The paced row has a bucket of its own " +
      `(${int(PACED_CAPACITY)}, ${int(PACED_REFILL_PER_SECOND)} per second) and checks at a ` +
      `steady ${int(PACED_PER_SECOND)} per second per process: contended, its processes share ` +
      "the refill (the efficiency targets: Redis commands per 1,000 checks, and the share of " +
      "the bound).",
    ...(leased?.refP50Ns === undefined
      ? []
      : [
          "",
          `Same processes and run, interleaved call by call: LeasedTokenBucket ` +
            `${latency(leased.p50Ns)} / ${latency(leased.p99Ns)} (p50 / p99) against an in-process ` +
            `KeyedLimiter(TokenBucket) consume at ${latency(leased.refP50Ns)} / ` +
            `${latency(leased.refP99Ns!)}; the limiters counted ` +
            `${(leased.leaseCallsPer1000 ?? 0).toFixed(2)} lease calls per 1,000 checks.`,
        ]),
    "",
    `Server: ${g.origin}. Capacity ${int(GLOBAL_CAPACITY)} is shared by every row's key, each under its own prefix.`,
  ];
}

/** The section's targets (the HTTP one is judged with the HTTP section). */
export function globalTargets(r: RunResults): Target[] {
  const leased = rowOf(r, "leased");
  const share = leased === undefined ? undefined : leased.admitted / leased.bound;
  const list: Target[] = [
    ratioTarget(
      `global: LeasedTokenBucket check p50 <= ${LEASED_P50_LIMIT}x in-process KeyedLimiter(TokenBucket), same processes`,
      leased?.p50Ns,
      leased?.refP50Ns,
      LEASED_P50_LIMIT,
    ),
    ratioTarget(
      `global: LeasedTokenBucket check p99 <= ${LEASED_P99_LIMIT}x in-process KeyedLimiter(TokenBucket), same processes`,
      leased?.p99Ns,
      leased?.refP99Ns,
      LEASED_P99_LIMIT,
    ),
    absoluteTarget(
      "global: Redis round trips per 1,000 LeasedTokenBucket decisions, hot key (one per 100)",
      leased?.roundTripsPer1000,
      LEASED_ROUND_TRIPS_LIMIT,
      "per 1,000",
      2,
    ),
    ratioTarget(
      "global: LeasedTokenBucket admitted <= the exact shared bound (credit 0)",
      leased?.admitted,
      leased?.bound,
      LEASED_BOUND_LIMIT,
      {
        measured:
          leased === undefined ? "not measured" : `${int(leased.admitted)} vs ${int(leased.bound)}`,
      },
    ),
    {
      ...ratioTarget(
        `global: LeasedTokenBucket admits >= ${LEASED_UTILISATION * 100}% of the exact shared bound (saturated key)`,
        leased?.admitted,
        leased?.bound,
        LEASED_UTILISATION,
      ),
      measured: share === undefined ? "not measured" : `${(share * 100).toFixed(1)}% of the bound`,
      bound: `>= ${LEASED_UTILISATION * 100}%`,
      ratio: share === undefined ? "–" : `${(share * 100).toFixed(1)}%`,
      met: share === undefined ? undefined : share >= LEASED_UTILISATION,
    },
  ];
  const paced = rowOf(r, "leased-paced");
  const pacedShare = paced === undefined ? undefined : paced.admitted / paced.bound;
  list.push(
    absoluteTarget(
      `global: Redis commands per 1,000 LeasedTokenBucket checks, ${GLOBAL_PROCESSES} processes offering 4,000/s against 2,000/s`,
      paced?.commandsPer1000,
      PACED_COMMANDS_LIMIT,
      "per 1,000",
      1,
    ),
    {
      ...ratioTarget(
        `global: the same admits >= ${PACED_UTILISATION * 100}% of the exact shared bound`,
        paced?.admitted,
        paced?.bound,
        PACED_UTILISATION,
      ),
      measured:
        pacedShare === undefined
          ? "not measured"
          : `${(pacedShare * 100).toFixed(1)}% of the bound`,
      bound: `>= ${PACED_UTILISATION * 100}%`,
      ratio: pacedShare === undefined ? "–" : `${(pacedShare * 100).toFixed(1)}%`,
      met: pacedShare === undefined ? undefined : pacedShare >= PACED_UTILISATION,
    },
  );
  return list.map((t) => ({ ...t, section: "global" }));
}

/**
 * The HTTP target of leases: req/s lost with `rateLimit` over a `LeasedTokenBucket`, over
 * the req/s the in-process row with the same header shape (remaining changing per request)
 * loses, like for like: both servers hold a connected ioredis client, and both lose against
 * the bare server that holds one too (`none-redis-client`). A process whose sockets have all
 * been node:http's runs node:http's stream code on one hidden class; once another stream
 * has carried data (a Redis client's replies, a raw socket, a file read), that code serves
 * several and costs a few µs more a request, limiter or not (docs/benchmarks.md#http). The
 * leased row always holds a client, so the in-process and bare rows it is judged against
 * must too; results from before those rows existed are not measured.
 */
export function httpLeasedTarget(r: RunResults): Target {
  const http = r.http !== undefined && "rows" in r.http ? r.http : undefined;
  const rps = (id: string) => http?.rows.find((row) => row.id === id)?.requestsPerSecond;
  const none = rps("none-redis-client");
  const memory = rps("memory-redis-client");
  const leased = rps("leased");
  const lostLeased = none === undefined || leased === undefined ? undefined : none - leased;
  const lostMemory = none === undefined || memory === undefined ? undefined : none - memory;
  const value = div(lostLeased, lostMemory);
  return {
    section: "http",
    target: `HTTP: rateLimit(LeasedTokenBucket) loses <= ${HTTP_LEASED_LIMIT}x the req/s the in-process row loses (each beside a Redis client, as the leased one is)`,
    measured:
      lostLeased === undefined || lostMemory === undefined
        ? "not measured"
        : `${int(lostLeased)} vs ${int(lostMemory)} req/s fewer than no limiter`,
    bound: `<= ${HTTP_LEASED_LIMIT}x`,
    ratio: value === undefined ? "–" : `${value.toFixed(2)}x`,
    value,
    limit: HTTP_LEASED_LIMIT,
    comparison: "<=",
    // An in-process row within the noise of the bare server gives no usable denominator.
    met: value === undefined || lostLeased! < 0 ? undefined : value <= HTTP_LEASED_LIMIT,
  };
}
