/**
 * Renders a run's results as the Markdown report of `npm run bench`, and evaluates the
 * performance targets (set when the project started) as ratios measured in that same run.
 * @module
 */
import { ALGORITHMS } from "../algorithms.bench.js";
import type { MemoryResult } from "../memory.js";
import { PEERS } from "../peers.js";
import type { CoarseStaleness } from "./coarse-staleness.js";
import { int, ns, ratio, table, us } from "./format.js";
import { type GlobalSection, globalSection } from "./global-section.js";
import { keyPatterns, newKeyBound } from "./keys.js";
import { type Machine, machineLine } from "./machine.js";
import type { Timing } from "./measure.js";
import { roundCount, targetsOverRounds } from "./rounds.js";
import { WIDE_SPREAD } from "./spread.js";
import { NEW_KEY_ROWS, verdict } from "./targets.js";

/** Redis section results, in microseconds and operations per second. */
export interface RedisResults {
  /** Where the Redis came from (REDIS_URL, private server). */
  readonly origin: string;
  /** Client library and algorithm measured, for the report. */
  readonly subject: string;
  readonly ping: RedisRow;
  readonly consume: RedisRow;
  /** Every subject side by side on one connection, `PING` first (absent in older results). */
  readonly rows?: readonly RedisSubjectRow[];
  /** Requests in flight in the throughput rows. */
  readonly inFlight: number;
}

/** One subject of the side-by-side Redis table. */
export interface RedisSubjectRow extends RedisRow {
  /** `ping`, `tollgate.token-bucket`, `tollgate.fixed-window`, `rlf.redis`, `rate-limit-redis`. */
  readonly id: string;
  readonly name: string;
  /**
   * Server µs per call inside the commands the subject sent (`INFO commandstats`
   * usec / calls, during the throughput phase); NaN when not read.
   */
  readonly serverUsPerCall: number;
  /** Server process CPU (user + system, `INFO cpu`) per call during the throughput phase, µs. */
  readonly serverCpuUsPerCall: number;
}

/** One Redis operation: sequential latency and throughput with many in flight. */
export interface RedisRow {
  readonly p50Us: number;
  readonly p99Us: number;
  readonly meanUs: number;
  readonly opsPerSecond: number;
}

/** HTTP section results. */
export interface HttpResults {
  readonly rows: readonly HttpRow[];
  readonly connections: number;
  readonly durationSeconds: number;
  /** Anything the harness wants printed under the table. */
  readonly notes: readonly string[];
  /** CPU cost of the in-process middleware per request, measured without sockets (ns). */
  readonly middlewareNs?: number;
}

/** One server variant under autocannon. */
export interface HttpRow {
  readonly id: "none" | "memory" | "redis" | string;
  readonly name: string;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Non-2xx responses (a limiter that denied would show here). */
  readonly non2xx: number;
  readonly errors: number;
  /** CPU time (user + system) of the server process per request, µs, when measured. */
  readonly cpuUsPerRequest?: number;
  /** The same, per interleaved round. */
  readonly cpuUsPerRequestRounds?: readonly number[];
  /** Requests per second, per interleaved round. */
  readonly requestsPerSecondRounds?: readonly number[];
}

/** Everything one run produced. */
export interface RunResults {
  readonly startedAt: string;
  readonly command: string;
  readonly quick: boolean;
  readonly machine: Machine;
  /** How the in-process rows were timed; absent when only the HTTP section ran. */
  readonly method?: string;
  /** One-minute load average at the start and the end of the run (other work on the machine). */
  readonly load?: { readonly start: number; readonly end: number };
  readonly timings: Readonly<Record<string, Timing>>;
  readonly failures: readonly { readonly part: string; readonly error: string }[];
  readonly memory?: { readonly keys: number; readonly results: readonly MemoryResult[] };
  readonly redis?: RedisResults | { readonly skipped: string };
  readonly http?: HttpResults | { readonly skipped: string };
  /** The coarse clock's staleness, measured beside the timing rounds. */
  readonly coarse?: CoarseStaleness;
  /** Section 7: one limit shared by 4 processes (bench/global.bench.ts). */
  readonly global?: GlobalSection;
  readonly extra?: Readonly<Record<string, unknown>>;
}

function timingOf(r: RunResults, id: string): number | undefined {
  return r.timings[id]?.nsPerOp;
}

