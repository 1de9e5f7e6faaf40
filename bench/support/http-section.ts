/**
 * Section 6 (`npm run bench:http`): the HTTP experiment of bench/http.bench.ts (node:http,
 * autocannon, each server in its own process), reported beside the source article's
 * figures, with four rows of servers that hold a Redis client (bench/support/http-redis-server.ts),
 * measured in the same interleaved rounds on the bench's Redis: one rate limiting every
 * request through `RedisTokenBucket` (one round trip per request), one through
 * `LeasedTokenBucket` (decisions in process from leases), and the bare server and the
 * in-process row each beside an idle client (the leased row's like-for-like references).
 * @module
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { runHttpBench } from "../http.bench.js";
import { runChild } from "./child.js";
import { budget, type Timing } from "./measure.js";
import { benchRedis } from "./redis-server.js";
import type { HttpResults, HttpRow } from "./report.js";
import { isWide, spreadOf, spreadText } from "./spread.js";

/** The Redis-limited server child: its URL, a CPU probe and a stop function. */
interface RedisServerChild {
  readonly url: string;
  /** The child's CPU time (µs) and requests served so far. */
  cpu(): Promise<{ cpuUs: number; requests: number }>;
  stop(): void;
}

/** The Redis-backed rows: server kind (bench/support/http-redis-server.ts), id and name. */
const REDIS_ROWS = [
  { kind: "redis", id: "redis", name: "tollgate/http + tollgate/redis RedisTokenBucket (allowed)" },
  {
    kind: "leased",
    id: "leased",
    name: "tollgate/http + tollgate/redis LeasedTokenBucket (allowed)",
  },
  {
    kind: "none",
    id: "none-redis-client",
    name: "no limiter, beside an idle ioredis client",
  },
  {
    kind: "memory",
    id: "memory-redis-client",
    name: "tollgate/http, in-memory KeyedLimiter, remaining changing per request, beside an idle ioredis client (allowed)",
  },
] as const;

/** Starts the Redis-limited server of `kind` for `redisUrl`. */
function startRedisServer(redisUrl: string, kind: string): Promise<RedisServerChild> {
  const file = fileURLToPath(new URL("./http-redis-server.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = fork(file, [redisUrl, kind], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const onExit = (code: number | null) =>
      reject(new Error(`http bench: the Redis server exited (${code})`));
    child.once("error", reject);
    child.once("exit", onExit);
    child.once("message", (message: { port: number }) => {
      resolve({
        url: `http://127.0.0.1:${message.port}/`,
        cpu: () =>
          new Promise((done) => {
            child.once("message", done);
            child.send("cpu");
          }),
        stop: () => {
          child.off("exit", onExit);
          child.kill();
        },
      });
    });
  });
}

