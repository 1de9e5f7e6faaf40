import { createHash } from "node:crypto";
import type { RedisKey, RedisLike } from "./client.js";

/**
 * A Lua script with its SHA1 digest (hex), the name `EVALSHA` knows it by; computed
 * once with `node:crypto`, the same digest `SCRIPT LOAD` returns.
 */
export class Script {
  /** The SHA1 of `source`, 40 lowercase hex digits. */
  readonly sha1: string;

  constructor(
    /** A short name for messages, such as `token-bucket`. */
    readonly name: string,
    /** The Lua source. */
    readonly source: string,
  ) {
    this.sha1 = createHash("sha1").update(source, "utf8").digest("hex");
  }
}

/** True for the error Redis answers `EVALSHA` with when the script is not cached. */
export function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return message.startsWith("NOSCRIPT");
}

/**
 * Runs `script` by digest, falling back to its source once when the server's script cache lacks it
 * (after `SCRIPT FLUSH`, a restart or a failover); `EVAL` caches it again. Rejects with the
 * client's error. Untimed: the caller times the call (`StoreLimiter` counts it in flight until the
 * client settles it; the lease store has its scheduler's timer).
 */
export async function runScript(
  client: RedisLike,
  script: Script,
  keys: readonly RedisKey[],
  args: readonly string[],
): Promise<unknown> {
  try {
    return await client.evalSha(script.sha1, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return await client.evalScript(script.source, keys, args);
  }
}