/** A row's spread: its rounds' min–max ns when it has rounds, else tinybench's margin. */
function rme(t: Timing | undefined): string {
  if (t === undefined) return "–";
  const rounds = t.roundsNsPerOp ?? [];
  if (rounds.length > 1) return `${ns(Math.min(...rounds))}–${ns(Math.max(...rounds))}`;
  return `±${t.rmePercent.toFixed(1)}%`;
}

function floorsSection(r: RunResults): string[] {
  const now = timingOf(r, "floor.performance-now");
  const ids = [
    "floor.performance-now",
    "floor.date-now",
    "floor.map-get.medium",
    "floor.map-get.large",
    ...keyPatterns(r.quick).map((p) => `naive.${p.id}`),
  ];
  const rows = ids.flatMap((id) => {
    const t = r.timings[id];
    if (t === undefined) return [];
    const name = id.startsWith("naive.") ? `**${t.name}** (reference)` : t.name;
    return [[name, ns(t.nsPerOp), rme(t), ratio(t.nsPerOp, now)]];
  });
  // The references of the random-key targets: one lookup and one clock read, the least a
  // keyed check does. Each is the sum of two rows above, so it has no margin of its own.
  for (const p of keyPatterns(r.quick).slice(1)) {
    const get = timingOf(r, `floor.map-get.${p.id}`);
    if (get === undefined || now === undefined) continue;
    rows.push([
      `**Map.get + performance.now(), ${p.label}** (reference, the sum)`,
      ns(get + now),
      "",
      ratio(get + now, now),
    ]);
  }
  return [
    "## 1. Floors",
    "",
    table(["operation", "ns/op", "± or min–max", "x performance.now()"], "lrrr", rows),
  ];
}

function algorithmsSection(r: RunResults): string[] {
  const patterns = keyPatterns(r.quick);
  const headers = [
    "algorithm",
    "allow()",
    "consume()",
    ...patterns.map((p) => `keyed allow, ${p.label}`),
    "keyed consume, 1 hot key",
  ];
  const rows: string[][] = ALGORITHMS.map((a) => [
    a.name,
    ns(timingOf(r, `${a.name}.single.allow`)),
    ns(timingOf(r, `${a.name}.single.consume`)),
    ...patterns.map((p) => ns(timingOf(r, `${a.name}.keyed.allow.${p.id}`))),
    ns(timingOf(r, `${a.name}.keyed.consume.hot`)),
  ]);
  rows.push([
    "TokenBucket, policy function `(key) => new TokenBucket`",
    "",
    "",
    ...patterns.map((p) => ns(timingOf(r, `TokenBucket.fn.allow.${p.id}`))),
    "",
  ]);
  rows.push([
    "TokenBucket, `allOf(TokenBucket, TokenBucket)` per key",
    "",
    "",
    ...patterns.map((p) => ns(timingOf(r, `TokenBucket.allOf.allow.${p.id}`))),
    "",
  ]);
  rows.push([
    "naive Map token bucket (reference)",
    "",
    "",
    ...patterns.map((p) => ns(timingOf(r, `naive.${p.id}`))),
    "",
  ]);
  const now = timingOf(r, "floor.performance-now");
  const floor = (p: string) => {
    const get = timingOf(r, `floor.map-get.${p}`);
    return get === undefined || now === undefined ? undefined : get + now;
  };
  const tbMedium = timingOf(r, "TokenBucket.keyed.allow.medium");
  const ratioRows = [
    ...ALGORITHMS.map((a) => ({ path: `${a.name}.keyed`, name: a.name })),
    { path: "TokenBucket.fn", name: "TokenBucket, policy function" },
    { path: "TokenBucket.allOf", name: "allOf(TokenBucket, TokenBucket)" },
  ].map(({ path, name }) => {
    const cell = (p: string, ref: number | undefined) =>
      ratio(timingOf(r, `${path}.allow.${p}`), ref);
    return [
      name,
      cell("hot", now),
      cell("medium", floor("medium")),
      cell("large", floor("large")),
      cell("medium", timingOf(r, "naive.medium")),
      cell("large", timingOf(r, "naive.large")),
      cell("medium", tbMedium),
    ];
  });
  return [
    "## 2. Per-check cost of the five algorithms (ns/op)",
    "",
    table(headers, `l${"r".repeat(headers.length - 1)}`, rows),
    "",
    "Keyed `allow(key)` as a ratio to the reference rows of section 1 and to the keyed " +
      "`TokenBucket` (lower is better; floor = `Map.get` over the same keys in the same order " +
      "+ `performance.now()`):",
    "",
    table(
      [
        "KeyedLimiter policy",
        "1 hot key / performance.now()",
        `${patterns[1]!.label} / floor`,
        `${patterns[2]!.label} / floor`,
        `${patterns[1]!.label} / naive map`,
        `${patterns[2]!.label} / naive map`,
        `${patterns[1]!.label} / TokenBucket`,
      ],
      "lrrrrrr",
      ratioRows,
    ),
    "",
    "Policies: buckets of capacity 1e12 refilling/leaking at 0.001/s, windows of limit 1e12 and " +
      "1e9 ms, so every timed check is an allowed check of a key that already has state and no " +
      "key turns idle (and is dropped and recreated) during the run. `SlidingWindowLog` keeps one " +
      "entry per allowed request, so it has limit 1000: in its `allow()`, `consume()` and hot-key " +
      "cells every call after the first 1000 is a denial (the common case for a hot key anyway); " +
      "on the random key sets its calls are allowed.",
    ...newKeySection(r),
    ...coarseSection(r),
  ];
}

