import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  fromIoredis,
  fromNodeRedis,
  type RedisDecision,
  type RedisLike,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { HEALTHY_TIMEOUT_MS, uniquePrefix } from "../support/redis-clients.js";
import { canStartRedis, type PrivateRedis, startRedis } from "../support/redis-server.js";

// A stalled server (SIGSTOP) with calls running, through ioredis and node-redis at their
// defaults (offline queue on, no command timeout): each command waits in the socket, the
// limiter answers by its failure policy after timeoutMs, and Redis runs the command when it
// is continued. The deadline each call carries must make those late runs write nothing:
// the units the server holds equal the units of the decisions Redis answered, exactly.
// The stall is a few times timeoutMs (the effect of a 5 s stall at the default 1 s: every
// queued command runs past its deadline); STALL_MS and STALL_TIMEOUT_MS override them for a measurement.

const STALL_MS = Number(process.env["STALL_MS"] ?? 600);
const TIMEOUT_MS = Number(process.env["STALL_TIMEOUT_MS"] ?? 100);
const EVERY_MS = 2;
const CAPACITY = 1e9;

interface Connection {
  readonly name: string;
  readonly client: RedisLike;
  command(...args: string[]): Promise<unknown>;
  close(): void;
}

async function connectIoredis(url: string): Promise<Connection> {
  const redis = new Redis(url, { lazyConnect: true });
  redis.on("error", () => {});
  await redis.connect();
  return {
    name: "ioredis",
    client: fromIoredis(redis),
    command: (name, ...args) => redis.call(name, ...args),
    close: () => redis.disconnect(),
  };
}

async function connectNodeRedis(url: string): Promise<Connection> {
  const redis = createClient({ url });
  redis.on("error", () => {});
  await redis.connect();
  return {
    name: "node-redis",
    client: fromNodeRedis(redis),
    command: (...args) => redis.sendCommand(args),
    close: () => redis.destroy(),
  };
}

/**
 * Units the server holds as taken for `key` of `limiter` (refill 0: capacity - tokens), read
 * through a twin limiter (same client, prefix and options, so the same key) whose circuit the
 * stall did not open. After the stall every late command has run: the connection answers in
 * order.
 */
async function unitsHeld(limiter: RedisTokenBucket, key: string): Promise<number> {
  const twin = new RedisTokenBucket({
    client: limiter.client,
    prefix: limiter.prefix,
    capacity: CAPACITY,
    refillPerSecond: 0,
    failure: "throw",
  });
  expect(twin.keyspace).toBe(limiter.keyspace);
  const d = await twin.peek(key, 0);
  expect(d.source).toBe("redis");
  return CAPACITY - d.remaining;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!canStartRedis())("a stalled Redis charges nothing late", () => {
  let server: PrivateRedis;
  const connections: Connection[] = [];
  beforeAll(async () => {
    server = await startRedis();
    connections.push(await connectIoredis(server.url), await connectNodeRedis(server.url));
  });
  afterAll(async () => {
    for (const c of connections) c.close();
    await server?.stop();
  });

  /**
   * Runs calls every EVERY_MS for the whole stall (and a little before and after), then
   * compares the units the server holds with those of the decisions sourced from Redis.
   */
  async function stall(limiter: RedisTokenBucket, key: string, warm?: RedisTokenBucket) {
    // The warm-up call (a sample of the server's clock for the client) goes through a twin
    // with a timeout load cannot trip: through the limiter's own short one, a busy machine
    // left it to the policy ('closed'), and the warm-up is not what the test measures.
    if (warm) expect((await warm.consume(key)).source).toBe("redis");
    const calls: Promise<RedisDecision>[] = [];
    // The server stops with no call in flight: one stopped after running a script and before
    // its reply went out holds a unit its client then answers by the policy, which no
    // deadline can undo (docs/redis.md#the-circuit-breaker); this test is about the
    // commands run late. (Stopped at any instant, it failed once in a clean-clone CI run:
    // one unit held beyond the calls Redis answered.)
    let paused = false;
    let stall: Promise<void> | undefined;
    const resume = () => {
      if (!paused) return;
      paused = false;
      process.kill(server.pid, "SIGCONT");
    };
    try {
      const start = Date.now();
      while (Date.now() - start < STALL_MS + 40) {
        if (stall === undefined && Date.now() - start >= 20) {
          await Promise.all(calls);
          process.kill(server.pid, "SIGSTOP");
          paused = true;
          stall = sleep(STALL_MS).then(resume);
        }
        calls.push(limiter.consume(key));
        await sleep(EVERY_MS);
      }
      await stall;
    } finally {
      resume();
    }
    const decisions = await Promise.all(calls);
    const answeredByRedis = decisions.filter((d) => d.source === "redis").length + (warm ? 1 : 0);
    const answeredByPolicy = decisions.filter((d) => d.source !== "redis").length;
    const held = await unitsHeld(limiter, key);
    return { answeredByRedis, answeredByPolicy, held, late: held - answeredByRedis };
  }

  for (const name of ["ioredis", "node-redis"]) {
    test(`${name}: calls the policy answered during the stall take no units afterwards`, async ({
      annotate,
    }) => {
      const c = connections.find((x) => x.name === name)!;
      const options = {
        client: c.client,
        prefix: uniquePrefix("stall"),
        capacity: CAPACITY,
        refillPerSecond: 0,
        failure: "closed" as const,
      };
      const limiter = new RedisTokenBucket({ ...options, timeoutMs: TIMEOUT_MS });
      const warm = new RedisTokenBucket({ ...options, timeoutMs: HEALTHY_TIMEOUT_MS });
      const r = await stall(limiter, "k", warm);
      await annotate(`${name}, ${STALL_MS} ms stall: ${JSON.stringify(r)}`); // shown when it fails
      expect(r.answeredByPolicy).toBeGreaterThan(10);
      expect(r.late).toBe(0);
    });

    test(`${name}: a client's first call in a stall (no offset yet) takes no units afterwards`, async () => {
      const c = connections.find((x) => x.name === name)!;
      // A fresh adapter on the same connection has no offset to the server's clock yet.
      const fresh: RedisLike = {
        evalSha: (sha, keys, args) => c.client.evalSha(sha, keys, args),
        evalScript: (script, keys, args) => c.client.evalScript(script, keys, args),
      };
      const limiter = new RedisTokenBucket({
        client: fresh,
        prefix: uniquePrefix("stall-first"),
        capacity: CAPACITY,
        refillPerSecond: 0,
        timeoutMs: TIMEOUT_MS,
        failure: "open",
      });
      process.kill(server.pid, "SIGSTOP");
      let first: RedisDecision;
      try {
        first = await limiter.consume("k");
        await sleep(2 * TIMEOUT_MS);
      } finally {
        process.kill(server.pid, "SIGCONT");
      }
      expect(first.source).toBe("open");
      expect(await unitsHeld(limiter, "k")).toBe(0);
    });
  }
});
