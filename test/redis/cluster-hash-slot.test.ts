import { Buffer } from "node:buffer";
import fc from "fast-check";
import { Cluster, Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { fromIoredis, fromNodeRedis, type RedisKey, redisKey } from "../../src/redis/client.js";
import { HASH_SLOTS, hashSlot } from "../../src/redis/hash-slot.js";
import { masterOfSlot, useRedisCluster } from "../support/redis-cluster.js";
import { CLUSTER_ADAPTERS, type ClusterTestClient } from "../support/redis-cluster-clients.js";

describe("hashSlot", () => {
  // [key, slot]: the cluster spec's CRC16 check value and hash-tag rules.
  const steps: readonly (readonly [RedisKey, number])[] = [
    ["123456789", 0x31c3 % HASH_SLOTS], // CRC16/XMODEM check value 0x31C3
    ["", 0],
    ["foo", 12182],
    ["{user1000}.following", hashSlot("user1000")],
    ["{user1000}.followers", hashSlot("user1000")],
    ["foo{}{bar}", hashSlot("foo{}{bar}")], // an empty first tag: the whole key
    ["foo{{bar}}zap", hashSlot("{bar")], // the tag is "{bar"
    ["foo{bar}{zap}", hashSlot("bar")], // only the first tag counts
    ["{", hashSlot("{")],
    ["a{b", hashSlot("a{b")], // no closing brace: the whole key
    [Buffer.from("foo"), 12182],
    [Buffer.from("x{foo}y"), 12182],
    ["é{foo}", 12182], // a non-ASCII key's tag
  ];
  test.each(steps.map(([key, slot], i) => ({ i, key, slot })))("step $i", ({ key, slot }) => {
    expect(hashSlot(key)).toBe(slot);
  });

  test("a string and its UTF-8 bytes share a slot", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), (s) => {
        expect(hashSlot(s)).toBe(hashSlot(Buffer.from(s, "utf8")));
      }),
    );
  });
});

const cluster = useRedisCluster();

/** Keys worth asking the server about: tags, braces, binary bytes, lone surrogates, long keys. */
const keyArbitrary: fc.Arbitrary<RedisKey> = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: fc.constantFrom("{", "}", "a", "b", "é", "\0") }),
  fc.tuple(fc.string(), fc.string(), fc.string()).map(([a, b, c]) => `${a}{${b}}${c}`),
  fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
  fc
    .array(fc.constantFrom(0x7b, 0x7d, 0x00, 0xff, 0x80, 0x61), { maxLength: 12 })
    .map((bytes) => Buffer.from(bytes)),
  fc.string({ unit: "binary" }).map((s) => redisKey("tollgate:", s)),
  fc.string({ minLength: 200, maxLength: 400 }),
);

describe.skipIf(!cluster.available)("hashSlot against the server's CLUSTER KEYSLOT", () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis({ ...cluster.seed(), lazyConnect: true });
    await redis.connect();
  });
  afterAll(() => redis?.disconnect());

  test("3,000 generated keys (strings, tags, Buffers, lone surrogates) agree", async () => {
    const keys = fc.sample(keyArbitrary, 3000);
    const pipeline = redis.pipeline();
    for (const key of keys) pipeline.call("CLUSTER", "KEYSLOT", key);
    const replies = (await pipeline.exec()) ?? [];
    const mismatches = keys.flatMap((key, i) => {
      const [error, slot] = replies[i] ?? [new Error("no reply"), undefined];
      if (error) throw error;
      return slot === hashSlot(key) ? [] : [{ key, server: slot, ours: hashSlot(key) }];
    });
    expect(mismatches).toEqual([]);
  }, 30_000);

  test("20,000 sequential keys agree (most of the 16,384 slots)", async () => {
    const pipeline = redis.pipeline();
    const keys = Array.from({ length: 20_000 }, (_, i) => `tollgate:k${i}`);
    for (const key of keys) pipeline.call("CLUSTER", "KEYSLOT", key);
    const replies = (await pipeline.exec()) ?? [];
    expect(replies.map(([, slot]) => slot)).toEqual(keys.map(hashSlot));
    expect(new Set(keys.map(hashSlot)).size).toBeGreaterThan(11_000);
  }, 30_000);
});

describe.skipIf(!cluster.available)("nodeOf", () => {
  for (const adapter of CLUSTER_ADAPTERS) {
    test(`${adapter.name}: the master CLUSTER NODES names for the key's slot`, async () => {
      const c: ClusterTestClient = await adapter.connect(cluster.seed());
      try {
        const nodeOf = c.client.nodeOf;
        expect(nodeOf).toBeTypeOf("function");
        for (const key of ["a", "b", "c", "{tag}x", "\uD800", Buffer.from([0xff, 0x7b, 0x7d])]) {
          const master = await masterOfSlot(cluster.seed(), hashSlot(key));
          expect(nodeOf?.(key), String(key)).toBe(master.address);
        }
      } finally {
        await c.close();
      }
    });
  }

  test("an ioredis Cluster not yet connected answers undefined", () => {
    const unconnected = new Cluster([cluster.seed()], { lazyConnect: true });
    expect(fromIoredis(unconnected).nodeOf?.("k")).toBeUndefined();
    unconnected.disconnect();
  });

  test("a node-redis cluster not yet connected answers undefined", () => {
    const unconnected = createCluster({ rootNodes: [{ url: "redis://127.0.0.1:1" }] });
    expect(fromNodeRedis(unconnected).nodeOf?.("k")).toBeUndefined();
  });

  test("single-server clients have no nodeOf (one circuit per client)", () => {
    const io = new Redis({ lazyConnect: true });
    expect(fromIoredis(io).nodeOf).toBeUndefined();
    io.disconnect();
    expect(fromNodeRedis(createClient()).nodeOf).toBeUndefined();
    const fake = { evalsha: async () => 1, eval: async () => 1 };
    expect(fromIoredis(fake).nodeOf).toBeUndefined();
  });
});