/** The coarse clock: the hot key on it against a bare `performance.now()`, and its staleness. */
function coarseSection(r: RunResults): string[] {
  const now = r.timings["coarse.performance-now"];
  const coarse = r.timings["TokenBucket.keyed.allow.hot.coarse"];
  const c = r.coarse;
  if (now === undefined && coarse === undefined && c === undefined) return [];
  const ms = (v: number) => v.toFixed(3);
  return [
    "",
    "The coarse clock (`coarseClock()`, docs/semantics.md): the hot key on it, beside a bare " +
      "`performance.now()` timed just before it in the same process:",
    "",
    table(
      ["row", "ns/op", "± or min–max", "x performance.now()"],
      "lrrr",
      [now, coarse].flatMap((t) =>
        t === undefined ? [] : [[t.name, ns(t.nsPerOp), rme(t), ratio(t.nsPerOp, now?.nsPerOp)]],
      ),
    ),
    ...(c === undefined
      ? []
      : [
          "",
          `Staleness, \`performance.now() - clock()\` at a check (refreshMs ${c.refreshMs}, ` +
            `maxReads ${c.maxReads}): checks in batches of ${c.loop.batch}, one macrotask each, ` +
            `p50 ${ms(c.loop.p50Ms)} ms, p99 ${ms(c.loop.p99Ms)} ms, max ${ms(c.loop.maxMs)} ms ` +
            `(${int(c.loop.samples)} samples); one synchronous loop of ${int(c.sync.checks)} ` +
            `checks, p99 ${ms(c.sync.p99Ms)} ms, max ${ms(c.sync.maxMs)} ms; the first check after a ` +
            `${c.stall.stallMs} ms synchronous stall, ${ms(c.stall.firstMs)} ms (the bound ` +
            "breaks: as old as the stall). A maximum far above p99 is the process not being " +
            "scheduled (a loaded machine): the first check after it reads a stale time, as after a stall.",
        ]),
  ];
}

/** The new-key-at-the-bound rows: a full registry of keys in use, then only fresh keys. */
function newKeySection(r: RunResults): string[] {
  const rows = NEW_KEY_ROWS.flatMap((row) => {
    const t = r.timings[row.id];
    return t === undefined ? [] : [[row.label, ns(t.nsPerOp), rme(t), us(t.nsPerOp)]];
  });
  if (rows.length === 0) return [];
  return [
    "",
    `A new key at the bound: \`maxKeys\` ${int(newKeyBound(r.quick))}, filled with keys in use ` +
      "(none idle, so each new key evicts one that is, the lossy case), then a stream of keys " +
      "never seen (or evicted long before), one `allow(key)` each:",
    "",
    table(
      ["KeyedLimiter policy", "ns per new key", "± or min–max", "µs per new key"],
      "lrrr",
      rows,
    ),
  ];
}

