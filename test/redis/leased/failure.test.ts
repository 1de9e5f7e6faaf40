import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import { fromIoredis, type LeasedDecision, LeasedTokenBucket } from "../../../src/redis/index.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../../support/redis-server.js";

// A real outage: the redis-server is stopped while two limiters (two processes' worth)
// use a key, and started again on the same port (empty, as after a restart).

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!canStartRedis())("LeasedTokenBucket when Redis goes away", () => {
  let server: PrivateRedis | undefined;
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });

  test("leases, then a local bucket of capacity/N, then leases again without a burst", {
    timeout: 60_000,
  }, async () => {
    server = await startRedis();
    const errors: string[] = [];
    const recoveries: number[] = [];
    const make = () => {
      const redis = new Redis(server!.url, { retryStrategy: () => 20, enableOfflineQueue: false });
      redis.on("error", () => {});
      clients.push(redis);
      return new LeasedTokenBucket({
        client: fromIoredis(redis),
        capacity: 40,
        refillPerSecond: 4,
        initialCredit: 0,
        maxLeaseShare: 0.25,
        timeoutMs: 100,
        heartbeatTtlMs: 3000,
        onError: (e) => errors.push(e.operation),
        onRecover: (e) => recoveries.push(e.failedCalls),
      });
    };
    const limiter = make();
    const other = make();
    // Until both heartbeats are counted and the key has a lease.
    for (
      let i = 0;
      i < 200 && (limiter.liveProcesses < 2 || limiter.consume("k").source !== "lease");
      i++
    ) {
      await pause(10);
      other.peek("k");
    }
    expect(limiter.liveProcesses).toBe(2);

    await server.stop();
    const outageStart = Date.now();
    const during: LeasedDecision[] = [];
    for (let i = 0; i < 60; i++) {
      during.push(limiter.consume("k"));
      await pause(10);
    }
    const outageS = (Date.now() - outageStart) / 1000;
    const local = during.filter((d) => d.source === "local");
    expect(local.length).toBeGreaterThan(0);
    expect(errors).toContain("lease");
    const admittedLocal = local.filter((d) => d.allowed).length;
    // The local share: capacity / N = 20, refilled at 4 / 2 per second.
    expect(admittedLocal).toBeLessThanOrEqual(20 + 2 * outageS + 1e-9);
    // The lease in hand (at most 0.25 x 40 = 10) plus the local share.
    const admittedDuring = during.filter((d) => d.allowed).length;
    expect(admittedDuring).toBeLessThanOrEqual(10 + 20 + 2 * outageS + 1e-9);

    server = await startRedis(server.port);
    const recoveryStart = Date.now();
    const after: LeasedDecision[] = [];
    for (let i = 0; i < 100 && (after.length < 30 || recoveries.length === 0); i++) {
      after.push(limiter.consume("k"));
      await pause(10);
    }
    const afterS = (Date.now() - recoveryStart) / 1000;
    expect(recoveries.length).toBeGreaterThan(0);
    expect(after.some((d) => d.source === "lease" && d.allowed)).toBe(true);
    // No burst: the fresh bucket (40) is charged what the local bucket spent and had not
    // refilled, so the two together stay within one bucket's worth plus the refill.
    const admittedAfter = after.filter((d) => d.allowed && d.source === "lease").length;
    const spentLocal = Math.max(0, admittedLocal - 2 * outageS);
    expect(admittedAfter).toBeLessThanOrEqual(40 - spentLocal + 4 * (afterS + outageS) + 10 + 1e-9);
    await Promise.all([limiter.close(), other.close()]);
  });
});
