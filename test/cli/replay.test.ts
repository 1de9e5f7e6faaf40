import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, test } from "vitest";
import type { KeySpec } from "../../src/cli/keys.js";
import {
  ALGORITHMS,
  comparePolicies,
  type PolicySpec,
  singlePolicy,
} from "../../src/cli/policy.js";
import { type ReplayOptions, type ReplayReport, replay } from "../../src/cli/replay.js";
import { accessLogPath, countPerKeyMinute, type SimpleLine } from "../support/access-log.js";
import { knownSkips, readRealLog } from "./real-log.js";

// What the parser accepts is what is replayed: real logs hold cut-off lines.
const log = readRealLog(accessLogPath);
const lines = log.accepted;

function replayFile(
  policies: readonly PolicySpec[],
  options: Partial<ReplayOptions> = {},
): Promise<ReplayReport> {
  return replay(createReadStream(accessLogPath), { policies, ...options });
}

function replayText(text: string, options: Partial<ReplayOptions> & { policies: PolicySpec[] }) {
  return replay(Readable.from([text]), options);
}

/** Lines whose time is behind an earlier line's: what a window of 0 cannot order. */
function stepsBack(ls: readonly SimpleLine[]): { count: number; maxMs: number } {
  let latest = Number.NEGATIVE_INFINITY;
  let count = 0;
  let maxMs = 0;
  for (const l of ls) {
    if (l.timeMs < latest) {
      count++;
      maxMs = Math.max(maxMs, latest - l.timeMs);
    } else latest = l.timeMs;
  }
  return { count, maxMs };
}

const perMinute = (limit: number) => singlePolicy("fixed-window", { limit, windowMs: 60_000 });