function peersSection(r: RunResults): string[] {
  const patterns = keyPatterns(r.quick);
  const tb = patterns.map((p) => timingOf(r, `TokenBucket.keyed.allow.${p.id}`));
  const fw = patterns.map((p) => timingOf(r, `FixedWindow.keyed.allow.${p.id}`));
  const headers = [
    "limiter",
    ...patterns.map((p) => `ns/op, ${p.label}`),
    ...patterns.map((p) => `tollgate/peer, ${p.label}`),
  ];
  const rows: string[][] = [
    [
      "**tollgate KeyedLimiter(TokenBucket).allow**",
      ...tb.map((v) => ns(v)),
      ...patterns.map(() => ""),
    ],
    [
      "tollgate KeyedLimiter(FixedWindow).allow",
      ...fw.map((v) => ns(v)),
      ...patterns.map(() => ""),
    ],
  ];
  const variants = [
    ...PEERS.map((p) => ({ id: p.id, name: `${p.name} ${p.version}`, sameAs: p.sameAs })),
  ];
  // The awaited @fastify/rate-limit row goes right after the bare one.
  const at = variants.findIndex((v) => v.id === "fastify");
  variants.splice(at + 1, 0, {
    id: "fastify-awaited",
    name: "@fastify/rate-limit LocalStore.incr, awaited as the plugin does",
    sameAs: "FixedWindow",
  });
  const like: string[][] = [];
  for (const v of variants) {
    const peer = patterns.map((p) => timingOf(r, `peer.${v.id}.${p.id}`));
    rows.push([
      v.name,
      ...peer.map((value) => ns(value)),
      ...peer.map((value, i) => ratio(tb[i], value)),
    ]);
    const same = v.sameAs === "TokenBucket" ? tb : fw;
    like.push([
      `${v.name} vs tollgate ${v.sameAs}`,
      ...peer.map((value, i) => ratio(same[i], value)),
    ]);
  }
  return [
    "## 3. Against peers, same key patterns",
    "",
    table(headers, `l${"r".repeat(headers.length - 1)}`, rows),
    "",
    "tollgate/peer is tollgate's `KeyedLimiter(TokenBucket).allow` time divided by the peer's " +
      "(below 1: tollgate is faster; 0.25x = 4 times faster). Like for like, against the tollgate " +
      "algorithm doing the same job (three peers are fixed windows):",
    "",
    table(["peer", ...patterns.map((p) => p.label)], `l${"r".repeat(patterns.length)}`, like),
    "",
    "Each peer is called the way its own middleware calls it: rate-limiter-flexible and " +
      "express-rate-limit return promises, awaited one by one; @fastify/rate-limit's store is " +
      "timed bare (synchronous callback, its best case) and wrapped in a promise as the plugin " +
      "does; limiter has no keyed store, so one `TokenBucket` per key in a `Map`. Limits are " +
      "never reached and windows outlast the run, so every call is an allowed hit on an existing " +
      "key; the @fastify/rate-limit LRU is sized to hold every key.",
  ];
}

function memorySection(r: RunResults): string[] {
  if (r.memory === undefined) return [];
  const naive = r.memory.results.find((m) => m.id === "naive");
  const naiveBytes = naive?.ok === true ? naive.measured.bytesPerKey : undefined;
  const rows = r.memory.results.map((m) => {
    if (!m.ok) return [m.name, "failed", "", ""];
    const { bytesPerKey, keyStringBytes } = m.measured;
    return [
      m.kind === "reference" ? `**${m.name}**` : m.name,
      bytesPerKey.toFixed(1),
      (bytesPerKey + keyStringBytes).toFixed(1),
      ratio(bytesPerKey, naiveBytes),
    ];
  });
  const strings = r.memory.results.find((m) => m.ok);
  const stringBytes = strings?.ok === true ? strings.measured.keyStringBytes.toFixed(1) : "–";
  return [
    `## 4. Memory per key at ${int(r.memory.keys)} keys`,
    "",
    table(
      ["structure", "bytes/key, without key string", "bytes/key, with key string", "x naive map"],
      "lrrr",
      rows,
    ),
    "",
    `Each structure filled with one check per key in a fresh \`node --expose-gc\` process; heap ` +
      `(\`heapUsed + external\`, so ArrayBuffer slabs count) after two full GCs. A key string ` +
      `(\`10.a.b.c\`) takes ${stringBytes} B of V8 heap. rate-limiter-flexible stores a prefixed ` +
      "copy of each key and one `setTimeout` per key; both count in its bytes.",
  ];
}

