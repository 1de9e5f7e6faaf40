/**
 * Section 5 of `npm run bench`: Redis. Placeholder until bench/redis.bench.ts lands.
 * @module
 */
import type { RedisResults } from "./report.js";

/** Runs the Redis rows, or says why they were skipped. */
export async function runRedisSection(
  _quick: boolean,
  _progress: (text: string) => void,
): Promise<RedisResults | { skipped: string }> {
  return { skipped: "bench/redis.bench.ts is not in this tree yet" };
}