/** Runs the HTTP rows (full: 100 connections, 10 s per variant after a warm-up). */
export async function runHttpSection(
  quick: boolean,
  progress: (text: string) => void,
): Promise<HttpResults | { skipped: string }> {
  progress("middleware alone (tinybench)");
  const timings = (await runChild("support/worker.ts", [
    "http.middleware",
    ...(quick ? ["--quick"] : []),
  ])) as Timing[];
  const baseline = timings.find((t) => t.id === "http.baseline");
  const middleware = timings.find((t) => t.id === "http.middleware");
  // The Redis rows run in the same interleaved rounds as the others, with the redis-server
  // up for all of them: a row measured later, on a machine in another state, is not
  // comparable (the leased row once lost 10 µs per request that way).
  const available = await benchRedis();
  let results: Awaited<ReturnType<typeof runHttpBench>>;
  try {
    results = await runHttpBench({
      quick,
      progress,
      ...(available.ok
        ? {
            extraVariants: REDIS_ROWS.map((row) => ({
              id: row.id,
              name: row.name,
              start: () => startRedisServer(available.redis.url, row.kind),
            })),
          }
        : {}),
    });
  } finally {
    if (available.ok) await available.redis.stop();
  }
  const rows: HttpRow[] = [...results.rows];
  const notes = [...results.notes];
  if (!available.ok) notes.push(`The tollgate/redis rows were skipped: ${available.reason}.`);
  else {
    notes.push(
      "The tollgate/redis rows ran in the same rounds as the others, against a private " +
        "redis-server on the same machine, with the in-process row's numbers: RedisTokenBucket " +
        "makes one round trip per request; LeasedTokenBucket decides in process from leases " +
        "refilled in the background.",
    );
  }
  const leasedNote = leasedComparison(rows);
  if (leasedNote !== undefined) notes.push(leasedNote);
  if (baseline !== undefined && middleware !== undefined) {
    const b = budget(quick);
    notes.push(
      `The middleware alone, without sockets (tinybench, ${b.timeMs} ms per row, in a fresh ` +
        `process): ${((middleware.nsPerOp - baseline.nsPerOp) / 1000).toFixed(2)} µs of CPU per ` +
        `request (a fresh \`ServerResponse\` plus the middleware: ${(middleware.nsPerOp / 1000).toFixed(2)} µs; ` +
        `the \`ServerResponse\` alone: ${(baseline.nsPerOp / 1000).toFixed(2)} µs).`,
    );
  }
  return {
    rows,
    connections: results.connections,
    durationSeconds: results.durationSeconds,
    notes,
    ...(baseline !== undefined && middleware !== undefined
      ? { middlewareNs: middleware.nsPerOp - baseline.nsPerOp }
      : {}),
  };
}

/**
 * The leased row against the in-process row with the same header shape, round by round
 * (both measured in every round, interleaved): server CPU per request and req/s, each as
 * the median ratio over the rounds with its min–max; then, when it ran, against the same
 * in-process row in a process that also holds a connected Redis client (what the leased
 * row's process holds besides its limiter), which tells the limiter's cost from the
 * client's.
 */
export function leasedComparison(rows: readonly HttpRow[]): string | undefined {
  const leased = rows.find((r) => r.id === "leased");
  const memory = rows.find((r) => r.id === "memory-varying");
  if (leased === undefined || memory === undefined) return undefined;
  const first = comparison(leased, memory);
  if (first === undefined) return undefined;
  const beside = rows.find((r) => r.id === "memory-redis-client");
  const second = beside === undefined ? undefined : comparison(leased, beside);
  return (
    "LeasedTokenBucket against the in-process row with the same headers (remaining changing " +
    `per request in both), per round over ${first.rounds} interleaved rounds: ${first.text}` +
    (second === undefined
      ? ""
      : ` Against the same in-process row beside an idle Redis client (ioredis, connected), ` +
        `the rest of what the leased row's process holds: ${second.text}`)
  );
}

/** One row against another, round by round: CPU per request and req/s ratios, extra µs. */
function comparison(
  leased: HttpRow,
  memory: HttpRow,
): { rounds: number; text: string } | undefined {
  const perRound = (a?: readonly number[], b?: readonly number[]) =>
    spreadOf((a ?? []).map((x, i) => (b?.[i] === undefined ? undefined : x / b[i]!)));
  const cpu = perRound(leased.cpuUsPerRequestRounds, memory.cpuUsPerRequestRounds);
  const rps = perRound(leased.requestsPerSecondRounds, memory.requestsPerSecondRounds);
  const extra = spreadOf(
    (leased.cpuUsPerRequestRounds ?? []).map((x, i) => {
      const m = memory.cpuUsPerRequestRounds?.[i];
      return m === undefined ? undefined : x - m;
    }),
  );
  if (cpu === undefined || rps === undefined || extra === undefined) return undefined;
  const wide = [cpu, rps].some(isWide)
    ? " The spread is too wide to judge (over 20% of the median)."
    : "";
  const us = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(1)}`;
  return {
    rounds: cpu.values.length,
    text:
      `server CPU per request ${spreadText(cpu)} (${us(extra.median)} µs, ${us(extra.min)} to ` +
      `${us(extra.max)}), req/s ${spreadText(rps)}.${wide}`,
  };
}
