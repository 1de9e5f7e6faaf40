import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  type BucketState,
  exchangeKey,
  freshBucket,
} from "../../../src/redis/leased/shared-bucket.js";
import { HEARTBEAT_SCRIPT, LEASE_SCRIPT } from "../../../src/redis/lua/lease.js";
import { replyNumber } from "../../../src/redis/reply.js";
import { runScript } from "../../../src/redis/script.js";
import { blockChange } from "../../support/lease-sim/stores.js";
import {
  deleteTestKeys,
  ioredisAdapter,
  type TestClient,
  uniquePrefix,
} from "../../support/redis-clients.js";
import { useRedis } from "../../support/redis-server.js";

const redis = useRedis();
let conn: TestClient;
beforeAll(async () => {
  if (redis.available) conn = await ioredisAdapter.connect(redis.url());
});
afterAll(async () => {
  if (conn) await deleteTestKeys(conn);
  await conn?.close();
});

/**
 * One exchange: [granted, waitMs, tokens, back, blockedMs, liftedAgoMs] per key, then the
 * server's now. `block` is the script's block argument (`b<ms>`, `o<ms>`, `l<ms>`).
 */
/** The sequence number of the last call {@link exchange} made. */
let calls = 0;

async function exchange(
  keys: string[],
  perKey: [give: number, want: number, need: number, charge?: number, block?: string][],
  options: {
    capacity?: number;
    rate?: number;
    record?: boolean;
    deadline?: string;
    process?: string;
    demand?: number;
    /** The call's sequence number (default: one more than the last call's). */
    sequence?: number;
  } = {},
): Promise<number[]> {
  calls = options.sequence ?? calls + 1;
  const args = [
    String(options.capacity ?? 10),
    String(options.rate ?? 0),
    "60000",
    options.record === false ? "0" : "1",
    "2000",
    options.process ?? "p1",
    String(calls),
  ];
  for (const [give, want, need, charge, block] of perKey) {
    args.push(
      String(give),
      String(charge ?? 0),
      String(want),
      String(need),
      String(options.demand ?? 1),
      block ?? "",
    );
  }
  args.push(options.deadline ?? "");
  const reply = (await runScript(conn.client, LEASE_SCRIPT, keys, args)) as unknown[];
  return reply.map(replyNumber);
}

