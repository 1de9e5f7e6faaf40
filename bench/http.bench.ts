/**
 * The HTTP overhead benchmark: the same node:http "hello" server measured with
 * autocannon with and without the `tollgate/http` middleware in front of it.
 *
 * Variants (row ids follow bench/support/report.ts):
 * - `none`: the bare server;
 * - `headers`: the bare server setting the same two header fields by hand (what node:http
 *   itself costs for them, apart from the limiter);
 * - `memory`: `rateLimit({ limiter: new KeyedLimiter(TokenBucket) })`, every request allowed
 *   (key from the socket address, one decision, the two draft-10 headers);
 * - `memory-varying`: the same with a bucket whose `remaining` changes per request (as a
 *   leased bucket's does: the reference of the leased row, headers of the same shape);
 * - `denied`: the same middleware with a bucket that is always empty: every request gets the
 *   429 with `Retry-After` and the problem+json body (the handler never runs).
 *
 * Each measurement has a server child process of its own (`fork` through tsx), started just
 * before it; the rounds interleave the variants (none, memory, denied, none, ...), each
 * round starting one variant later, so a noisy neighbour hurts all of them alike, and every
 * measurement follows a 2 s warm-up. autocannon runs in this process on the same machine,
 * so client and server share the cores: the absolute req/s are a floor, the overhead per
 * request (1/rps - 1/rps of `none`) is the number to read.
 *
 * Run: `npx tsx bench/http.bench.ts [--duration 6] [--connections 100] [--rounds 3]
 * [--quick]`. `runHttpBench(options)` is the entry point for the bench runner.
 * @module
 */
import { type ChildProcess, fork } from "node:child_process";
import { createServer, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { TokenBucket } from "../src/algorithms/token-bucket.js";
import { rateLimit } from "../src/http/node.js";
import { KeyedLimiter } from "../src/keyed/keyed-limiter.js";
import { STEADY_BUCKET, VARYING_BUCKET } from "./support/http-buckets.js";

/** One server variant under autocannon (the shape of bench/support/report.ts `HttpRow`). */
export interface HttpBenchRow {
  readonly id: string;
  readonly name: string;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  /**
   * CPU time (user + system) the server process spent per request while measured, in µs:
   * less sensitive to other load on the machine than req/s, since it counts only the
   * server's own work.
   */
  readonly cpuUsPerRequest: number;
  /** The same, round by round (its spread). */
  readonly cpuUsPerRequestRounds?: readonly number[];
  /** Requests per second, round by round. */
  readonly requestsPerSecondRounds?: readonly number[];
}

/** What {@link runHttpBench} returns (the shape of bench/support/report.ts `HttpResults`). */
export interface HttpBenchResults {
  readonly rows: readonly HttpBenchRow[];
  readonly connections: number;
  readonly durationSeconds: number;
  readonly notes: readonly string[];
}

/** Options of {@link runHttpBench}. */
export interface HttpBenchOptions {
  /** Seconds measured per variant and round (after a 2 s warm-up). @default 4 (2 with quick) */
  readonly durationSeconds?: number;
  /** Concurrent connections. @default 100 */
  readonly connections?: number;
  /**
   * Interleaved rounds, each measurement in a server process of its own; a row's req/s and
   * server CPU are the medians of its rounds (one process's luck moves a median less than a
   * mean).
   * @default 5 (1 with quick)
   */
  readonly rounds?: number;
  /** Shorter runs for a smoke test. */
  readonly quick?: boolean;
  /** Progress lines (variant and round). */
  readonly progress?: (text: string) => void;
  /**
   * More servers measured in the same interleaved rounds (the `tollgate/redis` rows), so
   * that every row shares the machine's state: a row measured minutes later, beside other
   * jobs, is not comparable.
   */
  readonly extraVariants?: readonly ExtraVariant[];
}

/** A server started elsewhere (another child), measured in the rounds with the others. */
export interface ExtraVariant {
  readonly id: string;
  readonly name: string;
  /** Starts it; resolves with its URL, a CPU probe and a stop function. */
  start(): Promise<{
    readonly url: string;
    cpu(): Promise<{ cpuUs: number; requests: number }>;
    stop(): void;
  }>;
}

const VARIANTS = [
  { id: "none", name: "no limiter" },
  { id: "headers", name: "no limiter, the same two headers set by hand" },
  { id: "memory", name: "tollgate/http, in-memory KeyedLimiter (allowed)" },
  {
    id: "memory-varying",
    name: "tollgate/http, in-memory KeyedLimiter, remaining changing per request (allowed)",
  },
  { id: "denied", name: "tollgate/http, every request a 429" },
] as const;

/**
 * Seconds of load before each measurement, in the server's fresh process: V8 compiles its
 * hot paths then, on the cores autocannon loads too.
 */
const WARM_UP_SECONDS = 2;

/** The part of autocannon's result used here. */
interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

/** Child side: serves one variant on 127.0.0.1:0 and reports the port over IPC. */
function serve(variant: string): void {
  const hello = (res: ServerResponse) => {
    res.setHeader("Content-Type", "text/plain");
    res.end("hello\n");
  };
  let server: Server;
  if (variant === "none") {
    server = createServer((_req, res) => hello(res));
  } else if (variant === "headers") {
    server = createServer((_req, res) => {
      res.setHeader("RateLimit-Policy", '"default";q=1000000000000;w=60');
      res.setHeader("RateLimit", '"default";r=999999999999;t=1');
      hello(res);
    });
  } else {
    const bucket =
      variant === "denied"
        ? new TokenBucket({ capacity: 1, refillPerSecond: 1e-9 }) // spent by the first request
        : variant === "memory-varying"
          ? new TokenBucket(VARYING_BUCKET)
          : new TokenBucket(STEADY_BUCKET);
    const limit = rateLimit({ limiter: new KeyedLimiter(bucket), windowSeconds: 60 });
    server = createServer((req, res) => limit(req, res, () => hello(res)));
  }
  let requests = 0;
  server.on("request", () => {
    requests++;
  });
  process.on("message", () => {
    const cpu = process.cpuUsage();
    process.send?.({ cpuUs: cpu.user + cpu.system, requests });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => {
    process.send?.({ port: (server.address() as AddressInfo).port });
  });
}

/** Parent side: forks a server for `variant` and resolves with it and its URL. */
function startServer(variant: string): Promise<{ child: ChildProcess; url: string }> {
  const file = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const child = fork(file, ["--serve", variant], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      reject(new Error(`http bench: ${variant} server exited (${code})`)),
    );
    child.once("message", (message: { port: number }) => {
      resolve({ child, url: `http://127.0.0.1:${message.port}/` });
    });
  });
}

