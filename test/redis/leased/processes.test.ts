import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { accessLogPath } from "../../support/access-log.js";
import { uniquePrefix } from "../../support/redis-clients.js";
import { useRedis } from "../../support/redis-server.js";
import type { Scenario, Task, WorkerResult } from "./support/worker.js";

// N = 4 Node processes share one leased limit through one real redis-server. The oracle is
// the server's own record (taken, given) of each key's shared bucket, read after the run.

const here = dirname(fileURLToPath(import.meta.url));
const WORKER = join(here, "support", "worker.ts");
const PROCESSES = 4;
const DURATION_MS = 8000;

const redis = useRedis();
let conn: Redis;
beforeAll(async () => {
  if (redis.available) conn = new Redis(redis.url());
});
afterAll(() => conn?.disconnect());

async function serverMs(): Promise<number> {
  const [s, us] = await conn.time();
  return Number(s) * 1000 + Number(us) / 1000;
}

/** Starts the workers, waits until all are ready, says go together, collects their results. */
async function runWorkers(url: string, scenarios: Scenario[]): Promise<WorkerResult[]> {
  const children = Array.from({ length: PROCESSES }, (_, index) => {
    const task: Task = { url, index, processes: PROCESSES, durationMs: DURATION_MS, scenarios };
    const child = spawn(process.execPath, ["--import", "tsx", WORKER], {
      env: { ...process.env, LEASE_WORKER: JSON.stringify(task) },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const lines = createInterface({ input: child.stdout });
    const ready = new Promise<void>((resolve) => lines.once("line", () => resolve()));
    const result = new Promise<WorkerResult>((resolve, reject) => {
      lines.on("line", (line) => {
        if (line.startsWith("{")) resolve(JSON.parse(line) as WorkerResult);
      });
      child.once("exit", (code) => reject(new Error(`worker ${index} exited with ${code}`)));
    });
    return { child, ready, result };
  });
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.child.stdin.write("go\n");
  return Promise.all(children.map((c) => c.result));
}

async function recordOf(prefix: string, key: string): Promise<{ taken: number; given: number }> {
  const keys = await conn.keys(`${prefix}*:${key}`);
  expect(keys.length, `the record of ${key}`).toBeLessThanOrEqual(1);
  if (keys.length === 0) return { taken: 0, given: 0 };
  const h = await conn.hgetall(keys[0] as string);
  return { taken: Number(h["taken"] ?? 0), given: Number(h["given"] ?? 0) };
}

interface Summary {
  readonly admitted: Record<string, number>;
  readonly decisions: number;
  readonly exchanges: number;
  readonly heartbeats: number;
  readonly steadyDecisions: number;
  readonly steadyExchanges: number;
}

function summary(results: readonly WorkerResult[], name: string): Summary {
  const admitted: Record<string, number> = {};
  let decisions = 0;
  let exchanges = 0;
  let heartbeats = 0;
  let steadyDecisions = 0;
  let steadyExchanges = 0;
  for (const r of results) {
    const s = r.scenarios.find((x) => x.name === name);
    if (s === undefined) throw new Error(`no scenario ${name}`);
    for (const [k, n] of Object.entries(s.admitted)) admitted[k] = (admitted[k] ?? 0) + n;
    decisions += s.decisions;
    exchanges += s.exchanges;
    heartbeats += s.heartbeats;
    steadyDecisions += s.steadyDecisions;
    steadyExchanges += s.steadyExchanges;
  }
  return { admitted, decisions, exchanges, heartbeats, steadyDecisions, steadyExchanges };
}

/**
 * Runs the scenarios on 4 processes and checks every key against the server's record:
 * net taken (taken - given) within the shared bucket's bound `capacity + refillPerSecond x T`,
 * and admitted within net taken plus N x initialCredit.
 */
async function runAndCheck(scenarios: Scenario[]) {
  const startServer = await serverMs();
  const results = await runWorkers(redis.url(), scenarios);
  const T = ((await serverMs()) - startServer) / 1000;
  const activeS =
    (Math.max(...results.map((r) => r.endMs)) - Math.min(...results.map((r) => r.startMs))) / 1000;
  const report: Record<string, unknown> = { T, activeS };
  const summaries = new Map<string, Summary>();
  for (const scenario of scenarios) {
    const s = summary(results, scenario.name);
    summaries.set(scenario.name, s);
    const bound = scenario.capacity + scenario.refillPerSecond * T;
    const credit = PROCESSES * scenario.initialCredit;
    const keys = new Set(Object.keys(s.admitted));
    for (const k of scenario.keys ?? []) keys.add(k);
    let worst = Number.NEGATIVE_INFINITY;
    for (const key of keys) {
      const admitted = s.admitted[key] ?? 0;
      const r = await recordOf(scenario.prefix, key);
      const net = r.taken - r.given;
      expect(
        net,
        `${scenario.name} ${key}: net taken within the bucket's bound`,
      ).toBeLessThanOrEqual(bound + 1e-6);
      expect(
        admitted,
        `${scenario.name} ${key}: admitted within net taken + credit`,
      ).toBeLessThanOrEqual(net + credit + 1e-6);
      worst = Math.max(worst, admitted - net);
    }
    report[scenario.name] = {
      decisions: s.decisions,
      admitted: Object.values(s.admitted).reduce((a, b) => a + b, 0),
      keys: keys.size,
      worstAdmittedOverNetTaken: worst,
      commandsPer1000: ((s.exchanges + s.heartbeats) / s.decisions) * 1000,
      steadyRoundTripsPer100: (s.steadyExchanges / s.steadyDecisions) * 100,
    };
  }
  return { summaries, T, activeS, report, results };
}

describe.skipIf(!redis.available)(`LeasedTokenBucket, ${PROCESSES} processes, one Redis`, () => {
  test("hot keys: bounds from the server's record, utilisation, round trips", {
    timeout: 120_000,
  }, async () => {
    const scenarios: Scenario[] = [
      // A hot key offered 2x the refill rate: saturated, so an exact bucket admits its bound.
      {
        name: "hot",
        prefix: uniquePrefix("hot"),
        capacity: 1000,
        refillPerSecond: 5000,
        initialCredit: 0,
        keys: ["hot"],
        perSecond: 2500,
      },
      // A hot key at steady load below the limit: all should pass, with rare round trips.
      {
        name: "steady",
        prefix: uniquePrefix("steady"),
        capacity: 1000,
        refillPerSecond: 5000,
        initialCredit: 0,
        keys: ["steady"],
        perSecond: 600,
      },
    ];
    const { summaries, activeS, report, results } = await runAndCheck(scenarios);
    const hot = summaries.get("hot") as Summary;
    // Over the whole run, against an exact bucket from the first request (includes the
    // start, where credit 0 waits for the first lease while the full bucket overflows).
    const utilisationRun = (hot.admitted["hot"] ?? 0) / (2000 + 5000 * activeS);
    // At steady load (after the first quarter): an exact bucket, saturated, is empty at the
    // window's start and admits exactly refillPerSecond per second of it.
    const hotRuns = results.map((r) => r.scenarios.find((x) => x.name === "hot"));
    const steadyFrom = Math.max(...hotRuns.map((x) => x?.steadyFromMs ?? 0));
    const end = Math.max(...results.map((r) => r.endMs));
    const steadyAdmitted = hotRuns.reduce((a, x) => a + (x?.steadyAdmitted ?? 0), 0);
    const utilisation = steadyAdmitted / ((5000 * (end - steadyFrom)) / 1000);
    const steady = summaries.get("steady") as Summary;
    const steadyShare = (steady.admitted["steady"] ?? 0) / steady.decisions;
    console.log(
      `lease processes (hot): ${JSON.stringify({ ...report, utilisationRun, utilisation, steadyShare })}`,
    );
    expect(utilisation).toBeGreaterThanOrEqual(0.99);
    for (const s of [hot, steady]) {
      expect((s.steadyExchanges / s.steadyDecisions) * 100).toBeLessThanOrEqual(1);
    }
    // Below the limit nearly all pass; the rest are denials while a refill is on its way
    // after an event-loop stall (this machine's load decides how many).
    expect(steadyShare).toBeGreaterThanOrEqual(0.95);
  });

  test("many keys and the real access log: bounds per key with credit", {
    timeout: 120_000,
  }, async () => {
    const many = Array.from({ length: 200 }, (_, i) => `client-${i}`);
    const scenarios: Scenario[] = [
      // Many small keys, each saturated, with credit.
      {
        name: "many",
        prefix: uniquePrefix("many"),
        capacity: 5,
        refillPerSecond: 10,
        initialCredit: 1,
        keys: many,
        perSecond: 1000,
      },
      // The real access log, its clients as keys, time compressed into the run.
      {
        name: "log",
        prefix: uniquePrefix("log"),
        capacity: 10,
        refillPerSecond: 2,
        initialCredit: 1,
        log: accessLogPath,
      },
    ];
    const { summaries, report } = await runAndCheck(scenarios);
    console.log(`lease processes (keys): ${JSON.stringify(report)}`);
    const log = summaries.get("log") as Summary;
    expect(log.decisions).toBeGreaterThan(1000);
  });
});
