import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import type { Decision } from "../../src/core/limiter.js";
import { RedisSlidingWindowLog } from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import { ioredisAdapter, keyOf, type TestClient, uniquePrefix } from "../support/redis-clients.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";

// The sliding log's work per call on a private server (its command counts are this file's
// alone): a bounded number of O(1) commands whatever the log holds.

/** The commands the script may run: each O(1) on a hash (UNLINK frees a big one off the main thread). */
const O1_COMMANDS = new Set(["hget", "hset", "hdel", "unlink", "pexpire", "pexpireat", "time"]);
/** Calls in flight at once: below the circuit's cap on pending calls, which the policy would answer. */
const PIPELINED = 500;
/** Most commands one call runs: two binary searches over a log of 2^25 entries and a few more. */
const MAX_COMMANDS_PER_CALL = 80;

let server: PrivateRedis;
let conn: TestClient;
const available = canStartRedis();

beforeAll(async () => {
  if (!available) return;
  server = await startRedis();
  conn = await ioredisAdapter.connect(server.url);
});
afterAll(async () => {
  await conn?.close();
  await server?.stop();
});

/** Calls per command since the last `CONFIG RESETSTAT`, the script's own (`evalsha`, `eval`) and INFO's left out. */
async function innerCommands(): Promise<Map<string, number>> {
  const info = String(await conn.command("INFO", "commandstats"));
  const calls = new Map<string, number>();
  for (const [, name, n] of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
    const ours = name === undefined || ["evalsha", "eval", "info"].includes(name);
    if (!ours && !name.startsWith("config")) calls.set(name, Number(n));
  }
  await conn.command("CONFIG", "RESETSTAT");
  return calls;
}

const sum = (calls: Map<string, number>) => [...calls.values()].reduce((a, b) => a + b, 0);

describe.skipIf(!available)("RedisSlidingWindowLog's work per call", () => {
  test("regression: a client at its limit at a large limit blocked the server (every entry rewritten in one call)", async () => {
    // limit 20k, a window of 20k ms: one entry per ms fills it. The list layout rewrote all
    // 20k entries at the rebase, popped 10k in the half drop and read O(n) per LINDEX.
    const limit = 20_000;
    const windowMs = 20_000;
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit, windowMs, clock });
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix(),
      limit,
      windowMs,
      maxTtlMs: 60_000,
      timeoutMs: 30_000,
    });
    const key = keyOf(shared, "k");
    /** Consumes `cost` at each time, pipelined, and checks every decision against memory. */
    const run = async (times: readonly number[], cost: number) => {
      for (let i = 0; i < times.length; i += PIPELINED) {
        const pending: Promise<Decision>[] = [];
        const expected: Decision[] = [];
        for (const t of times.slice(i, i + PIPELINED)) {
          clock.set(t);
          pending.push(shared.consume("k", cost));
          expected.push({ ...memory.consume(cost), source: "redis" } as Decision);
        }
        expect(await Promise.all(pending)).toEqual(expected);
      }
    };
    const from = (start: number, n: number) => Array.from({ length: n }, (_, i) => start + i);

    // Four halves of the limit, two windows apart, so the log never empties: 2 * limit has
    // gone through when the last leaves, and the next drop rebases.
    await run([0, 1], limit / 2);
    await run([windowMs, windowMs + 1], limit / 2);
    await run(from(2 * windowMs, limit), 1); // at the limit: 20k entries, 79 chunks
    const fill = await innerCommands();
    expect(sum(fill) / (limit + 4), "commands per call while filling").toBeLessThan(10);
    const bytes = Number(await conn.command("MEMORY", "USAGE", key, "SAMPLES", "0"));

    const single = [
      { name: "the rebase, 19,999 entries live", at: 3 * windowMs, cost: 1 },
      { name: "a denial's retryAfter search", at: 3 * windowMs, cost: 2 },
      { name: "10k entries leave at once", at: 3 * windowMs + limit / 2, cost: 1 },
      { name: "after the big drop", at: 3 * windowMs + limit / 2 + 1, cost: 1 },
      { name: "every entry has left", at: 10 * windowMs, cost: 1 },
    ];
    for (const call of single) {
      await innerCommands();
      await run([call.at], call.cost);
      const calls = await innerCommands();
      expect(sum(calls), call.name).toBeLessThanOrEqual(MAX_COMMANDS_PER_CALL);
      expect(
        [...calls.keys()].filter((name) => !O1_COMMANDS.has(name)),
        call.name,
      ).toEqual([]);
    }
    expect(bytes, "MEMORY USAGE of 20k entries").toBeLessThan(17 * limit + 4096);
    // The log emptied (unlinked) and started over: one chunk and the meta.
    expect(await conn.command("HLEN", key)).toBe(2);
  }, 120_000);

  test("chunks whose entries all left are deleted a few per call, the meta and live chunks kept", async () => {
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit: 10_000, windowMs: 10_000, clock });
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix(),
      limit: 10_000,
      windowMs: 10_000,
      maxTtlMs: 60_000,
    });
    const key = keyOf(shared, "k");
    for (let start = 0; start < 2550; start += PIPELINED) {
      const pending: Promise<unknown>[] = [];
      for (let t = start; t < Math.min(2550, start + PIPELINED); t++) {
        clock.set(t);
        memory.consume(1);
        pending.push(shared.consume("k", 1));
      }
      await Promise.all(pending);
    }
    expect(await conn.command("HLEN", key)).toBe(11); // 10 chunks of 255 and the meta
    clock.set(10_000 + 2040); // entries 0..2040 have left: chunks 0..7 are dead
    const fields: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      expect(await shared.peek("k", 1)).toEqual({ ...memory.peek(1), source: "redis" });
      fields.push(await conn.command("HLEN", key));
    }
    expect(fields).toEqual([7, 3, 3]); // 4 chunks a call, then only live ones: 8, 9 and the meta
  });
});

