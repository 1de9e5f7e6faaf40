import { Buffer } from "node:buffer";
import { describe, hasMethods } from "../core/errors.js";
import { hashSlot } from "./hash-slot.js";

/**
 * A Redis key as sent to the server: a string (sent as UTF-8) or raw bytes. The
 * limiters pass a `Buffer` only for keys that UTF-8 cannot carry losslessly (lone
 * UTF-16 surrogates), so every distinct JavaScript key maps to distinct bytes.
 */
export type RedisKey = string | Buffer;

/**
 * The only thing the Redis limiters need from a client: run a Lua script by its SHA1 digest
 * (`EVALSHA`) or by its source (`EVAL`), resolving with the script's reply (integers as numbers,
 * bulk strings as strings or `Buffer`s, arrays as arrays).
 *
 * The method names are deliberately not those of any client library, so passing a raw ioredis or
 * node-redis client by mistake fails validation at once instead of sending malformed commands: wrap
 * it with {@link fromIoredis} or {@link fromNodeRedis}, or write the two methods for any other
 * client (Valkey GLIDE, a cluster client, a test double). A rejected promise is a store failure; a
 * `NOSCRIPT` rejection from `evalSha` (its message starting with `NOSCRIPT`) makes the limiter
 * retry with `evalScript`, which also loads the script into the server's cache.
 */
