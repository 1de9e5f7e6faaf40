import type { Server } from "node:net";
import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import {
  fromIoredis,
  RedisFixedWindow,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";
import { replyDropper } from "../support/reply-dropper.js";

// ioredis sends again, on its next connection, every command whose reply the last one
// lost (`autoResendUnfulfilledCommands`, on by default). A refund whose reply was lost
// after it ran ran again within its deadline and gave back again: a refund of 10 gave back
// 20. Each refund now keeps its answer until its deadline, and a second run answers it.

interface Refunding {
  consume(key: string, cost?: number): Promise<{ remaining: number }>;
  charge(key: string, cost?: number): Promise<object>;
  refund(key: string | object, cost?: number): Promise<number>;
}

describe.skipIf(!canStartRedis())("a refund ioredis sends again after a lost reply", () => {
  let redis: PrivateRedis | undefined;
  const clients: Redis[] = [];
  let proxy: Server | undefined;
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    proxy?.close();
    await redis?.stop();
  });

  test("gives back once, with or without a receipt", { timeout: 60_000 }, async () => {
    redis = await startRedis();
    const port = Number(new URL(redis.url).port);
    const hop = await replyDropper(port);
    proxy = hop.server;
    // Back at once: the refund runs again well within its deadline.
    const resending = new Redis(hop.port, "127.0.0.1", { retryStrategy: () => 5 });
    resending.on("error", () => {});
    clients.push(resending);
    const common = { client: fromIoredis(resending), timeoutMs: 10_000 };
    const limiters: [string, (prefix: string) => Refunding, boolean][] = [
      [
        "token bucket",
        (p) => new RedisTokenBucket({ ...common, prefix: p, capacity: 100, refillPerSecond: 0 }),
        true,
      ],
      [
        "sliding window counter",
        (p) =>
          new RedisSlidingWindowCounter({ ...common, prefix: p, limit: 100, windowMs: 600_000 }),
        true,
      ],
      [
        "sliding window log",
        (p) => new RedisSlidingWindowLog({ ...common, prefix: p, limit: 100, windowMs: 600_000 }),
        true,
      ],
      [
        "fixed window",
        (p) => new RedisFixedWindow({ ...common, prefix: p, limit: 100, windowMs: 600_000 }),
        false,
      ],
    ];
    for (const [name, make, withoutReceipt] of limiters) {
      const limiter = make(`resent-refund:${name.replace(/ /g, "-")}:`);
      // The scripts are cached (a lost NOSCRIPT reply changes nothing) and the offset known.
      await limiter.consume("warm");
      const warm = await limiter.charge("warm");
      await limiter.refund(warm);
      if (withoutReceipt) await limiter.refund("warm");

      await limiter.consume("k", 60);
      if (withoutReceipt) {
        hop.arm(); // the refund's reply is lost: ioredis sends it again once back
        expect(await limiter.refund("k", 10), name).toBe(10);
        expect((await limiter.consume("k", 0)).remaining, name).toBe(50);
      }
      const receipt = await limiter.charge("k", 10);
      hop.arm();
      expect(await limiter.refund(receipt), name).toBe(10);
      expect((await limiter.consume("k", 0)).remaining, name).toBe(withoutReceipt ? 50 : 40);
    }
  });
});
