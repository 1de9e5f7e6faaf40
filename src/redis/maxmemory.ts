import type { RedisLike } from "./client.js";

/** Clients whose server's policy was asked for (or cannot be asked), so each is asked once. */
const asked = new WeakSet<RedisLike>();

/**
 * True for a `maxmemory-policy` that may evict the limiters' keys: every `allkeys-*`
 * policy, and every `volatile-*` one (each limiter key has a TTL). An evicted key of a
 * limited client answers as fresh: the client is allowed again.
 */
export function evictsLimiterKeys(policy: string): boolean {
  return policy.startsWith("allkeys-") || policy.startsWith("volatile-");
}

/** The policy out of a `CONFIG GET maxmemory-policy` reply (an array pair or a map), if any. */
export function policyOfReply(reply: unknown): string | undefined {
  let value: unknown;
  if (Array.isArray(reply)) value = reply[1];
  else if (reply instanceof Map) value = reply.get("maxmemory-policy");
  else if (typeof reply === "object" && reply !== null) {
    value = (reply as Record<string, unknown>)["maxmemory-policy"];
  }
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return new TextDecoder().decode(value);
  return undefined;
}

/**
 * Asks the server behind `client`, once per client and only when it has `command`, for its
 * `maxmemory-policy`, and emits one process warning (`TOLLGATE_MAXMEMORY_POLICY`) when the policy
 * would evict limiter keys. Says nothing when the command is refused (managed services often rename
 * or deny `CONFIG`) or the reply is not understood. Never rejects and never delays a decision.
 */
export function checkEvictionPolicy(client: RedisLike): void {
  if (asked.has(client)) return;
  asked.add(client);
  if (typeof client.command !== "function") return;
  let reply: Promise<unknown>;
  try {
    reply = client.command(["CONFIG", "GET", "maxmemory-policy"]);
  } catch {
    return;
  }
  Promise.resolve(reply).then(
    (value) => {
      const policy = policyOfReply(value);
      if (policy === undefined || !evictsLimiterKeys(policy)) return;
      process.emitWarning(
        `the Redis server's maxmemory-policy is ${policy}: under memory pressure it may evict rate-limit keys, and an evicted key of a limited client answers as fresh (allowed). Use noeviction (docs/redis.md#memory-and-eviction).`,
        { type: "TollgateWarning", code: "TOLLGATE_MAXMEMORY_POLICY" },
      );
    },
    () => {},
  );
}
