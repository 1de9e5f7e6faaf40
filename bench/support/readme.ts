/**
 * Prints the recorded-run section of docs/benchmarks.md from recorded results, so it always shows
 * a real run: `npx tsx bench/support/readme.ts bench/results/<core>.json [<http>.json]`.
 * The first file is a `npm run bench` run (sections 1-5), the optional second a
 * `npm run bench:http` run; a single `--all` run can serve as both. With `--report <file>`
 * it re-renders that run's full Markdown report instead.
 * @module
 */
import { readFileSync } from "node:fs";
import { PEERS } from "../peers.js";
import { int, ns, ratio, table } from "./format.js";
import { keyPatterns, newKeyBound } from "./keys.js";
import { machineLine } from "./machine.js";
import { httpSection, type RunResults, renderReport } from "./report.js";
import { targetsOverRounds } from "./rounds.js";
import { NEW_KEY_ROWS, verdict } from "./targets.js";

/** `private redis-server on 127.0.0.1:38381 (Redis server v=7.0.15), pid 1` -> `a private redis-server 7.0.15 on loopback`. */
function redisOrigin(origin: string): string {
  const version = /v=([\d.]+)/.exec(origin)?.[1];
  return origin.startsWith("private")
    ? `a private redis-server${version === undefined ? "" : ` ${version}`} on loopback`
    : origin;
}

function load(path: string): RunResults {
  return JSON.parse(readFileSync(path, "utf8")) as RunResults;
}

/** The new-key-at-the-bound table, when the run has it. */
function newKeyLines(core: RunResults): string[] {
  const rows = NEW_KEY_ROWS.flatMap((row) => {
    const v = core.timings[row.id]?.nsPerOp;
    return v === undefined ? [] : [[row.label, ns(v)]];
  });
  if (rows.length === 0) return [];
  return [
    "",
    `A new key at the bound (ns per new key): \`maxKeys\` ${int(newKeyBound(core.quick))}, ` +
      "filled with keys in use, then only keys it has not seen, so every call creates a key " +
      "and evicts one in use:",
    "",
    table(["policy", "ns per new key"], "lr", rows),
  ];
}

