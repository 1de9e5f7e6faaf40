import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { parseCommand, type ReplayCommand } from "../../src/cli/args.js";
import type { NodesReport } from "../../src/cli/nodes.js";
import { singlePolicy, UsageError } from "../../src/cli/policy.js";
import { type ReplayOptions, replay } from "../../src/cli/replay.js";
import { accessLogPath, excerptPath } from "../support/access-log.js";
import { readRealLog } from "./real-log.js";

// What the parser accepts is what is replayed: real logs hold cut-off lines.
const log = readRealLog(accessLogPath);
const accepted = log.accepted.length;

const bucket = (capacity: number, refillPerSecond: number) =>
  singlePolicy("token-bucket", { capacity, refillPerSecond });

function replayLog(nodes: ReplayOptions["nodes"], capacity = 10, refillPerSecond = 0.1) {
  return replay(createReadStream(accessLogPath), {
    policies: [bucket(capacity, refillPerSecond)],
    nodes,
    topN: 1_000_000,
  });
}

const FOUR = { nodes: 4, rttMs: 1, spread: "random", seed: 1, initialCredit: 1 } as const;

/** The replay with {@link FOUR}, made once and shared by the tests that read it. */
let fourReport: ReturnType<typeof replayLog> | undefined;
const replayFour = () => {
  fourReport ??= replayLog(FOUR);
  return fourReport;
};

/** Every count of a report that must add up, checked against each other. */
function consistent(n: NodesReport, decisions: number): void {
  expect(Object.values(n.sources).reduce((a, b) => a + b, 0)).toBe(decisions);
  expect(n.admitted).toBeLessThanOrEqual(decisions);
  expect(n.keysOverBound).toBe(0);
  expect(n.worstRunExcess).toBeLessThanOrEqual(n.overshootBound);
}

describe("replay --nodes on the real log", () => {
  test("decides every accepted line once, within the bound, the exact lane unchanged", async () => {
    const plain = await replay(createReadStream(accessLogPath), {
      policies: [bucket(10, 0.1)],
    });
    const report = await replayFour();
    const n = report.nodes!;
    expect(report.lines.parsed).toBe(accepted);
    expect(report.lines.skipped).toBe(log.skipped.length);
    consistent(n, accepted);
    // The exact shared bucket is the policy's own lane, as without --nodes.
    expect(n.exactAdmitted).toBe(plain.results[0]!.allowed);
    expect(report.results).toEqual(plain.results);
    expect(n.overshootBound).toBe(4);
    // The tally's second lane is the leased decisions: per key, they add up to the total.
    const leasedDenied = report.top.reduce((a, k) => a + k.denied[1]!, 0);
    expect(leasedDenied).toBe(accepted - n.admitted);
    expect(n.exchanges).toBeGreaterThan(0);
  }, 60_000);

  test("is deterministic: the same seed gives the same report, another seed another spread", async () => {
    const a = await replayFour();
    const b = await replayLog(FOUR);
    expect(b.nodes).toEqual(a.nodes);
    expect(b.top).toEqual(a.top);
    // Another seed spreads the requests otherwise: on the excerpt, where it is cheap.
    const excerpt = (seed: number) =>
      replay(createReadStream(excerptPath), {
        policies: [bucket(2, 0.05)],
        nodes: { ...FOUR, seed },
        topN: 1_000_000,
      });
    const [one, again, two] = await Promise.all([excerpt(1), excerpt(1), excerpt(2)]);
    expect(again.top).toEqual(one.top);
    expect(two.top).not.toEqual(one.top);
  }, 60_000);

  test("with credit 0 no key is admitted more than by the exact bucket, nor above its bound", async () => {
    const n = (await replayLog({ ...FOUR, initialCredit: 0 })).nodes!;
    consistent(n, accepted);
    expect(n.overshoot).toBe(0);
    expect(n.worstRunExcess).toBe(0);
    expect(n.worstWindowExcess).toBe(0);
    expect(n.admitted).toBeLessThanOrEqual(n.exactAdmitted);
    expect(n.sources["credit"]).toBeUndefined();
  }, 60_000);

  test("round robin over 3 nodes stays within the bound (the other spreads: the property below)", async () => {
    const n = (await replayLog({ ...FOUR, spread: "round-robin", nodes: 3 })).nodes!;
    consistent(n, accepted);
    expect(n.overshootBound).toBe(3);
  }, 60_000);
});