describe.skipIf(!available)("RedisSlidingWindowLog's layout", () => {
  test("an entry that outlives two rebases (a limit near 1e-9) reads as in memory", async () => {
    // At limit 1e-10 the tolerance of 1e-9 lets the window hold 11 times the limit, so an
    // entry older than one rebase can still be there at the next.
    const limit = 1e-10;
    const clock = manualClock(0);
    const memory = new SlidingWindowLog({ limit, windowMs: 100, clock });
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix(),
      limit,
      windowMs: 100,
      maxTtlMs: 60_000,
    });
    const steps = [
      { at: 0, cost: 0.9e-10 },
      { at: 1, cost: 0.9e-10 }, // total 1.8e-10
      { at: 50, cost: 3e-11 }, // total 2.1e-10
      { at: 101, cost: 1e-9 }, // the first two have left (base 1.8e-10, no rebase)
      { at: 102, cost: 5e-11 },
      { at: 150, cost: 1e-12 }, // base 2.1e-10: a rebase; the last two are older than it
      { at: 201, cost: 1e-12 }, // base 1e-9 on the new scale: a rebase with one still older
      { at: 201.5, cost: 2e-10 },
      { at: 202, cost: 1e-12 },
      { at: 260, cost: 1e-9 },
    ];
    for (const [i, s] of steps.entries()) {
      clock.set(s.at);
      const where = `step ${i} at ${s.at}`;
      expect(await shared.peek("k", s.cost), where).toEqual({
        ...memory.peek(s.cost),
        source: "redis",
      });
      expect(await shared.consume("k", s.cost), where).toEqual({
        ...memory.consume(s.cost),
        source: "redis",
      });
    }
  });

  test("a key in the earlier list layout is kept as one entry of all its units, never fresh", async () => {
    const clock = manualClock(1000);
    const shared = new RedisSlidingWindowLog({
      client: conn.client,
      clock,
      prefix: uniquePrefix(),
      limit: 3,
      windowMs: 1000,
      maxTtlMs: 60_000,
    });
    const key = keyOf(shared, "k");
    // Entries [leaveAtMs, runningTotal] at 1500 and 1900 (1 unit each, base 0), then [base, at].
    await conn.command(
      "EVAL",
      "redis.call('RPUSH', KEYS[1], struct.pack('<dd', 1500, 1), struct.pack('<dd', 1900, 2), struct.pack('<dd', 0, 900))",
      "1",
      key,
    );
    expect(await shared.consume("k")).toEqual({
      allowed: true,
      limit: 3,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 1000,
      source: "redis",
    });
    expect(await conn.command("TYPE", key)).toBe("hash");
    clock.set(1600); // the older entry would have left; the one kept holds both units until 1900
    expect(await shared.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 300 });
    clock.set(1900);
    expect(await shared.consume("k")).toMatchObject({ allowed: true, remaining: 1 });
  });
});
