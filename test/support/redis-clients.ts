import { Redis } from "ioredis";
import { createClient } from "redis";
import { fromIoredis, fromNodeRedis, type RedisLike } from "../../src/redis/client.js";
import type { RedisLimiter } from "../../src/redis/limiter.js";

/** A connected test client: the adapter under test plus raw commands for inspection. */
export interface TestClient {
  /** The adapter the limiters use. */
  readonly client: RedisLike;
  /** Any Redis command, for inspecting state (`PTTL`, `SCRIPT FLUSH`, …). */
  command(...args: string[]): Promise<unknown>;
  close(): Promise<void>;
}

/** One client library with its adapter. */
export interface Adapter {
  readonly name: string;
  connect(url: string): Promise<TestClient>;
}

/** ioredis through {@link fromIoredis}. */
/**
 * A store timeout for tests that check arithmetic, not timeouts: a healthy Redis on a busy
 * 2-core machine can take well over the 1 s default to answer, and a late answer sends the
 * call to the failure policy (`source: 'local'`), which such a test does not model.
 */
export const HEALTHY_TIMEOUT_MS = 600_000;

export const ioredisAdapter: Adapter = {
  name: "ioredis",
  async connect(url) {
    const redis = new Redis(url, { lazyConnect: true });
    await redis.connect();
    return {
      client: fromIoredis(redis),
      command: (name, ...args) => redis.call(name, ...args),
      close: async () => {
        redis.disconnect();
      },
    };
  },
};

/** node-redis through {@link fromNodeRedis}. */
export const nodeRedisAdapter: Adapter = {
  name: "node-redis",
  async connect(url) {
    const redis = createClient({ url });
    redis.on("error", () => {});
    await redis.connect();
    return {
      client: fromNodeRedis(redis),
      command: (...args) => redis.sendCommand(args),
      close: async () => {
        redis.destroy();
      },
    };
  },
};

/** Both adapters: every contract test runs once per entry. */
export const ADAPTERS: readonly Adapter[] = [ioredisAdapter, nodeRedisAdapter];

/** The Redis key a limiter stores `key` under: `<prefix><keyspace>:<key>`. */
export function keyOf(limiter: RedisLimiter, key: string): string {
  return `${limiter.prefix}${limiter.keyspace}:${key}`;
}

let counter = 0;
/** A prefix no other test uses, so tests can share one server without flushing it. */
export function uniquePrefix(name = "t"): string {
  counter++;
  return `tollgate-test:${process.pid}:${Date.now().toString(36)}:${name}:${counter}:`;
}

/**
 * Deletes every key this test process created ({@link uniquePrefix}), so a shared
 * `REDIS_URL` server keeps no test state (some keys, such as a rate of 0, live long).
 * Runs inside Redis so binary keys are matched byte for byte.
 */
export async function deleteTestKeys(c: TestClient): Promise<void> {
  await c.command(
    "EVAL",
    "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end",
    "0",
    `tollgate-test:${process.pid}:*`,
  );
}
