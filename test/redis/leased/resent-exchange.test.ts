import type { Server } from "node:net";
import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import { fromIoredis, LeasedTokenBucket } from "../../../src/redis/index.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../../support/redis-server.js";
import { replyDropper } from "../../support/reply-dropper.js";

// ioredis sends again, on its next connection, every command whose reply the last one
// lost (`autoResendUnfulfilledCommands`, on by default). A lease exchange whose reply is
// lost after it ran there runs twice, within its deadline: the second run must be answered
// from the first, not applied again. A proxy between the client and a real redis-server
// drops the connection as the reply of the one exchange that gives a lease back comes
// through.

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!canStartRedis())("LeasedTokenBucket on an ioredis client that resends", () => {
  let redis: PrivateRedis | undefined;
  const clients: Redis[] = [];
  const proxies: Server[] = [];
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    for (const p of proxies) p.close();
    await redis?.stop();
  });

  /** A client straight to Redis, and one with ioredis's defaults through a dropping proxy. */
  async function clientsOf(url: string) {
    const hop = await replyDropper(Number(new URL(url).port));
    proxies.push(hop.server);
    const direct = new Redis(url);
    // ioredis's defaults, but for a quick reconnection.
    const resending = new Redis(hop.port, "127.0.0.1", { retryStrategy: () => 10 });
    resending.on("error", () => {});
    clients.push(direct, resending);
    /** Resolves once the proxy dropped a connection and the client is back. */
    const dropped = async () => {
      for (let i = 0; i < 400 && (hop.dropped() === 0 || resending.status !== "ready"); i++) {
        await pause(5);
      }
      expect(hop.dropped()).toBe(1);
    };
    return { hop, direct, resending, dropped };
  }

  /** Polls `check` every 5 ms, up to 2 s, until it is true. */
  async function until(check: () => Promise<boolean>): Promise<void> {
    for (let i = 0; i < 400 && !(await check()); i++) await pause(5);
  }

  test("a give-back whose reply was lost and which ioredis sent again is applied once", {
    timeout: 30_000,
  }, async () => {
    redis = await startRedis();
    const { hop, direct, resending, dropped } = await clientsOf(redis.url);
    const limiter = new LeasedTokenBucket({
      client: fromIoredis(resending),
      prefix: "resend:",
      capacity: 100,
      refillPerSecond: 0,
      initialCredit: 0,
      failure: "closed",
      heartbeatTtlMs: 60_000,
      record: true,
    });
    let admitted = 0;
    for (let i = 0; i < 200 && admitted < 5; i++) {
      if (limiter.consume("k").allowed) admitted++;
      else await pause(5);
    }
    expect(admitted).toBe(5);
    // The key's hash (the heartbeats' sorted set shares the prefix).
    const bucket = (await direct.keys("resend:*")).find((k) => k.endsWith(":k")) as string;
    const taken = Number(await direct.hget(bucket, "taken"));
    expect(taken).toBeGreaterThan(5);

    // Its lease goes back: the reply of that exchange is lost after it ran.
    const field = async (name: string) => Number((await direct.hget(bucket, name)) ?? 0);
    const scriptRuns = async () =>
      Number(/cmdstat_evalsha:calls=(\d+)/.exec(await direct.info("commandstats"))?.[1] ?? 0);
    const givenBefore = await field("given");
    const runsBefore = await scriptRuns();
    const sentBefore = limiter.stats.tokensGivenBack;
    hop.arm();
    limiter.reset("k");
    await dropped();
    const give = limiter.stats.tokensGivenBack - sentBefore;
    expect(give).toBeGreaterThan(0);
    // ioredis sent the exchange again and Redis ran it twice (nothing else was asked: the
    // heartbeats come a minute apart): what this test is about.
    await until(async () => (await scriptRuns()) - runsBefore >= 2);
    expect((await scriptRuns()) - runsBefore).toBe(2);
    // The second run was answered from the first: the tokens went back once, and the
    // shared bucket and what was admitted add up to at most its capacity (a rate of 0, no
    // credit, no outage, no fallback).
    expect((await field("given")) - givenBefore).toBe(give);
    expect(give).toBe(taken - admitted);
    const tokensField = await direct.hget(bucket, "tokens");
    const tokens = tokensField === null ? 100 : Number(tokensField);
    expect(tokens + admitted).toBeLessThanOrEqual(100);
    await limiter.close();
  });

  test("a heartbeat that joined anew and was sent again after a lost reply waits to be counted", {
    timeout: 30_000,
  }, async () => {
    // After a FLUSHALL the next heartbeat joins anew, so the process waits to be counted
    // again before it may fall back (the others' counts lack it). Its reply lost, ioredis
    // sent it again, and the second run answered "not joined": the process went on as
    // counted, with a count the others did not share.
    redis ??= await startRedis();
    const { hop, direct, resending, dropped } = await clientsOf(redis.url);
    // The process clock stops at the flush: a membership begun after it can never have
    // lasted long enough to be counted, however late this test's checks run on a busy
    // machine, while one that was never restarted stays counted.
    let stoppedAt: number | undefined;
    const limiter = new LeasedTokenBucket({
      client: fromIoredis(resending),
      prefix: "beat:",
      capacity: 100,
      refillPerSecond: 10,
      heartbeatTtlMs: 3000, // a beat a second; counted 1.25 s after an answer that joined
      clock: () => stoppedAt ?? performance.now(),
    });
    for (let i = 0; i < 400 && limiter.fallbackProcesses === undefined; i++) await pause(10);
    expect(limiter.fallbackProcesses).toBe(1);

    stoppedAt = performance.now();
    await direct.flushall();
    hop.arm(); // the next reply: the next heartbeat's (nothing else is asked)
    await dropped();
    // Sent again and answered by now; counted again only 1.25 s after that answer.
    const beaten = async () => (await direct.keys("beat:*")).some((k) => k.endsWith("#processes"));
    for (let i = 0; i < 100 && !(await beaten()); i++) await pause(5);
    expect(await beaten()).toBe(true);
    await pause(100);
    expect(limiter.fallbackProcesses).toBeUndefined();
    await limiter.close();
  });
});
