import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  fromIoredis,
  fromNodeRedis,
  type RedisLike,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { uniquePrefix } from "../support/redis-clients.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";

// The process's own event loop blocked past timeoutMs while a call is out (a long
// synchronous task, a GC pause): Redis ran the call at once, inside its deadline, and took
// the units; its reply waits in the socket. When the loop wakes, Node runs expired timers
// before it reads sockets, so the call's timer must not win over a reply already there:
// the policy would answer a call Redis charged (a late charge by another road).

// Redis has TIMEOUT_MS * 3/4 to run each call (its deadline), ample on a loaded machine;
// the block outlasts the timeout.
const TIMEOUT_MS = 100;
const BLOCK_MS = 150;
const CALLS = 6;
const CAPACITY = 1e6;

function block(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: the event loop cannot run
  }
}

describe.skipIf(!canStartRedis())("a blocked event loop", () => {
  let server: PrivateRedis;
  const clients: { name: string; client: RedisLike; close: () => void }[] = [];
  beforeAll(async () => {
    server = await startRedis();
    const io = new Redis(server.url, { lazyConnect: true });
    io.on("error", () => {});
    await io.connect();
    clients.push({ name: "ioredis", client: fromIoredis(io), close: () => io.disconnect() });
    const nr = createClient({ url: server.url });
    nr.on("error", () => {});
    await nr.connect();
    clients.push({ name: "node-redis", client: fromNodeRedis(nr), close: () => nr.destroy() });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await server?.stop();
  });

  for (const name of ["ioredis", "node-redis"]) {
    test(`${name}: a reply already in the socket when the timer fires is Redis's decision`, async () => {
      const { client } = clients.find((c) => c.name === name)!;
      const prefix = uniquePrefix("lag");
      const limiter = new RedisTokenBucket({
        client,
        prefix,
        capacity: CAPACITY,
        refillPerSecond: 0,
        timeoutMs: TIMEOUT_MS,
        failure: "local",
      });
      // The script loaded and the offset to the server's clock measured, without the short timeout.
      const warm = new RedisTokenBucket({ client, prefix, capacity: CAPACITY, refillPerSecond: 0 });
      expect((await warm.consume("warm")).source).toBe("redis");
      let byRedis = 0;
      for (let i = 0; i < CALLS; i++) {
        const pending = limiter.consume("k");
        block(BLOCK_MS);
        if ((await pending).source === "redis") byRedis++;
      }
      const twin = new RedisTokenBucket({
        client,
        prefix,
        capacity: CAPACITY,
        refillPerSecond: 0,
        failure: "throw",
      });
      const held = CAPACITY - (await twin.peek("k", 0)).remaining;
      expect(held).toBe(byRedis);
      // ioredis writes the command at once, so Redis answers the calls inside their deadline
      // (before, the policy answered every one of them, and Redis held CALLS units);
      // node-redis writes on a later tick (after the block: past the deadline, nothing taken).
      if (name === "ioredis") expect(byRedis).toBeGreaterThan(0);
    });
  }
});
