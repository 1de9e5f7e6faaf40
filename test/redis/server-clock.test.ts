import { describe, expect, test } from "vitest";
import { StoreTimeoutError } from "../../src/redis/errors.js";
import type { RedisLike } from "../../src/redis/index.js";
import { Script } from "../../src/redis/script.js";
import {
  DEADLINE_MARGIN_SHARE,
  DeadlinePassedError,
  PROBE_DEADLINE,
  runDecision,
  SAMPLE_BUCKET_MS,
  ServerClock,
} from "../../src/redis/server-clock.js";

/** A ServerClock on a manual local clock. */
function manual(start = 1_000) {
  let t = start;
  const clock = new ServerClock(() => t);
  return { clock, advance: (ms: number) => (t += ms), at: () => t };
}

describe("ServerClock: the offset is the largest recent lower bound", () => {
  test.each([
    { name: "no sample: no offset", samples: [], offset: undefined },
    { name: "one sample", samples: [[5_000, 1_000]], offset: 4_000 },
    {
      name: "the largest sample wins (a slow reply gives a lower bound)",
      samples: [
        [5_000, 1_000],
        [5_010, 1_050],
        [5_100, 1_060],
      ],
      offset: 4_040,
    },
    { name: "a non-finite reading is ignored", samples: [[Number.NaN, 1_000]], offset: undefined },
  ])("$name", ({ samples, offset }) => {
    const { clock } = manual();
    for (const [server, received] of samples) clock.observe(server!, received!);
    expect(clock.offsetMs()).toBe(offset);
  });

  test("samples age out after one to two buckets, so a clock stepped back is followed", () => {
    const { clock, advance, at } = manual();
    clock.observe(at() + 10_000, at()); // offset 10 s
    advance(SAMPLE_BUCKET_MS);
    clock.observe(at() + 2_000, at()); // the server's clock stepped back 8 s
    expect(clock.offsetMs()).toBe(10_000); // the old bucket still counts
    advance(SAMPLE_BUCKET_MS);
    expect(clock.offsetMs()).toBe(2_000);
    advance(2 * SAMPLE_BUCKET_MS);
    expect(clock.offsetMs()).toBeUndefined();
  });

  test("the deadline keeps a quarter of the timeout back, rounded down", () => {
    const { clock, at } = manual();
    expect(clock.deadlineArg(at(), 1_000)).toBeUndefined();
    clock.observe(at() + 500.5, at());
    expect(DEADLINE_MARGIN_SHARE).toBe(0.25);
    expect(clock.deadlineArg(at(), 1_000)).toBe(String(Math.floor(at() + 500.5 + 750)));
  });

  test("concurrent measurements share one probe", async () => {
    const { clock, at } = manual();
    let probes = 0;
    const probe = async () => {
      probes++;
      return at() + 42;
    };
    await Promise.all([clock.measure(probe), clock.measure(probe), clock.measure(probe)]);
    expect(probes).toBe(1);
    expect(clock.offsetMs()).toBe(42);
  });
});

describe("runDecision", () => {
  const script = new Script("test", "return 1");
  /** A client recording the deadline of each call and answering with `reply`. */
  function recording(reply: (deadline: string) => unknown) {
    const deadlines: string[] = [];
    const client: RedisLike = {
      evalSha: async (_sha, _keys, args) => {
        const deadline = args[args.length - 1]!;
        deadlines.push(deadline);
        return reply(deadline);
      },
      evalScript: () => Promise.reject(new Error("no script load expected")),
    };
    return { client, deadlines };
  }

  test("the first call measures the offset with a deadline long past, then sends a deadline", async () => {
    const serverAhead = 1e12;
    const { client, deadlines } = recording((deadline) =>
      deadline === PROBE_DEADLINE
        ? [-1, performance.now() + serverAhead]
        : [1, performance.now() + serverAhead],
    );
    await runDecision(client, script, ["k"], ["a"], 1_000);
    await runDecision(client, script, ["k"], ["a"], 1_000);
    expect(deadlines[0]).toBe(PROBE_DEADLINE);
    expect(deadlines.length).toBe(3);
    for (const d of deadlines.slice(1)) {
      const ahead = Number(d) - (performance.now() + serverAhead);
      expect(ahead).toBeGreaterThan(0);
      expect(ahead).toBeLessThanOrEqual(750);
    }
  });

  test("each cluster node keeps its own offset: a node behind gets no deadline past the timeout", async () => {
    // Node a's clock runs 500 ms ahead of node b's. With one offset per client, the largest
    // sample (a's) set b's deadlines 500 ms late: past the client's 1 s timeout, so b could
    // run a call the policy had answered and charge it.
    const aheadMs: Record<string, number> = { a: 1e12 + 500, b: 1e12 };
    const sent: { node: string; deadline: string }[] = [];
    const client: RedisLike = {
      evalSha: async (_sha, keys, args) => {
        const node = String(keys[0]);
        const deadline = args[args.length - 1]!;
        sent.push({ node, deadline });
        const now = performance.now() + aheadMs[node]!;
        return [deadline === PROBE_DEADLINE ? -1 : 1, now];
      },
      evalScript: () => Promise.reject(new Error("no script load expected")),
      nodeOf: (key) => String(key),
    };
    await runDecision(client, script, ["a"], [], 1_000);
    await runDecision(client, script, ["b"], [], 1_000);
    await runDecision(client, script, ["b"], [], 1_000);
    const decisions = sent.filter((c) => c.node === "b" && c.deadline !== PROBE_DEADLINE);
    expect(decisions.length).toBe(2);
    for (const c of decisions) {
      const ahead = Number(c.deadline) - (performance.now() + aheadMs["b"]!);
      expect(ahead).toBeLessThanOrEqual(750);
    }
  });

  test("a {-1} reply is a timeout: the call ran past its deadline and wrote nothing", async () => {
    const { client } = recording(() => [-1, performance.now()]);
    const error = await runDecision(client, script, ["k"], [], 1_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlinePassedError);
    expect(error).toBeInstanceOf(StoreTimeoutError);
  });

  test("a probe answered like a decision is a malformed reply, not a charge without a deadline", async () => {
    const { client, deadlines } = recording(() => [1, performance.now()]);
    await expect(runDecision(client, script, ["k"], [], 1_000)).rejects.toThrow(TypeError);
    expect(deadlines).toEqual([PROBE_DEADLINE]);
  });
});