function redisSection(r: RunResults): string[] {
  if (r.redis === undefined) return [];
  if ("skipped" in r.redis) {
    return ["## 5. Redis", "", `Redis rows skipped: ${r.redis.skipped}.`];
  }
  const redis = r.redis;
  const inProcess = timingOf(r, "TokenBucket.keyed.consume.hot");
  const row = (name: string, v: RedisRow) => [
    name,
    v.p50Us.toFixed(1),
    v.p99Us.toFixed(1),
    int(v.opsPerSecond),
  ];
  const side = redis.rows ?? [];
  const ping = side.find((x) => x.id === "ping");
  const rlf = side.find((x) => x.id === "rlf.redis");
  const sideBySide =
    side.length === 0
      ? []
      : [
          "",
          "Side by side, one connection, one server, subjects taking turns in rounds. Server " +
            "µs/check: `INFO commandstats` usec per call of the commands the subject sent " +
            "(script time, its inner commands included), during the throughput phase; server " +
            "CPU/check: the server process's user + system time per check then (parsing and " +
            "networking included).",
          "",
          table(
            [
              "subject",
              "p50 µs",
              "p99 µs",
              `ops/s, ${redis.inFlight} in flight`,
              "server µs/check",
              "server CPU µs/check",
              "p50 / PING",
              "server µs / rate-limiter-flexible",
            ],
            "lrrrrrrr",
            side.map((x) => [
              x.name,
              x.p50Us.toFixed(1),
              x.p99Us.toFixed(1),
              int(x.opsPerSecond),
              x.serverUsPerCall.toFixed(2),
              x.serverCpuUsPerCall.toFixed(2),
              ratio(x.p50Us, ping?.p50Us),
              ratio(x.serverUsPerCall, rlf?.serverUsPerCall),
            ]),
          ),
        ];
  return [
    "## 5. Redis",
    "",
    table(
      [
        "operation",
        "p50 µs, sequential",
        "p99 µs, sequential",
        `ops/s, ${redis.inFlight} in flight`,
      ],
      "lrrr",
      [
        row("bare `PING` (reference)", redis.ping),
        row("`RedisTokenBucket.consume`", redis.consume),
      ],
    ),
    "",
    table(["ratio", "value"], "lr", [
      ["Redis consume p50 / PING p50", ratio(redis.consume.p50Us, redis.ping.p50Us)],
      [
        "Redis consume p50 / in-process `KeyedLimiter(TokenBucket).consume`, hot key",
        ratio(redis.consume.p50Us * 1000, inProcess),
      ],
      ["in-process consume, ns", ns(inProcess)],
    ]),
    ...sideBySide,
    "",
    `Server: ${redis.origin}. Same connection for every subject.`,
  ];
}

/** The source article's figures (FastAPI, 4 vCPU), by row id: req/s. */
const ARTICLE_RPS: Readonly<Record<string, number>> = {
  none: 92_400,
  memory: 51_800,
  redis: 14_200,
};

/** The HTTP section: measured table beside the article's figures. */
export function httpSection(r: RunResults): string[] {
  if (r.http === undefined) return [];
  if ("skipped" in r.http) return ["## 6. HTTP", "", `HTTP rows skipped: ${r.http.skipped}.`];
  const http = r.http;
  const none = http.rows.find((row) => row.id === "none");
  const rows = http.rows.map((row) => {
    const overheadNs =
      none === undefined || row.id === "none"
        ? undefined
        : (1 / row.requestsPerSecond - 1 / none.requestsPerSecond) * 1e9;
    const article = ARTICLE_RPS[row.id];
    const cpuExtra =
      row.id === "none" || row.cpuUsPerRequest === undefined || none?.cpuUsPerRequest === undefined
        ? undefined
        : row.cpuUsPerRequest - none.cpuUsPerRequest;
    return [
      row.name,
      int(row.requestsPerSecond),
      row.p50Ms.toFixed(2),
      row.p99Ms.toFixed(2),
      overheadNs === undefined ? "–" : us(overheadNs),
      row.cpuUsPerRequest === undefined ? "–" : row.cpuUsPerRequest.toFixed(1),
      cpuExtra === undefined ? "–" : `${cpuExtra >= 0 ? "+" : ""}${cpuExtra.toFixed(1)}`,
      ratio(row.requestsPerSecond, none?.requestsPerSecond),
      article === undefined ? "" : int(article),
      article === undefined ? "" : ratio(article, ARTICLE_RPS["none"]),
    ];
  });
  return [
    "## 6. HTTP",
    "",
    table(
      [
        "server",
        "req/s",
        "p50 ms",
        "p99 ms",
        "overhead µs/request",
        "server CPU µs/request",
        "CPU vs no limiter, µs",
        "x no limiter",
        "article req/s (FastAPI, 4 vCPU)",
        "article x no limiter",
      ],
      "lrrrrrrrrr",
      rows,
    ),
    "",
    `node:http, autocannon with ${http.connections} connections, ${http.durationSeconds} s per ` +
      "variant after a warm-up, the server in a second process. Overhead per request = " +
      "1/(req/s) - 1/(req/s with no limiter). Server CPU = the server process's user + system " +
      "time per request while measured, which other load on the machine disturbs far less.",
    "",
    "What differs from the article: it measured a Python FastAPI service on 4 vCPU with its " +
      `limiter written in Python; this is Node's bare \`node:http\` on ${r.machine.cores} cores ` +
      "shared with the load generator, so absolute req/s are not comparable; the ratios to each " +
      "table's own no-limiter row are.",
    ...(http.notes.length > 0 ? ["", http.notes.join(" ")] : []),
  ];
}

