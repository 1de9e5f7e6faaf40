import { createHash } from "node:crypto";
import { StoreTimeoutError } from "../store/errors.js";
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
 * Runs `script` by digest, falling back to its source once when the server's script
 * cache lacks it (after `SCRIPT FLUSH`, a restart or a failover); `EVAL` caches it
 * again. Rejects with the client's error, or, when `timeoutMs` is given, a
 * {@link StoreTimeoutError} after it (the command itself may still run on the server).
 * The limiters pass no timeout: `StoreLimiter` times their calls, and counts each one in
 * flight until the client settles it.
 */
export function runScript(
  client: RedisLike,
  script: Script,
  keys: readonly RedisKey[],
  args: readonly string[],
  timeoutMs?: number,
): Promise<unknown> {
  const call = (async () => {
    try {
      return await client.evalSha(script.sha1, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return await client.evalScript(script.source, keys, args);
    }
  })();
  if (timeoutMs === undefined) return call;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    // The rejection waits one turn (setImmediate), so that a reply already in the socket
    // when a blocked event loop wakes (timers run before sockets are read) still wins.
    timer = setTimeout(() => {
      setImmediate(() => reject(new StoreTimeoutError(timeoutMs)));
    }, timeoutMs);
    // A pending limiter call must not hold the process open on its own.
    if (typeof timer === "object" && typeof timer.unref === "function") timer.unref();
  });
  return Promise.race([call, timeout]).finally(() => clearTimeout(timer));
}