/** Combined lines of `keys` clients at the given seconds after a fixed start. */
function logOf(requests: readonly { key: number; second: number }[]): string {
  const sorted = [...requests].sort((a, b) => a.second - b.second);
  return sorted
    .map(({ key, second }) => {
      const t = new Date(Date.UTC(2015, 4, 17, 10, 0, second));
      const stamp = `17/May/2015:${String(t.getUTCHours()).padStart(2, "0")}:${String(t.getUTCMinutes()).padStart(2, "0")}:${String(t.getUTCSeconds()).padStart(2, "0")} +0000`;
      return `10.0.0.${key} - - [${stamp}] "GET / HTTP/1.1" 200 1 "-" "t"`;
    })
    .join("\n");
}

describe("replay --nodes against the bucket's bound (property)", () => {
  test("any log, any spread: no key passes capacity + refill x T + nodes x credit", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            key: fc.integer({ min: 1, max: 3 }),
            second: fc.integer({ min: 0, max: 600 }),
          }),
          { minLength: 1, maxLength: 120 },
        ),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 2 }),
        fc.constantFrom("random", "round-robin", "key"),
        fc.integer({ min: 0, max: 50 }),
        async (requests, nodes, initialCredit, spread, rttMs) => {
          const report = await replay(Readable.from([logOf(requests)]), {
            policies: [bucket(3, 0.05)],
            nodes: { nodes, initialCredit, spread, rttMs, seed: 7 },
          });
          const n = report.nodes!;
          consistent(n, requests.length);
          if (initialCredit === 0) {
            expect(n.overshoot).toBe(0);
            expect(n.worstWindowExcess).toBe(0);
          }
        },
      ),
      { numRuns: 40, seed: 20_151 },
    );
  }, 60_000);
});

describe("tollgate replay --nodes options", () => {
  const parse = (...args: string[]) =>
    parseCommand(["replay", "access.log", "--algorithm", "token-bucket", ...args]) as ReplayCommand;

  test("defaults: random spread, seed 1, a round trip of 1 ms, the library's credit", () => {
    expect(parse("--capacity", "5", "--refill-per-second", "1", "--nodes", "4").nodes).toEqual({
      nodes: 4,
      rttMs: 1,
      spread: "random",
      seed: 1,
      initialCredit: 1,
    });
    expect(parse("--capacity", "5", "--refill-per-second", "1").nodes).toBeUndefined();
  });

  test.each([
    [["--nodes", "0"], "--nodes must be an integer from 1 to 1024"],
    [["--nodes", "2.5"], "--nodes must be an integer from 1 to 1024"],
    [["--nodes", "2", "--rtt-ms", "-1"], "--rtt-ms must be a finite number >= 0"],
    [["--nodes", "2", "--spread", "sticky"], 'unknown --spread "sticky"'],
    [["--nodes", "2", "--initial-credit", "NaN"], "--initial-credit must be a finite number >= 0"],
    [["--rtt-ms", "5"], "--rtt-ms applies with --nodes only"],
    [["--seed", "5"], "--seed applies with --nodes only"],
  ])("%j is refused: %s", (args, message) => {
    expect(() => parse("--capacity", "5", "--refill-per-second", "1", ...args)).toThrow(UsageError);
    expect(() => parse("--capacity", "5", "--refill-per-second", "1", ...args)).toThrow(message);
  });

  test("a policy other than one token bucket is refused", () => {
    const argv = ["replay", "a.log", "--nodes", "2", "--capacity", "5", "--refill-per-second", "1"];
    expect(() => parseCommand([...argv, "--compare", "--refill-per-second", "1"])).toThrow(
      "--nodes simulates LeasedTokenBucket, a token bucket",
    );
    expect(() =>
      parseCommand([
        "replay",
        "a.log",
        "--nodes",
        "2",
        "--algorithm",
        "fixed-window",
        "--limit",
        "5",
        "--window-ms",
        "1000",
      ]),
    ).toThrow("--nodes simulates LeasedTokenBucket, a token bucket");
  });
});
