/**
 * Section 5 of `npm run bench`: Redis, through bench/redis.bench.ts (`RedisTokenBucket.consume`
 * and a bare `PING` on one ioredis connection). The server is `REDIS_URL`, else a private
 * `redis-server` started for the run and stopped by its pid, else the rows are skipped and
 * the report says why.
 * @module
 */
import { runRedisBench } from "../redis.bench.js";
import { benchRedis } from "./redis-server.js";
import type { RedisResults } from "./report.js";

/** Runs the Redis rows, or says why they were skipped. */
export async function runRedisSection(
  quick: boolean,
  progress: (text: string) => void,
): Promise<RedisResults | { skipped: string }> {
  progress("finding a server");
  const available = await benchRedis();
  if (!available.ok) return { skipped: available.reason };
  try {
    progress(`measuring on ${available.redis.origin}`);
    const result = await runRedisBench(available.redis.url, { quick });
    return { origin: available.redis.origin, ...result };
  } finally {
    await available.redis.stop();
  }
}