export interface RedisLike {
  /** `EVALSHA sha1 numkeys ...keys ...args`. */
  evalSha(sha1: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown>;
  /** `EVAL script numkeys ...keys ...args`. */
  evalScript(script: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown>;
  /**
   * Which server holds `key` now, as `host:port` (for a Redis Cluster: the master of the
   * key's hash slot in the client's slot table), or `undefined` for a single server or
   * while the client does not know yet (not connected). Optional; the failure handling
   * keeps one circuit per node it names, and one per client when it is absent or answers
   * `undefined`. Must be cheap (called once per call) and must not throw.
   */
  nodeOf?(key: RedisKey): string | undefined;
  /**
   * Optional: a plain command without keys (`["CONFIG", "GET", "maxmemory-policy"]`),
   * resolving with its reply. The limiters only use it to read the server's
   * `maxmemory-policy` once and warn when it would evict their keys; a rejection is
   * ignored. {@link fromIoredis} and {@link fromNodeRedis} implement it.
   */
  command?(args: readonly string[]): Promise<unknown>;
}

/** The part of an ioredis client (v5, v6) that {@link fromIoredis} calls. */
export interface IoredisClientLike {
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: RedisKey[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...keysAndArgs: RedisKey[]): Promise<unknown>;
  /** Any command by name (ioredis `call`); used for `CONFIG GET` when present. */
  call?(command: string, ...args: string[]): Promise<unknown>;
}

/** The part of a node-redis client (v4 and later) that {@link fromNodeRedis} calls. */
export interface NodeRedisClientLike {
  evalSha(sha1: string, options: { keys: RedisKey[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: RedisKey[]; arguments: string[] }): Promise<unknown>;
  /** Any command as an array (node-redis `sendCommand`); used for `CONFIG GET` when present. */
  sendCommand?(...args: never[]): Promise<unknown>;
}

/**
 * Which library a client object comes from, by its methods: ioredis clients and clusters
 * have `evalsha` (lowercase); node-redis clients, clusters, pools and sentinels have
 * `evalSha` and `EVALSHA`; an adapter made by this module has `evalSha` and `evalScript`.
 */
export function clientKind(client: unknown): "ioredis" | "node-redis" | "adapter" | undefined {
  if (hasMethods(client, "evalSha", "evalScript")) return "adapter";
  if (hasMethods(client, "evalSha", "EVALSHA")) return "node-redis";
  if (hasMethods(client, "evalsha", "eval")) return "ioredis";
  return undefined;
}

/** The message for a client that a wrapper cannot use: what it is, and what to use instead. */
function wrongClient(where: string, client: unknown, wanted: "ioredis" | "node-redis"): string {
  const kind = clientKind(client);
  if (kind === "node-redis") {
    return `${where}: this is a node-redis client (it has evalSha, not evalsha): wrap it with fromNodeRedis(client)`;
  }
  if (kind === "ioredis") {
    return `${where}: this is an ioredis client (it has evalsha, not evalSha): wrap it with fromIoredis(client)`;
  }
  if (kind === "adapter") {
    return `${where}: this is already a RedisLike adapter (evalSha, evalScript): pass it as the limiter's client as it is`;
  }
  const example =
    wanted === "ioredis"
      ? "new Redis(url) or new Cluster(nodes)"
      : "createClient({ url }) or createCluster(...)";
  const methods = wanted === "ioredis" ? "evalsha and eval" : "evalSha and eval";
  return `${where}: client must be ${wanted === "ioredis" ? "an" : "a"} ${wanted} client (${example}) with ${methods} methods, got ${describe(client)}`;
}

/**
 * Adapts an ioredis client (`new Redis(url)`, a `Cluster`, or anything with the same
 * `evalsha`/`eval` methods) to {@link RedisLike}. The client stays yours: connect,
 * configure and `quit()` it yourself.
 * @throws {TypeError} When `client` is not an ioredis client; a node-redis client (which
 *   would fail every call) is named as such, with the wrapper to use, `fromNodeRedis`.
 * @example
 * const limiter = new RedisTokenBucket({ client: fromIoredis(new Redis(url)), capacity: 10, refillPerSecond: 1 })
 */
export function fromIoredis(client: IoredisClientLike): RedisLike {
  if (!hasMethods(client, "evalsha", "eval")) {
    throw new TypeError(wrongClient("fromIoredis", client, "ioredis"));
  }
  const c = client as unknown as Record<string, unknown>;
  const adapter: RedisLike = {
    evalSha: (sha1, keys, args) => client.evalsha(sha1, keys.length, ...keys, ...args),
    evalScript: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
  };
  const call = client.call;
  if (typeof call === "function") {
    adapter.command = ([name, ...rest]) => call.call(client, name ?? "", ...rest);
  }
  // An ioredis Cluster: `isCluster` is true and `slots[slot]` lists the slot's nodes as
  // "host:port", its master first (refreshed on MOVED and on topology changes).
  if (c["isCluster"] === true) {
    adapter.nodeOf = (key) => {
      const slots = c["slots"];
      if (!Array.isArray(slots)) return undefined;
      const nodes: unknown = slots[hashSlot(key)];
      const master: unknown = Array.isArray(nodes) ? nodes[0] : undefined;
      return typeof master === "string" ? master : undefined;
    };
  }
  return adapter;
}

/**
 * Adapts a node-redis client (`createClient({ url })` from `redis` v4 or later,
 * connected, or a cluster client) to {@link RedisLike}. The client stays yours:
 * `connect()` and `close()` it yourself.
 * @throws {TypeError} When `client` is not a node-redis client; an ioredis client (which
 *   would fail every call) is named as such, with the wrapper to use, `fromIoredis`.
 */
export function fromNodeRedis(client: NodeRedisClientLike): RedisLike {
  if (!hasMethods(client, "evalSha", "eval") || hasMethods(client, "evalScript")) {
    throw new TypeError(wrongClient("fromNodeRedis", client, "node-redis"));
  }
  const c = client as unknown as Record<string, unknown>;
  const adapter: RedisLike = {
    evalSha: (sha1, keys, args) => client.evalSha(sha1, { keys: [...keys], arguments: [...args] }),
    evalScript: (script, keys, args) =>
      client.eval(script, { keys: [...keys], arguments: [...args] }),
  };
  const send = client.sendCommand as ((args: string[]) => Promise<unknown>) | undefined;
  // A cluster's sendCommand takes (firstKey, isReadonly, args): only a plain client's is used.
  if (typeof send === "function" && !("masters" in client)) {
    adapter.command = (args) => send.call(client, [...args]);
  }
  // A node-redis cluster (createCluster): `masters` lists the masters and `slots[slot]`
  // is the slot's shard, `{ master: { address: "host:port" }, replicas }` (rediscovered
  // on MOVED). A single client, a pool or a sentinel has no `masters` array.
  if (Array.isArray(c["masters"])) {
    adapter.nodeOf = (key) => {
      const slots = c["slots"];
      if (!Array.isArray(slots)) return undefined;
      const shard: unknown = slots[hashSlot(key)];
      const master =
        typeof shard === "object" && shard !== null
          ? (shard as { master?: { address?: unknown } }).master
          : undefined;
      const address = master?.address;
      return typeof address === "string" ? address : undefined;
    };
  }
  return adapter;
}

/**
 * The message for a `client` option that is not a {@link RedisLike}: a raw ioredis or
 * node-redis client is named, with its wrapper.
 */
export function notRedisLike(where: string, client: unknown): string {
  const kind = clientKind(client);
  const wrap =
    kind === "ioredis"
      ? "an ioredis client: wrap it with fromIoredis(client)"
      : kind === "node-redis"
        ? "a node-redis client: wrap it with fromNodeRedis(client)"
        : describe(client);
  return `${where}: client must be a RedisLike (wrap a client with fromIoredis or fromNodeRedis), got ${wrap}`;
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
    else bytes.push(...Buffer.from(ch)); // a surrogate pair: its UTF-8 is its WTF-8
  }
  return Buffer.from(bytes);
}
