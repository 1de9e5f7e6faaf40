import type { Server } from "node:net";
import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import { fromIoredis, RedisTokenBucket } from "../../src/redis/index.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";
import { replyDropper } from "../support/reply-dropper.js";

// ioredis sends again, on its next connection, every command whose reply the last one
// lost (`autoResendUnfulfilledCommands`, on by default), however long the reconnection
// takes. A reset carried no deadline: reported failed (its timeout), it ran again once
// the client was back, and deleted what other processes had used meanwhile.

describe.skipIf(!canStartRedis())("a reset ioredis sends again after a lost reply", () => {
  let redis: PrivateRedis | undefined;
  const clients: Redis[] = [];
  let proxy: Server | undefined;
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    proxy?.close();
    await redis?.stop();
  });

  test("a reset sent again past its deadline deletes nothing", { timeout: 30_000 }, async () => {
    redis = await startRedis();
    const port = Number(new URL(redis.url).port);
    const hop = await replyDropper(port);
    proxy = hop.server;
    // Back only after 1 s: the reset's deadline (within its 200 ms timeout) is long past.
    const resending = new Redis(hop.port, "127.0.0.1", { retryStrategy: () => 1000 });
    resending.on("error", () => {});
    const direct = new Redis(port, "127.0.0.1");
    clients.push(resending, direct);
    const options = { prefix: "resent-reset:", capacity: 3, refillPerSecond: 0, timeoutMs: 200 };
    const a = new RedisTokenBucket({ ...options, client: fromIoredis(resending) });
    const b = new RedisTokenBucket({ ...options, client: fromIoredis(direct) });
    // The scripts are cached (a NOSCRIPT reply lost would be another story) and the clock
    // offset is known.
    await a.consume("warm");
    await a.reset("warm");

    hop.arm(); // the reset's reply is lost: ioredis sends it again once it is back
    await expect(a.reset("k")).rejects.toThrow(/within 200 ms/);
    // Another process uses the key meanwhile.
    for (let i = 0; i < 3; i++) expect((await b.consume("k")).allowed).toBe(true);
    expect((await b.consume("k")).allowed).toBe(false);
    // Back: the reset went out again before this PING (one connection, in order).
    expect(await resending.ping()).toBe("PONG");
    // It ran past its deadline: what the other process used stays used.
    expect((await b.consume("k")).allowed).toBe(false);
  });
});
