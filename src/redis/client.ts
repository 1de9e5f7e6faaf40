import { Buffer } from "node:buffer";

/**
 * A Redis key as sent to the server: a string (sent as UTF-8) or raw bytes. The
 * limiters pass a `Buffer` only for keys that UTF-8 cannot carry losslessly (lone
 * UTF-16 surrogates), so every distinct JavaScript key maps to distinct bytes.
 */
export type RedisKey = string | Buffer;

/**
 * The only thing the Redis limiters need from a client: run a Lua script by its SHA1
 * digest (`EVALSHA`) or by its source (`EVAL`), resolving with the script's reply
 * (integers as numbers, bulk strings as strings or `Buffer`s, arrays as arrays).
 *
 * The method names are deliberately not those of any client library, so passing a
 * raw ioredis or node-redis client by mistake fails validation at once instead of
 * sending malformed commands: wrap it with {@link fromIoredis} or {@link fromNodeRedis},
 * or write the two methods for any other client (Valkey GLIDE, a cluster client,
 * a test double). A rejected promise is a store failure; a `NOSCRIPT` rejection from
 * `evalSha` (its message starting with `NOSCRIPT`) makes the limiter retry with
 * `evalScript`, which also loads the script into the server's cache.
 */
export interface RedisLike {
  /** `EVALSHA sha1 numkeys ...keys ...args`. */
  evalSha(sha1: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown>;
  /** `EVAL script numkeys ...keys ...args`. */
  evalScript(script: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown>;
}

/** The part of an ioredis client (v5, v6) that {@link fromIoredis} calls. */
export interface IoredisClientLike {
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: RedisKey[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...keysAndArgs: RedisKey[]): Promise<unknown>;
}

/** The part of a node-redis client (v4 and later) that {@link fromNodeRedis} calls. */
export interface NodeRedisClientLike {
  evalSha(sha1: string, options: { keys: RedisKey[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: RedisKey[]; arguments: string[] }): Promise<unknown>;
}

/**
 * Adapts an ioredis client (`new Redis(url)`, a `Cluster`, or anything with the same
 * `evalsha`/`eval` methods) to {@link RedisLike}. The client stays yours: connect,
 * configure and `quit()` it yourself.
 * @example
 * const limiter = new RedisTokenBucket({ client: fromIoredis(new Redis(url)), capacity: 10, refillPerSecond: 1 })
 */
export function fromIoredis(client: IoredisClientLike): RedisLike {
  return {
    evalSha: (sha1, keys, args) => client.evalsha(sha1, keys.length, ...keys, ...args),
    evalScript: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
  };
}

/**
 * Adapts a node-redis client (`createClient({ url })` from `redis` v4 or later,
 * connected, or a cluster client) to {@link RedisLike}. The client stays yours:
 * `connect()` and `close()` it yourself.
 */
export function fromNodeRedis(client: NodeRedisClientLike): RedisLike {
  return {
    evalSha: (sha1, keys, args) => client.evalSha(sha1, { keys: [...keys], arguments: [...args] }),
    evalScript: (script, keys, args) =>
      client.eval(script, { keys: [...keys], arguments: [...args] }),
  };
}

// A code unit of a lone surrogate: a high one not followed by a low one, or a low one
// not preceded by a high one. UTF-8 would replace each by U+FFFD, merging keys.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * `prefix + key` as the bytes Redis stores: the string itself (UTF-8) when it is
 * well-formed, else its WTF-8 encoding (lone surrogates as their 3-byte form), which
 * equals UTF-8 on well-formed text and keeps every distinct string distinct.
 */
export function redisKey(prefix: string, key: string): RedisKey {
  const full = prefix + key;
  if (!LONE_SURROGATE.test(full)) return full;
  const bytes: number[] = [];
  for (const ch of full) {
    // for..of yields whole code points, and lone surrogates as themselves.
    const cp = ch.codePointAt(0) as number;
    if (cp < 0x80) bytes.push(cp);
    else if (cp < 0x800) bytes.push(0xc0 | (cp >> 6), 0x80 | (cp & 63));
    else if (cp < 0x10000) bytes.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    else
      bytes.push(
        0xf0 | (cp >> 18),
        0x80 | ((cp >> 12) & 63),
        0x80 | ((cp >> 6) & 63),
        0x80 | (cp & 63),
      );
  }
  return Buffer.from(bytes);
}