describe(`replay of the real log (${accessLogPath.split("/").slice(-2).join("/")})`, () => {
  test("the skipped lines are reported with their numbers and reasons (the real log has a cut-off line)", async () => {
    // The parser's verdict on the file, line by line, is what the tests expect...
    expect(log.skipped).toEqual(knownSkips(accessLogPath));
    // ...and what the replay reports.
    const report = await replayFile([perMinute(5)], { badLineSamples: 1000 });
    expect(report.lines).toEqual({
      read: log.read,
      parsed: lines.length,
      skipped: log.skipped.length,
      unkeyed: 0,
      samples: log.skipped.map((s) => ({ ...s, text: expect.any(String) })),
    });
    const r = report.results[0]!;
    expect(r.allowed + r.denied).toBe(lines.length);
  });

  test("the log is out of order by less than the default window, so nothing is late", () => {
    const back = stepsBack(lines);
    expect(back.count).toBeGreaterThan(lines.length / 2);
    expect(back.maxMs).toBeLessThan(60_000);
  });

  test.each([1, 3, 5, 10])(
    "fixed window of %i per minute per ip: denials = sum over (ip, minute) of max(0, count - limit)",
    async (limit) => {
      const counts = countPerKeyMinute(lines, (l) => l.host);
      let denied = 0;
      for (const c of counts.values()) denied += Math.max(0, c - limit);

      const report = await replayFile([perMinute(limit)], { topN: 1_000_000 });
      expect(report.lines).toMatchObject({
        read: log.read,
        parsed: lines.length,
        skipped: log.skipped.length,
      });
      expect(report.reorder.late).toBe(0);
      expect(report.results[0]).toMatchObject({ denied, allowed: lines.length - denied });
      expect(denied).toBeGreaterThan(0);

      // Per key: requests, peak per minute and denials, independently.
      for (const k of report.top) {
        const mine = lines.filter((l) => l.host === k.key);
        const minutes = countPerKeyMinute(mine, (l) => l.host);
        let keyDenied = 0;
        for (const c of minutes.values()) keyDenied += Math.max(0, c - limit);
        expect(k, k.key).toEqual({
          key: k.key,
          requests: mine.length,
          peakPerMinute: Math.max(...minutes.values()),
          denied: [keyDenied],
          approximate: false,
          deniedErrorMax: 0,
        });
      }
      expect(report.top.reduce((sum, k) => sum + k.denied[0]!, 0)).toBe(denied);
    },
  );

  test("token bucket: the same counts as a plain per-key bucket over the sorted log", async () => {
    // capacity 5, 0.25 tokens/s: with whole-second times every quantity is exact in binary.
    const capacity = 5;
    const perSecond = 0.25;
    const sorted = lines
      .map((l, i) => ({ ...l, i }))
      .sort((a, b) => a.timeMs - b.timeMs || a.i - b.i);
    const buckets = new Map<string, { tokens: number; atMs: number }>();
    let denied = 0;
    for (const l of sorted) {
      const b = buckets.get(l.host) ?? { tokens: capacity, atMs: l.timeMs };
      b.tokens = Math.min(capacity, b.tokens + ((l.timeMs - b.atMs) * perSecond) / 1000);
      b.atMs = l.timeMs;
      if (b.tokens >= 1) b.tokens -= 1;
      else denied++;
      buckets.set(l.host, b);
    }
    const report = await replayFile([
      singlePolicy("token-bucket", { capacity, refillPerSecond: perSecond }),
    ]);
    expect(report.results[0]).toMatchObject({ allowed: lines.length - denied, denied });
    expect(denied).toBeGreaterThan(0);
  });

  test("summary: time span, distinct keys (ip and ip24), peak live keys", async () => {
    const report = await replayFile([perMinute(5)]);
    expect(report.firstMs).toBe(Math.min(...lines.map((l) => l.timeMs)));
    expect(report.lastMs).toBe(Math.max(...lines.map((l) => l.timeMs)));
    expect(report.distinctKeys).toBe(new Set(lines.map((l) => l.host)).size);
    expect(report.format).toBe("combined");
    // A fixed window of one minute is idle once its minute is over, and the registry is
    // swept every simulated minute: the live keys never exceed the keys of two minutes.
    const keysPerMinute = new Map<number, Set<string>>();
    for (const l of lines) {
      const m = Math.floor(l.timeMs / 60_000);
      keysPerMinute.set(m, (keysPerMinute.get(m) ?? new Set()).add(l.host));
    }
    const busiest = Math.max(...[...keysPerMinute.values()].map((s) => s.size));
    expect(report.results[0]!.peakLiveKeys).toBeGreaterThanOrEqual(busiest);
    expect(report.results[0]!.peakLiveKeys).toBeLessThan(report.distinctKeys);

    const by24 = await replayFile([perMinute(5)], { key: "ip24" });
    const networks = new Set(lines.map((l) => l.host.split(".").slice(0, 3).join(".")));
    expect(by24.distinctKeys).toBe(networks.size);
    expect(by24.key).toBe("ip24");
  });

  test("reordering: window 0 decides every step back late; the default window orders them all", async () => {
    const back = stepsBack(lines);
    const ordered = await replayFile([perMinute(5)]);
    expect(ordered.reorder).toMatchObject({ windowMs: 60_000, reordered: back.count, late: 0 });
    const unordered = await replayFile([perMinute(5)], { reorderWindowMs: 0 });
    expect(unordered.reorder).toMatchObject({ windowMs: 0, reordered: 0, late: back.count });
    expect(unordered.reorder.peakBuffered).toBe(1);
    // Every line is still decided exactly once.
    const r = unordered.results[0]!;
    expect(r.allowed + r.denied).toBe(lines.length);
  });

  test("--compare rows equal each algorithm run alone with the derived options", async () => {
    const policies = comparePolicies({ capacity: 5, refillPerSecond: 0.1 });
    expect(policies.map((p) => p.algorithm)).toEqual([...ALGORITHMS]);
    expect(policies[2]!.options).toEqual({ limit: 5, windowMs: 50_000 });
    expect(policies.map((p) => p.derived)).toEqual([false, false, true, true, true]);
    const together = await replayFile(policies, { topN: 5 });
    for (const [i, policy] of policies.entries()) {
      const alone = await replayFile([policy], { topN: 0 });
      const { allowed, denied, peakLiveKeys } = alone.results[0]!;
      expect(together.results[i], policy.algorithm).toMatchObject({
        algorithm: policy.algorithm,
        allowed,
        denied,
        peakLiveKeys,
      });
    }
    // The token and leaky buckets decide alike as meters (docs/semantics.md#the-algorithms).
    expect(together.results[1]!.denied).toBe(together.results[0]!.denied);
    expect(together.top[0]!.denied).toHaveLength(5);
  });

  test("series: per-minute requests and each policy's denials add up to the totals", async () => {
    const policies = comparePolicies({ limit: 3, windowMs: 60_000 });
    const report = await replayFile(policies, { series: true });
    const s = report.series!;
    const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
    expect(sum(s.requests)).toBe(lines.length);
    expect(s.denied).toHaveLength(policies.length);
    for (const [i, r] of report.results.entries()) expect(sum(s.denied[i]!)).toBe(r.denied);
    // The busiest client of each minute, from the oracle.
    const perKeyMinute = countPerKeyMinute(lines, (l) => l.host);
    const busiest = new Map<number, number>();
    for (const [k, c] of perKeyMinute) {
      const m = Number(k.split(" ")[1]) * 60_000;
      busiest.set(m, Math.max(busiest.get(m) ?? 0, c));
    }
    expect(s.busiestClient).toEqual(s.minuteMs.map((m) => busiest.get(m)));
    expect(s.minuteMs).toEqual([...s.minuteMs].sort((a, b) => a - b));
    expect(new Set(s.minuteMs).size).toBe(
      new Set(lines.map((l) => Math.floor(l.timeMs / 60_000))).size,
    );
  });

  test("JSON lines derived from the log replay to the same counts", async () => {
    const jsonl = lines
      .map((l, i) =>
        JSON.stringify(
          i % 2 === 0
            ? { time: new Date(l.timeMs).toISOString(), ip: l.host }
            : { ts: l.timeMs, remote_addr: l.host },
        ),
      )
      .join("\n");
    const fromJson = await replayText(jsonl, { policies: [perMinute(5)] });
    const fromClf = await replayFile([perMinute(5)]);
    expect(fromJson.format).toBe("jsonl");
    expect(fromJson.results).toEqual(fromClf.results);
    expect(fromJson.top).toEqual(fromClf.top);
  });
});