describe.skipIf(!redis.available)("the lease script", () => {
  test("step table: take up to want when need fits, give back never above capacity", async () => {
    const key = `${uniquePrefix("lease")}k`;
    // give, want, need -> granted, waitMs, tokens left, accepted back
    const steps: [[number, number, number], [number, number, number, number]][] = [
      [
        [0, 4, 1],
        [4, 0, 6, 0],
      ],
      [
        [0, 10, 1],
        [6, Number.POSITIVE_INFINITY, 0, 0],
      ], // up to: only 6 were there; no refill, so never again
      [
        [0, 1, 1],
        [0, Number.POSITIVE_INFINITY, 0, 0],
      ], // empty, rate 0: never
      [
        [3, 0, 0],
        [0, 0, 3, 3],
      ],
      [
        [0, 5, 4],
        [0, Number.POSITIVE_INFINITY, 3, 0],
      ], // 3 < need 4: nothing taken
      [
        [20, 0, 0],
        [0, 0, 10, 7],
      ], // back to capacity, the excess dropped
    ];
    for (const [i, [ask, want]] of steps.entries()) {
      const out = await exchange([key], [ask]);
      expect(out.slice(0, 4), `step ${i}`).toEqual(want);
    }
    expect(Number(await conn.command("HGET", key, "taken"))).toBe(10);
    expect(Number(await conn.command("HGET", key, "given"))).toBe(10);
  });

  test("an empty bucket answers the time until need tokens are back", async () => {
    const key = `${uniquePrefix("lease")}k`;
    await exchange([key], [[0, 10, 1]], { rate: 4 });
    const [granted, waitMs] = await exchange([key], [[0, 5, 2]], { rate: 4 });
    expect(granted).toBe(0);
    // 2 tokens at 4 per second: 500 ms, less the few ms between the two calls.
    expect(waitMs).toBeGreaterThan(400);
    expect(waitMs).toBeLessThanOrEqual(500);
  });

  test("many keys in one call, each with its own answer", async () => {
    const p = uniquePrefix("lease");
    const out = await exchange(
      [`${p}a`, `${p}b`],
      [
        [0, 3, 1],
        [0, 20, 1],
      ],
    );
    expect(out.length).toBe(13);
    expect([out[0], out[6]]).toEqual([3, 10]);
  });

  test("past its deadline the script writes nothing and answers {-1, now}", async () => {
    const key = `${uniquePrefix("lease")}k`;
    const out = await exchange([key], [[0, 5, 1]], { deadline: "1" });
    expect(out[0]).toBe(-1);
    expect(out).toHaveLength(2);
    expect(out[1]).toBeGreaterThan(1_700_000_000_000);
    expect(await conn.command("EXISTS", key)).toBe(0);
  });

  test("without a record a full bucket has no key, as in the token bucket script", async () => {
    const key = `${uniquePrefix("lease")}k`;
    await exchange([key], [[0, 2, 1]], { rate: 1, record: false });
    expect(Number(await conn.command("PTTL", key))).toBeGreaterThan(1000);
    await exchange([key], [[5, 0, 0]], { rate: 1, record: false });
    expect(await conn.command("EXISTS", key)).toBe(0);
  });

  test("step table: a block first, a blocked key takes nothing, 'once' keeps a block, a lift leaves its mark", async () => {
    const key = `${uniquePrefix("lease")}k`;
    // [give, want, need, charge, block] -> granted, blockedMs at least/most, lifted mark
    const steps: [
      [number, number, number, number, string],
      { granted: number; blockedAtLeast: number; blockedAtMost: number; lifted: boolean },
    ][] = [
      [
        [0, 3, 1, 0, "b60000"],
        { granted: 0, blockedAtLeast: 59_000, blockedAtMost: 60_000, lifted: false },
      ],
      [
        [0, 3, 1, 0, ""],
        { granted: 0, blockedAtLeast: 59_000, blockedAtMost: 60_000, lifted: false },
      ],
      // 'once' keeps the block in place (neither shortened nor extended)
      [
        [0, 0, 0, 0, "o5000"],
        { granted: 0, blockedAtLeast: 59_000, blockedAtMost: 60_000, lifted: false },
      ],
      // a shorter 'block' never shortens it
      [
        [0, 0, 0, 0, "b10"],
        { granted: 0, blockedAtLeast: 59_000, blockedAtMost: 60_000, lifted: false },
      ],
      // a give-back and a charge are applied while blocked
      [
        [2, 0, 0, 1, ""],
        { granted: 0, blockedAtLeast: 59_000, blockedAtMost: 60_000, lifted: false },
      ],
      [[0, 0, 0, 0, "l0"], { granted: 0, blockedAtLeast: 0, blockedAtMost: 0, lifted: true }],
      [[0, 2, 1, 0, ""], { granted: 2, blockedAtLeast: 0, blockedAtMost: 0, lifted: true }],
      [
        [0, 0, 0, 0, "o1000"],
        { granted: 0, blockedAtLeast: 900, blockedAtMost: 1000, lifted: true },
      ],
    ];
    for (const [i, [ask, want]] of steps.entries()) {
      const out = await exchange([key], [ask]);
      expect(out[0], `step ${i} granted`).toBe(want.granted);
      expect(out[4], `step ${i} blockedMs`).toBeGreaterThanOrEqual(want.blockedAtLeast);
      expect(out[4], `step ${i} blockedMs`).toBeLessThanOrEqual(want.blockedAtMost);
      expect(out[5] !== Number.POSITIVE_INFINITY, `step ${i} lifted`).toBe(want.lifted);
    }
  });

  test("a block on a full bucket without a record keeps its key until the block ends", async () => {
    // A full bucket's expiry is now: set after the block's, it deleted the key and the block.
    const key = `${uniquePrefix("lease")}k`;
    await exchange([key], [[0, 0, 0, 0, "b60000"]], { rate: 5, record: false });
    expect(Number(await conn.command("PTTL", key))).toBeGreaterThan(59_000);
    const [granted, , , , blockedMs] = await exchange([key], [[0, 3, 1]], {
      rate: 5,
      record: false,
    });
    expect(granted).toBe(0);
    expect(blockedMs).toBeGreaterThan(59_000);
  });

  test("a block longer than maxTtlMs outlives it, at no refill too", async () => {
    const key = `${uniquePrefix("lease")}k`;
    await exchange([key], [[0, 1, 1, 0, "b600000"]], { rate: 0, record: false });
    expect(Number(await conn.command("PTTL", key))).toBeGreaterThan(599_000);
    await exchange([key], [[0, 1, 1, 0, ""]], { rate: 0, record: true });
    expect(Number(await conn.command("PTTL", key))).toBeGreaterThan(599_000);
  });

  /** A heartbeat call on `key` -> [live, joined]; each with a new sequence number, or `sequence`. */
  const heartbeat =
    (key: string) =>
    async (id: string, ttl: number, leave = false, sequence = ++calls): Promise<number[]> => {
      const reply = (
        (await runScript(
          conn.client,
          HEARTBEAT_SCRIPT,
          [key],
          [id, String(ttl), leave ? "1" : "0", String(sequence)],
        )) as unknown[]
      ).map(replyNumber);
      return [reply[0] as number, reply[2] as number];
    };

  test("a heartbeat run twice answers joined twice; its mark lapses with the membership", async () => {
    // ioredis sends a call again when a connection drops before its answer: the answer of
    // the second run is the one the process sees. It must say joined, as the first did.
    const key = `${uniquePrefix("beat")}procs`;
    const beat = heartbeat(key);
    expect(await beat("a", 10_000, false, 7)).toEqual([1, 1]);
    expect(await beat("a", 10_000, false, 7)).toEqual([1, 1]); // the same call again
    expect(await beat("a", 10_000, false, 8)).toEqual([1, 0]); // the next one
    expect(await beat("b", 10_000, false, 7)).toEqual([2, 1]); // marks are per process
    // The marks are not counted as processes, and lapse: a short membership's mark goes
    // with the next join after it lapsed.
    expect(await beat("c", 1, false, 1)).toEqual([3, 1]);
    await new Promise((r) => setTimeout(r, 5)); // a real server's clock: "c" lapses
    expect(await beat("d", 10_000, false, 1)).toEqual([3, 1]);
    const members = (await conn.command("ZRANGE", key, "0", "-1")) as string[];
    expect(members.filter((m) => m.startsWith("j:")).sort()).toEqual(["j:a:7", "j:b:7", "j:d:1"]);
    expect(await beat("c", 10_000, false, 1)).toEqual([4, 1]); // lapsed: joins anew
  });

  test("heartbeats count live processes, drop lapsed ones and say who joined", async () => {
    const key = `${uniquePrefix("beat")}procs`;
    const beat = heartbeat(key);
    expect(await beat("a", 10_000)).toEqual([1, 1]);
    expect(await beat("b", 10_000)).toEqual([2, 1]);
    expect(await beat("c", 1)).toEqual([3, 1]);
    await new Promise((r) => setTimeout(r, 5)); // a real server's clock: "c" lapses
    expect(await beat("a", 10_000)).toEqual([2, 0]);
    expect(await beat("c", 10_000)).toEqual([3, 1]); // lapsed: joins anew
    expect(await beat("b", 10_000, true)).toEqual([2, 0]);
    // A set the server forgot (a restart, FLUSHALL): each joins anew.
    await conn.command("DEL", key);
    expect(await beat("a", 10_000)).toEqual([1, 1]);
  });

  test("a call run twice is answered from its first run, and an older one changes nothing", async () => {
    // ioredis sends a call again when a connection drops before its answer; a cluster
    // client retries after a failover. The record of the process's last call on the key
    // (kept until the call's deadline) answers the second run as the first; before, the
    // second run gave back, charged and took again (119 admitted of a bucket of 100).
    const key = `${uniquePrefix("lease")}k`;
    const far = String(Date.now() + 3_600_000); // a deadline an hour away
    const take = await exchange([key], [[0, 6, 1]], { rate: 0, deadline: far, sequence: 1 });
    expect(take.slice(0, 4)).toEqual([6, 0, 4, 0]);
    const call: [number, number, number, number][] = [[5, 2, 1, 1]]; // give 5, want 2, charge 1
    const first = await exchange([key], call, { rate: 0, deadline: far, sequence: 2 });
    expect(first.slice(0, 4)).toEqual([2, 0, 6, 5]); // 4 + 5 - 1 - 2
    const again = await exchange([key], call, { rate: 0, deadline: far, sequence: 2 });
    expect(again.slice(0, 6)).toEqual(first.slice(0, 6));
    expect(await conn.command("HGET", key, "tokens")).toBe("6");
    expect(await conn.command("HGET", key, "given")).toBe("5");
    expect(await conn.command("HGET", key, "charged")).toBe("1");
    // A newer call runs; the older one, run once more after it, changes nothing.
    await exchange([key], [[0, 1, 1]], { rate: 0, deadline: far, sequence: 3 });
    const older = await exchange([key], call, { rate: 0, deadline: far, sequence: 2 });
    expect(older.slice(0, 4)).toEqual([0, 0, 5, 0]); // nothing, beside the last tokens seen
    expect(await conn.command("HGET", key, "tokens")).toBe("5");
    expect(await conn.command("HGET", key, "given")).toBe("5");
    // Another process's call of the same number is its own.
    const other = await exchange([key], [[0, 1, 1]], {
      rate: 0,
      deadline: far,
      sequence: 3,
      process: "p2",
    });
    expect(other.slice(0, 3)).toEqual([1, 0, 4]);
  });

  test("a full bucket keeps its call records until their deadline, then nothing", async () => {
    // A give-back that fills the bucket leaves no state but the record: run twice after
    // another process took from the bucket, it must not give back again.
    const key = `${uniquePrefix("lease")}k`;
    const soon = () => String(Date.now() + 300);
    const opts = { rate: 0, record: false };
    await exchange([key], [[0, 3, 1]], { ...opts, deadline: soon(), sequence: 1 });
    const giveAll: [number, number, number][] = [[3, 0, 0]];
    await exchange([key], giveAll, { ...opts, deadline: soon(), sequence: 2 });
    expect(await conn.command("HGET", key, "tokens")).toBe("10");
    await exchange([key], [[0, 3, 1]], { ...opts, process: "p2", sequence: 1 });
    await exchange([key], giveAll, { ...opts, deadline: soon(), sequence: 2 });
    expect(await conn.command("HGET", key, "tokens")).toBe("7");
    // A bucket full again whose records lapse (300 ms) is gone with them.
    const lapsing = `${uniquePrefix("lease")}k`;
    await exchange([lapsing], [[0, 3, 1]], { ...opts, deadline: soon(), sequence: 1 });
    await exchange([lapsing], giveAll, { ...opts, deadline: soon(), sequence: 2 });
    expect(Number(await conn.command("EXISTS", lapsing))).toBe(1);
    const pttl = Number(await conn.command("PTTL", lapsing));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(302);
    await new Promise((r) => setTimeout(r, pttl + 50));
    expect(Number(await conn.command("EXISTS", lapsing))).toBe(0);
  });

  test("a call that asks nothing keeps the record of the process's last call", async () => {
    // A call that asks nothing (a probe, a question about a blocked key) writes no record,
    // so the record of the process's previous call stays the one a second run of that call
    // is answered from (shared-bucket.ts keeps the key while any record lasts). The script
    // held the key only for the other processes' records: on a full bucket without a
    // record, a probe that dropped something deleted the key and the record with it, and
    // the previous call, run again, gave back again.
    const key = `${uniquePrefix("lease")}k`;
    const far = String(Date.now() + 3_600_000);
    const opts = { rate: 0, record: false };
    await exchange([key], [[0, 3, 1]], { ...opts, deadline: far, sequence: 1 });
    const giveAll: [number, number, number][] = [[3, 0, 0]];
    const first = await exchange([key], giveAll, { ...opts, deadline: far, sequence: 2 });
    expect(first.slice(0, 4)).toEqual([0, 0, 10, 3]);
    // Another process's record that lapses soon: the probe below drops it (a write).
    await exchange([key], [[1, 0, 0]], {
      ...opts,
      deadline: String(Date.now() + 100),
      process: "p2",
      sequence: 1,
    });
    await new Promise((r) => setTimeout(r, 150));
    // The probe of process p1, a newer call that asks nothing.
    await exchange([key], [[0, 0, 0]], { ...opts, deadline: far, sequence: 3 });
    // p3 takes 5; then p1's call 2 (sequence 2) runs a second time: answered, not applied.
    await exchange([key], [[0, 5, 1]], { ...opts, process: "p3", sequence: 1 });
    const again = await exchange([key], giveAll, { ...opts, deadline: far, sequence: 2 });
    expect(again.slice(0, 6)).toEqual(first.slice(0, 6));
    expect(await conn.command("HGET", key, "tokens")).toBe("5");
  });

  test("a charge is taken whatever the bucket holds, and the refill repays it first", async () => {
    const key = `${uniquePrefix("lease")}k`;
    // give, want, need, charge -> granted, waitMs, tokens left, accepted back
    const first = await exchange([key], [[0, 0, 0, 14]], { rate: 0 });
    expect(first.slice(0, 4)).toEqual([0, 0, -4, 0]);
    const second = await exchange([key], [[0, 1, 1]], { rate: 0 });
    expect(second.slice(0, 4)).toEqual([0, Number.POSITIVE_INFINITY, -4, 0]);
    expect(Number(await conn.command("HGET", key, "charged"))).toBe(14);
  });

  test("a contended bucket sets the refill aside for each process in turn", async () => {
    const key = `${uniquePrefix("lease")}k`;
    // 1 token a second: the server's clock (the script reads TIME) moving between the calls
    // refills too little to matter, however loaded the machine (at 1000 per second a 5 ms
    // pause refilled the 4 tokens and the contender was granted them).
    const options = { capacity: 10, rate: 1, demand: 5000 };
    // Both drain the bucket, then each is a contender told its own wait.
    await exchange([key], [[0, 10, 10]], { ...options, process: "a" });
    const a = await exchange([key], [[0, 8, 4]], { ...options, process: "a" });
    const b = await exchange([key], [[0, 8, 4]], { ...options, process: "b" });
    expect(a[0]).toBe(0);
    expect(b[0]).toBe(0);
    const fields = (await conn.command("HGETALL", key)) as string[];
    expect(fields.filter((f) => String(f).startsWith("c:")).sort()).toEqual(["c:a", "c:b"]);
    // b's wait counts its half of the refill: 4 tokens at 0.5 per second, about 8 s (more
    // than the 4 s of the whole refill).
    expect(b[1]).toBeGreaterThan(4000);
    expect(b[1]).toBeLessThanOrEqual(8000);
  });

  test("property: the script answers as the TypeScript model of the shared bucket", async () => {
    const step = fc.record({
      process: fc.constantFrom("a", "b", "c"),
      give: fc.constantFrom(0, 0, 1, 3.5),
      charge: fc.constantFrom(0, 0, 0, 2, 7),
      want: fc.constantFrom(0, 1, 4, 9),
      need: fc.constantFrom(0.5, 1, 3),
      demand: fc.constantFrom(10, 300, 2000),
      block: fc.constantFrom("", "", "", "b50000", "b5", "o20000", "l0", "l30000"),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const key = `${uniquePrefix("model")}k`;
        const config = { capacity: 12, refillPerSecond: 400, staleMs: 2000 };
        let model: BucketState | undefined;
        for (const [i, s] of steps.entries()) {
          const need = Math.min(s.need, s.want);
          const out = await exchange([key], [[s.give, s.want, need, s.charge, s.block]], {
            capacity: config.capacity,
            rate: config.refillPerSecond,
            process: s.process,
            demand: s.demand,
          });
          const now = out[6] as number;
          model ??= freshBucket(config.capacity, now);
          const want = exchangeKey(
            model,
            {
              key,
              give: s.give,
              charge: s.charge,
              want: s.want,
              need,
              demand: s.demand,
              block: blockChange(s.block),
            },
            s.process,
            now,
            config,
            i,
            Number.NEGATIVE_INFINITY,
          );
          const got = {
            granted: out[0],
            waitMs: out[1],
            tokens: out[2],
            back: out[3],
            blockedMs: out[4],
            liftedAgoMs: out[5],
          };
          const names = [
            "granted",
            "waitMs",
            "tokens",
            "back",
            "blockedMs",
            "liftedAgoMs",
          ] as const;
          for (const name of names) {
            const a = got[name] as number;
            const b = want[name];
            const close = a === b || Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
            expect(close, `step ${i} ${name}: script ${a}, model ${b}`).toBe(true);
          }
        }
      }),
      { numRuns: 40 },
    );
  });
});