/** The section as Markdown. */
export function renderReadme(core: RunResults, http: RunResults | undefined): string {
  const t = (id: string) => core.timings[id]?.nsPerOp;
  const patterns = keyPatterns(core.quick);
  const tb = patterns.map((p) => t(`TokenBucket.keyed.allow.${p.id}`));
  const now = t("floor.performance-now");
  const naive = patterns.map((p) => t(`naive.${p.id}`));
  const row = (name: string, values: (number | undefined)[], withRatio = true) => [
    name,
    ...values.map((v, i) =>
      v === undefined ? "" : withRatio ? `${ns(v)} (${ratio(tb[i], v)})` : ns(v),
    ),
  ];
  const checkRows = [
    [`**tollgate \`KeyedLimiter(TokenBucket).allow(key)\`**`, ...tb.map((v) => `**${ns(v)}**`)],
    row("bare `performance.now()` (reference)", [now, undefined, undefined]),
    row(
      "`Map.get` alone, no limiter (floor)",
      [undefined, t("floor.map-get.medium"), t("floor.map-get.large")],
      false,
    ),
    row("naive `Map<string, {tokens, last}>` token bucket (reference)", naive),
    ...PEERS.map((p) =>
      row(
        `${p.name.split(" ")[0]} ${p.version}${p.id === "fastify" ? " (its store alone)" : ""}`,
        patterns.map((q) => t(`peer.${p.id}.${q.id}`)),
      ),
    ),
    row(
      "@fastify/rate-limit, the store awaited as the plugin calls it",
      patterns.map((q) => t(`peer.fastify-awaited.${q.id}`)),
    ),
  ];
  const algorithms = [
    "TokenBucket",
    "LeakyBucket",
    "FixedWindow",
    "SlidingWindowLog",
    "SlidingWindowCounter",
  ];
  const algoRows = algorithms.map((a) => [
    a,
    ns(t(`${a}.single.allow`)),
    ...patterns.map((p) => ns(t(`${a}.keyed.allow.${p.id}`))),
  ]);
  const mem = core.memory?.results ?? [];
  const memRows = mem.flatMap((m) =>
    m.ok
      ? [
          [
            m.name,
            m.measured.bytesPerKey.toFixed(0),
            (m.measured.bytesPerKey + m.measured.keyStringBytes).toFixed(0),
          ],
        ]
      : [],
  );
  const redis = core.redis !== undefined && "ping" in core.redis ? core.redis : undefined;
  const all = [
    ...targetsOverRounds(core).filter((x) => x.section === "core"),
    ...(http ? targetsOverRounds(http).filter((x) => x.section === "http") : []),
    ...targetsOverRounds(core).filter((x) => x.section === "redis" && x.value !== undefined),
  ];
  const lines: string[] = [
    "## Benchmarks",
    "",
    "`npm ci && npm run bench` reproduces the numbers below on your machine in a few minutes: a " +
      "Markdown report on stdout (the machine line first), the raw numbers in `bench/results/`. " +
      "`npm run bench:http` runs the HTTP experiment; `npm run bench -- --quick` is the smoke test CI runs.",
    "",
    `Recorded run: **${machineLine(core.machine)}**, \`${core.command}\`, ${core.startedAt}.`,
    "",
    "Nanoseconds per check, and in brackets tollgate's time as a fraction of that row's " +
      "(0.25x = tollgate takes a quarter of the time). Keys look like IPv4 addresses and are " +
      "visited in random order; every key already has state; every call is allowed.",
    "",
    table(["", ...patterns.map((p) => p.label)], `l${"r".repeat(patterns.length)}`, checkRows),
    "",
    "How to read it: the hot-key column is the floor, one clock read plus a little arithmetic; " +
      "the random columns are dominated by cache misses (the 1M-key working set is far larger " +
      "than the CPU caches), which is where a compact layout (tollgate keeps a token bucket's " +
      "state in a `Float64Array` slab, no object per key) pays. Every peer is called as its own " +
      "middleware calls it (promises awaited), and @fastify/rate-limit's store also bare, " +
      "its best case; the full report (`npm run bench`) has the " +
      "like-for-like table against tollgate's `FixedWindow` for the three fixed-window peers.",
    "",
    "The five algorithms (ns per check): a single limiter's `allow()`, and `KeyedLimiter` per key:",
    "",
    table(["algorithm", "allow()", ...patterns.map((p) => `keyed, ${p.label}`)], "lrrrr", algoRows),
    "",
    "`TokenBucket`, `LeakyBucket`, `FixedWindow` and `SlidingWindowCounter` take the registry's " +
      "slab fast path (no object per key); `SlidingWindowLog` too, with its entries in one " +
      "shared arena (no array per key); it stores one entry per allowed request, so its " +
      "benchmark limit is 1000 and its `allow()` and hot-key cells time denials.",
    ...newKeyLines(core),
    "",
    `Memory at ${int(core.memory?.keys)} keys (bytes per key, each in a fresh process after full GCs):`,
    "",
    table(["structure", "without the key string", "with the key string"], "lrr", memRows),
  ];
  if (redis !== undefined) {
    lines.push(
      "",
      `Redis (${redisOrigin(redis.origin)}; ioredis, \`PING\` and \`consume\` on one connection):`,
      "",
      table(["", "p50 µs", "p99 µs", `ops/s, ${redis.inFlight} in flight`], "lrrr", [
        [
          "bare `PING`",
          redis.ping.p50Us.toFixed(0),
          redis.ping.p99Us.toFixed(0),
          int(redis.ping.opsPerSecond),
        ],
        [
          "`RedisTokenBucket.consume`",
          redis.consume.p50Us.toFixed(0),
          redis.consume.p99Us.toFixed(0),
          int(redis.consume.opsPerSecond),
        ],
      ]),
      "",
      `A Redis check costs ${ratio(redis.consume.p50Us * 1000, t("TokenBucket.keyed.consume.hot"))} an in-process one (p50 against \`KeyedLimiter.consume\`, hot key).`,
    );
    const side = redis.rows ?? [];
    const ping = side.find((x) => x.id === "ping");
    const rlf = side.find((x) => x.id === "rlf.redis");
    if (side.length > 0) {
      lines.push(
        "",
        "Side by side on that connection (server µs/check: `INFO commandstats`; server CPU: `INFO cpu`):",
        "",
        table(
          [
            "",
            "p50 µs",
            "p99 µs",
            "ops/s",
            "server µs/check",
            "server CPU µs/check",
            "p50 / PING",
            "server µs / RLF",
          ],
          "lrrrrrrr",
          side.map((x) => [
            x.name,
            x.p50Us.toFixed(0),
            x.p99Us.toFixed(0),
            int(x.opsPerSecond),
            x.serverUsPerCall.toFixed(2),
            x.serverCpuUsPerCall.toFixed(2),
            ratio(x.p50Us, ping?.p50Us),
            ratio(x.serverUsPerCall, rlf?.serverUsPerCall),
          ]),
        ),
      );
    }
  }
  if (http?.http !== undefined) {
    const where = http === core ? "" : ` on **${machineLine(http.machine)}**`;
    lines.push(
      "",
      `HTTP (\`${http.command}\`, ${http.startedAt}${where}), beside the source article's figures:`,
      ...httpSection(http).slice(1),
    );
  }
  lines.push(
    "",
    "Targets, as measured in these runs (ratio: the row over its reference, both from the same " +
      "run; for a bound in bytes or µs, the value over the bound):",
    "",
    table(
      ["target", "measured", "bound", "ratio", ""],
      "lrrrl",
      all.map((x) => [x.target, x.measured, x.bound, x.ratio, verdict(x, core.quick)]),
    ),
  );
  return `${lines.join("\n")}\n`;
}

const args = process.argv.slice(2);
if (args[0] === "--report" && args[1] !== undefined) {
  // Re-renders a recorded run's full report (for example after a change to report.ts).
  process.stdout.write(renderReport(load(args[1])));
} else if (args[0] === undefined || args[0].startsWith("--")) {
  console.error(
    "usage: tsx bench/support/readme.ts <core results.json> [<http results.json>]\n" +
      "       tsx bench/support/readme.ts --report <results.json>",
  );
  process.exit(2);
} else {
  const core = load(args[0]);
  const httpPath = args[1];
  const http = httpPath === undefined ? (core.http ? core : undefined) : load(httpPath);
  process.stdout.write(renderReadme(core, http));
}
