import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { HEARTBEAT_SCRIPT, LEASE_SCRIPT } from "../../../src/redis/lua/lease.js";
import { replyNumber } from "../../../src/redis/reply.js";
import { runScript } from "../../../src/redis/script.js";
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

/** One exchange: [granted, waitMs, tokens, back] per key, then the server's now. */
async function exchange(
  keys: string[],
  perKey: [give: number, want: number, need: number][],
  options: { capacity?: number; rate?: number; record?: boolean; deadline?: string } = {},
): Promise<number[]> {
  const args = [
    String(options.capacity ?? 10),
    String(options.rate ?? 0),
    "60000",
    options.record === false ? "0" : "1",
  ];
  for (const [give, want, need] of perKey) args.push(String(give), String(want), String(need));
  args.push(options.deadline ?? "");
  const reply = (await runScript(conn.client, LEASE_SCRIPT, keys, args, 2000)) as unknown[];
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
        [6, 0, 0, 0],
      ], // up to: only 6 were there
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
    expect(out.length).toBe(9);
    expect([out[0], out[4]]).toEqual([3, 10]);
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

  test("heartbeats count live processes and drop lapsed ones", async () => {
    const key = `${uniquePrefix("beat")}procs`;
    const beat = async (id: string, ttl: number, leave = false) =>
      (
        (await runScript(
          conn.client,
          HEARTBEAT_SCRIPT,
          [key],
          [id, String(ttl), leave ? "1" : "0"],
          2000,
        )) as unknown[]
      ).map(replyNumber)[0];
    expect(await beat("a", 10_000)).toBe(1);
    expect(await beat("b", 10_000)).toBe(2);
    expect(await beat("c", 1)).toBe(3);
    await new Promise((r) => setTimeout(r, 5)); // a real server's clock: "c" lapses
    expect(await beat("a", 10_000)).toBe(2);
    expect(await beat("b", 10_000, true)).toBe(1);
  });
});