/** Asks a server child for its CPU time (µs) and requests served so far. */
function cpuOf(child: ChildProcess): Promise<{ cpuUs: number; requests: number }> {
  return new Promise((resolve) => {
    child.once("message", resolve);
    child.send("cpu");
  });
}

/**
 * Measures every variant and returns one row each (medians over the rounds).
 * @throws {Error} If a server cannot start.
 */
export async function runHttpBench(options: HttpBenchOptions = {}): Promise<HttpBenchResults> {
  const quick = options.quick === true;
  const durationSeconds = options.durationSeconds ?? (quick ? 2 : 4);
  const connections = options.connections ?? 100;
  const rounds = options.rounds ?? (quick ? 1 : 5);
  const progress = options.progress ?? (() => {});
  // The one server measured now (each measurement has its own).
  let running: { stop(): void } | undefined;
  const samples = new Map<string, AutocannonResult[]>();
  const cpuSamples = new Map<string, number[]>();
  const variants: readonly { id: string; name: string }[] = [
    ...VARIANTS,
    ...(options.extraVariants ?? []),
  ];
  const stopRunning = () => {
    running?.stop();
    running = undefined;
  };
  const extra = new Map((options.extraVariants ?? []).map((v) => [v.id, v]));
  const start = async (v: { id: string }) => {
    const other = extra.get(v.id);
    if (other !== undefined) return other.start();
    const { child, url } = await startServer(v.id);
    return {
      url,
      cpu: () => cpuOf(child),
      stop: () => {
        child.removeAllListeners("exit");
        child.kill();
      },
    };
  };
  try {
    // Every measurement has a process of its own, started just before it and stopped after
    // it. A process kept for the next round would carry its luck (V8's feedback) into every
    // round; and a process that idles before its turn can come out of the wait a few µs a
    // request slower for the rest of its life: on this bench's machine, of the servers that
    // held an ioredis client and waited 8 s or more behind other rows, 2 or 3 in 6 took
    // 3.4–5.5 µs more CPU per request (the time went to `process.nextTick`); of 40 measured
    // as soon as they started, none did.
    for (let round = 1; round <= rounds; round++) {
      // Each round starts one variant later, so no row is always measured first or last.
      const shift = (round - 1) % variants.length;
      const order = [...variants.slice(shift), ...variants.slice(0, shift)];
      for (const v of order) {
        progress(`${v.id}, round ${round}/${rounds}`);
        const server = await start(v);
        running = server;
        const url = server.url;
        await autocannon({ url, connections, duration: WARM_UP_SECONDS }); // JIT, sockets
        const before = await server.cpu();
        const result = await autocannon({ url, connections, duration: durationSeconds });
        const after = await server.cpu();
        samples.set(v.id, [...(samples.get(v.id) ?? []), result]);
        cpuSamples.set(v.id, [
          ...(cpuSamples.get(v.id) ?? []),
          (after.cpuUs - before.cpuUs) / Math.max(1, after.requests - before.requests),
        ]);
        stopRunning();
      }
    }
  } finally {
    stopRunning();
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  // Not spread.ts's median: importing it would load the targets and every section into
  // each server child this file is forked as.
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const rows = variants.map((v) => {
    const s = samples.get(v.id)!;
    return {
      id: v.id,
      name: v.name,
      requestsPerSecond: median(s.map((r) => r.requests.average)),
      p50Ms: mean(s.map((r) => r.latency.p50)),
      p99Ms: mean(s.map((r) => r.latency.p99)),
      non2xx: s.reduce((a, r) => a + r.non2xx, 0),
      errors: s.reduce((a, r) => a + r.errors + r.timeouts, 0),
      cpuUsPerRequest: median(cpuSamples.get(v.id) ?? []),
      cpuUsPerRequestRounds: cpuSamples.get(v.id) ?? [],
      requestsPerSecondRounds: s.map((r) => r.requests.average),
    };
  });
  return {
    rows,
    connections,
    durationSeconds,
    notes: [
      `${rounds} interleaved round(s) per variant, each measurement in a server process started just before it; req/s and server CPU are the medians of the rounds, p50 and p99 their means; one client address (one key).`,
      "autocannon shares the machine with the server process: read the overhead per request,",
      "and the server's own CPU time per request (process.cpuUsage in the server child).",
    ],
  };
}

/** Command line: prints the rows and the overhead per request. */
async function main(argv: string[]): Promise<void> {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    if (i === -1) return undefined;
    const n = Number(argv[i + 1]);
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`${flag} must be an integer >= 1`);
    return n;
  };
  const duration = value("--duration");
  const connections = value("--connections");
  const rounds = value("--rounds");
  const results = await runHttpBench({
    quick: argv.includes("--quick"),
    ...(duration === undefined ? {} : { durationSeconds: duration }),
    ...(connections === undefined ? {} : { connections }),
    ...(rounds === undefined ? {} : { rounds }),
    progress: (text) => process.stderr.write(`${text}\n`),
  });
  const none = results.rows.find((r) => r.id === "none")!;
  console.log(
    `autocannon: ${results.connections} connections, ${results.durationSeconds} s per run (${results.notes[0]})`,
  );
  for (const row of results.rows) {
    const overheadUs = (1 / row.requestsPerSecond - 1 / none.requestsPerSecond) * 1e6;
    const cpuExtra = row.cpuUsPerRequest - none.cpuUsPerRequest;
    console.log(
      `${row.name.padEnd(50)} ${row.requestsPerSecond.toFixed(0).padStart(7)} req/s  ` +
        `p50 ${row.p50Ms.toFixed(1)} ms  p99 ${row.p99Ms.toFixed(1)} ms  ` +
        `server CPU ${row.cpuUsPerRequest.toFixed(1)} µs/request` +
        (row.cpuUsPerRequestRounds === undefined || row.cpuUsPerRequestRounds.length < 2
          ? ""
          : ` [${Math.min(...row.cpuUsPerRequestRounds).toFixed(1)}..${Math.max(...row.cpuUsPerRequestRounds).toFixed(1)}]`) +
        (row.id === "none"
          ? ""
          : ` (${cpuExtra >= 0 ? "+" : ""}${cpuExtra.toFixed(1)})  throughput overhead ${overheadUs.toFixed(1)} µs/request`) +
        `  non-2xx ${row.non2xx}  errors ${row.errors}`,
    );
  }
}

const argv = process.argv.slice(2);
if (argv[0] === "--serve") {
  serve(argv[1] ?? "none");
} else if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main(argv);
}