describe("replay of crafted input", () => {
  const line = (host: string, sec: number, user = "-") =>
    `${host} - ${user} [17/May/2015:10:05:${String(sec).padStart(2, "0")} +0000] "GET / HTTP/1.1" 200 5 "-" "-"`;

  test("bad lines are skipped, counted and the first few kept with line number and reason", async () => {
    const text = [
      line("192.0.2.1", 0),
      "garbage",
      "",
      line("192.0.2.1", 1),
      `192.0.2.2 - - [31/Feb/2015:10:05:00 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
      "more garbage",
      "and more",
      "and more still",
    ].join("\n");
    const report = await replayText(text, { policies: [perMinute(1)], badLineSamples: 3 });
    expect(report.lines).toEqual({
      read: 8,
      parsed: 2,
      skipped: 6,
      unkeyed: 0,
      samples: [
        { line: 2, reason: "expected `host ident user [time]` at the start", text: "garbage" },
        { line: 3, reason: "blank line", text: "" },
        {
          line: 5,
          reason: "bad time [31/Feb/2015:10:05:00 +0000] (expected dd/Mon/yyyy:HH:MM:SS +hhmm)",
          text: `192.0.2.2 - - [31/Feb/2015:10:05:00 +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
        },
      ],
    });
    expect(report.results[0]).toMatchObject({ allowed: 1, denied: 1 });
  });

  test("format auto-detection skips leading blank lines; CRLF line ends are fine", async () => {
    const text = `\r\n${line("192.0.2.1", 0)}\r\n${line("192.0.2.1", 1)}\r\n`;
    const report = await replayText(text, { policies: [perMinute(5)], format: "auto" });
    expect(report.format).toBe("combined");
    expect(report.lines).toMatchObject({ read: 3, parsed: 2, skipped: 1 });
  });

  test.each<{ name: string; key: KeySpec; unkeyed: number; distinct: number }>([
    { name: "user: anonymous lines have no key", key: "user", unkeyed: 2, distinct: 1 },
    { name: "ip", key: "ip", unkeyed: 0, distinct: 3 },
    { name: "ip24", key: "ip24", unkeyed: 0, distinct: 2 },
  ])("key $name", async ({ key, unkeyed, distinct }) => {
    const text = [
      line("192.0.2.1", 0, "alice"),
      line("192.0.2.2", 1),
      line("198.51.100.1", 2),
      line("192.0.2.1", 3, "alice"),
    ].join("\n");
    const report = await replayText(text, { policies: [perMinute(5)], key });
    expect(report.lines.unkeyed).toBe(unkeyed);
    expect(report.distinctKeys).toBe(distinct);
  });

  test("lines shuffled within the window decide as the sorted lines do", async () => {
    // One client, 40 requests over 4 minutes; each block of four reversed (back by up to 18 s).
    const sorted = Array.from({ length: 40 }, (_, i) => i * 6);
    const shuffled = sorted.map((_, i) => sorted[i - (i % 4) + 3 - (i % 4)]!);
    const text = (secs: number[]) =>
      secs
        .map(
          (s) =>
            `192.0.2.1 - - [17/May/2015:10:${String(5 + Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")} +0000] "GET / HTTP/1.1" 200 5 "-" "-"`,
        )
        .join("\n");
    const policy = singlePolicy("sliding-window-log", { limit: 4, windowMs: 30_000 });
    const a = await replayText(text(sorted), { policies: [policy] });
    const b = await replayText(text(shuffled), { policies: [policy] });
    expect(b.reorder.reordered).toBeGreaterThan(0);
    expect(b.reorder.late).toBe(0);
    expect(b.results).toEqual(a.results);
    const c = await replayText(text(shuffled), {
      policies: [policy],
      reorderWindowMs: 0,
    });
    expect(c.reorder.late).toBe(b.reorder.reordered);
  });

  test("progress is reported every progressEvery lines", async () => {
    const seen: number[] = [];
    const text = Array.from({ length: 10 }, (_, i) => line("192.0.2.1", i)).join("\n");
    await replayText(text, {
      policies: [perMinute(5)],
      progressEvery: 3,
      onProgress: (n) => seen.push(n),
    });
    expect(seen).toEqual([3, 6, 9]);
  });

  test("maxKeys reached: lossy evictions are counted", async () => {
    const text = Array.from({ length: 6 }, (_, i) => line(`192.0.2.${i}`, i)).join("\n");
    const report = await replayText(text, { policies: [perMinute(5)], maxKeys: 2 });
    expect(report.results[0]!.peakLiveKeys).toBe(2);
    expect(report.results[0]!.lossyEvictions).toBe(4);
  });

  test("an input stream error rejects (regression: it was an unhandled readline error)", async () => {
    const failing = new Readable({
      read() {
        this.destroy(new Error("disk on fire"));
      },
    });
    await expect(replay(failing, { policies: [perMinute(1)] })).rejects.toThrow("disk on fire");
  });

  test("kept keys do not pin the file's chunks in memory (regression: 20,000 keys held 24 MB)", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    // 16 MB of 1 KiB lines a second apart, each with its own 15-character host: one key per
    // line, kept to the end (a fixed quota never goes idle).
    const padding = "x".repeat(1024 - 120);
    async function* chunks() {
      for (let c = 0; c < 256; c++) {
        let chunk = "";
        for (let i = 0; i < 64; i++) {
          const n = c * 64 + i;
          const hhmmss = new Date(Date.UTC(2015, 4, 17, 10) + n * 1000).toISOString().slice(11, 19);
          chunk += `100.${64 + (n >> 16)}.${(n >> 8) & 255}.${n & 255} - - [17/May/2015:${hhmmss} +0000] "GET /${padding} HTTP/1.1" 200 5 "-" "-"\n`;
        }
        yield chunk;
      }
    }
    gc();
    const before = process.memoryUsage().heapUsed;
    let during = 0;
    const report = await replay(Readable.from(chunks()), {
      policies: [singlePolicy("token-bucket", { capacity: 1, refillPerSecond: 0 })],
      progressEvery: 16_383,
      onProgress: () => {
        gc();
        during = process.memoryUsage().heapUsed - before;
      },
    });
    expect(report.distinctKeys).toBe(16_384);
    // The keys and their state take about 2-4 MB; pinned chunks would add the 16 MB read.
    expect(during).toBeLessThan(8 * 1024 * 1024);
  });

  test("keys held in the reorder window do not pin their lines (regression: 8 KiB user agents took 1.2 GB)", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    // 2,048 lines of 32 KiB within one second: all of them wait in the reorder window at
    // once, each key a 14-character host (V8 would cut it as a view of its line).
    const agent = "x".repeat(32 * 1024);
    async function* chunks() {
      for (let n = 0; n < 2048; n++) {
        yield `100.64.${100 + (n >> 7)}.${100 + (n & 127)} - - [17/May/2015:10:05:00 +0000] "GET / HTTP/1.1" 200 5 "-" "${agent}"\n`;
      }
    }
    gc();
    const before = process.memoryUsage().heapUsed;
    let during = 0;
    const report = await replay(Readable.from(chunks()), {
      policies: [perMinute(5)],
      progressEvery: 2048,
      onProgress: () => {
        gc();
        during = process.memoryUsage().heapUsed - before;
      },
    });
    expect(report.reorder.peakBuffered).toBe(2048);
    // 2,048 short keys take well under a megabyte; pinned lines would hold 64 MiB.
    expect(during).toBeLessThan(16 * 1024 * 1024);
  });

  test("more distinct clients than maxKeys: the tally stays bounded, distinct keys estimated", async () => {
    // 20,000 clients once each, and one client denied 90 times, with room for 100 keys.
    const lines: string[] = [];
    for (let n = 0; n < 20_000; n++) {
      const second = Math.floor(n / 100);
      lines.push(
        line(`100.64.${n >> 8}.${n & 255}`, second % 60).replace(
          "10:05:",
          `10:${String(5 + Math.floor(second / 60)).padStart(2, "0")}:`,
        ),
      );
      if (n % 200 === 0) lines.push(lines[lines.length - 1]!.replace(/^\S+/, "192.0.2.1"));
    }
    const report = await replayText(lines.join("\n"), {
      policies: [singlePolicy("token-bucket", { capacity: 10, refillPerSecond: 0 })],
      maxKeys: 100,
    });
    expect(report.distinctKeysExact).toBe(false);
    expect(Math.abs(report.distinctKeys - 20_001)).toBeLessThan(20_001 * 0.03);
    expect(report.untalliedRequests).toBeGreaterThan(0);
    // Its 10 of a fixed quota of 10, never more: a key pushed out comes back no fresher (a
    // colliding flood key's usage may cost it one more denial, never one fewer).
    expect(report.top[0]!.key).toBe("192.0.2.1");
    expect(report.top[0]!.denied[0]).toBeGreaterThanOrEqual(90);
    expect(report.results[0]!.peakLiveKeys).toBeLessThanOrEqual(100);
  });

  test("empty input: zeros, no time span", async () => {
    const report = await replayText("", { policies: [perMinute(1)] });
    expect(report.lines).toMatchObject({ read: 0, parsed: 0 });
    expect(report.firstMs).toBeUndefined();
    expect(report.results[0]).toMatchObject({ allowed: 0, denied: 0, peakLiveKeys: 0 });
  });
});