function targetsSection(r: RunResults): string[] {
  const ran = {
    core: r.method !== undefined,
    http: r.http !== undefined,
    redis: r.redis !== undefined && !("skipped" in r.redis) && r.redis.rows !== undefined,
    global: r.global !== undefined && !("skipped" in r.global),
  };
  const list = targetsOverRounds(r).filter((t) => ran[t.section]);
  const rounds = roundCount(r);
  const rows = list.map((t) => {
    const v = verdict(t, r.quick);
    return [t.target, t.measured, t.bound, t.ratio, v === "miss" ? "**miss**" : v];
  });
  return [
    "## Performance targets, measured in this run",
    "",
    r.quick
      ? "Quick mode: short runs and smaller key sets, so no target is judged; run `npm run bench` for the verdicts."
      : "Each ratio is of two rows of this run; nothing is asserted (the numbers are the product).",
    "",
    table(["target", "measured", "bound", "ratio", ""], "lrrrl", rows),
    "",
    "ratio: for a ratio target, the row over its reference (held against the bound); for a " +
      "bound in bytes or µs, the measured value over the bound (at most 1x keeps it).",
    ...(rounds > 1
      ? [
          "",
          `Rounds: every timing row was measured in ${rounds} rounds (each group in a fresh ` +
            "process per round, the groups alternating); a ratio is computed per round from two " +
            "rows of that round, and shown as its median (min–max). A spread is too wide when " +
            `(max - min) / median exceeds ${WIDE_SPREAD * 100}%; a target whose spread is too ` +
            "wide with its bound inside min–max is marked `too wide to judge` (rounds disagree " +
            "by more than the noise the bench accepts); otherwise the median decides.",
        ]
      : []),
  ];
}

function notesSection(r: RunResults): string[] {
  const notes = Object.values(r.timings)
    .filter((t) => t.note !== undefined)
    .map((t) => `- ${t.name}: ${t.note}`);
  const failures = r.failures.map((f) => `- **${f.part} failed**: ${f.error.split("\n")[0]}`);
  if (notes.length === 0 && failures.length === 0) return [];
  return ["## Problems seen in this run", "", ...failures, ...notes];
}

/** A warning when the machine was busy with other work during the run. */
function loadLine(r: RunResults): string[] {
  if (r.load === undefined) return [];
  // The run itself keeps about one core busy, so the end reading includes about 1.
  const busy = r.load.start > 0.5 * r.machine.cores || r.load.end > r.machine.cores;
  const text = `load average ${r.load.start.toFixed(2)} at the start, ${r.load.end.toFixed(2)} at the end`;
  return busy
    ? ["", `**Warning: the machine was busy (${text}); numbers are noisy.**`]
    : ["", `Quiet machine: ${text}.`];
}

/** The whole Markdown report. */
export function renderReport(r: RunResults): string {
  const parts: string[][] = [
    [
      `# tollgate benchmark${r.quick ? " (quick)" : ""}`,
      "",
      `**${machineLine(r.machine)}**`,
      "",
      [`\`${r.command}\``, r.startedAt, r.method].filter(Boolean).join(" · "),
      ...loadLine(r),
    ],
  ];
  if (r.timings["floor.performance-now"] !== undefined) {
    parts.push(floorsSection(r), algorithmsSection(r), peersSection(r));
  }
  parts.push(
    memorySection(r),
    redisSection(r),
    httpSection(r),
    globalSection(r),
    targetsSection(r),
    notesSection(r),
  );
  return `${parts
    .filter((p) => p.length > 0)
    .map((p) => p.join("\n"))
    .join("\n\n")}\n`;
}
