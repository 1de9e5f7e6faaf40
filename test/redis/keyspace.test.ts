import { Cluster, Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  fromIoredis,
  fromNodeRedis,
  RedisFixedWindow,
  RedisLeakyBucket,
  type RedisLike,
  RedisSlidingWindowCounter,
  RedisSlidingWindowLog,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { canonicalText, fingerprint, fnv1a32 } from "../../src/redis/keyspace.js";
import {
  ADAPTERS,
  deleteTestKeys,
  keyOf,
  type TestClient,
  uniquePrefix,
} from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

// Construction never calls the client.
const offline: RedisLike = {
  evalSha: () => Promise.reject(new Error("not called")),
  evalScript: () => Promise.reject(new Error("not called")),
};

describe("keyspace fingerprint", () => {
  test.each([
    { text: "", hash: "811c9dc5" },
    { text: "a", hash: "e40c292c" },
    { text: "foobar", hash: "bf9cf968" },
  ])("FNV-1a 32 of $text is $hash (published test vectors)", ({ text, hash }) => {
    expect(fnv1a32(text)).toBe(hash);
  });

  test("the canonical text names the layout version, the algorithm, its options and the clock", () => {
    expect(
      canonicalText({
        algorithm: "token-bucket",
        state: { capacity: 10, refillPerSecond: 5 },
        clock: "server",
      }),
    ).toBe("tollgate/2 token-bucket capacity=10 refillPerSecond=5 clock=server");
  });

  test("the sliding log's layout is version 3 (a hash of chunks, the meta may carry a block; 1 was a list)", () => {
    expect(
      canonicalText({
        algorithm: "sliding-window-log",
        state: { limit: 100, windowMs: 60_000 },
        clock: "server",
      }),
    ).toBe("tollgate/3 sliding-window-log limit=100 windowMs=60000 clock=server");
  });

  // Golden values: if one of these changes, every deployed limiter's keys change with it
  // (state is lost at the upgrade), which must be a deliberate, announced change.
  test.each([
    {
      name: "RedisTokenBucket capacity 10, refillPerSecond 5 (layout 2; 1 was cc272ad2)",
      make: () => new RedisTokenBucket({ client: offline, capacity: 10, refillPerSecond: 5 }),
      key: "tollgate:tb:36879efb:user:42",
    },
    {
      name: "RedisFixedWindow limit 100, windowMs 60000 (layout 2; 1 was 487bd52a)",
      make: () => new RedisFixedWindow({ client: offline, limit: 100, windowMs: 60_000 }),
      key: "tollgate:fw:f1215f4d:user:42",
    },
    {
      name: "RedisSlidingWindowLog limit 100, windowMs 60000 (layout 3; 2 was f8b59f8a, 1 c1d3c9ad)",
      make: () => new RedisSlidingWindowLog({ client: offline, limit: 100, windowMs: 60_000 }),
      key: "tollgate:swl:3c45e9b3:user:42",
    },
  ])("$name stores user:42 under $key", ({ make, key }) => {
    expect(keyOf(make(), "user:42")).toBe(key);
  });

  test.each([
    {
      name: "RedisTokenBucket",
      make: (o: object) =>
        new RedisTokenBucket({ client: offline, capacity: 5, refillPerSecond: 1, ...o }),
      prefix: "tollgate:tb:",
      variants: [{ capacity: 6 }, { refillPerSecond: 2 }, { refillPerSecond: 0 }],
    },
    {
      name: "RedisLeakyBucket",
      make: (o: object) =>
        new RedisLeakyBucket({ client: offline, capacity: 5, leakPerSecond: 1, ...o }),
      prefix: "tollgate:lb:",
      variants: [{ capacity: 6 }, { leakPerSecond: 2 }],
    },
    {
      name: "RedisFixedWindow",
      make: (o: object) =>
        new RedisFixedWindow({ client: offline, limit: 5, windowMs: 1000, ...o }),
      prefix: "tollgate:fw:",
      variants: [{ limit: 6 }, { windowMs: 1001 }, { limit: 0.1 + 0.2 }],
    },
    {
      name: "RedisSlidingWindowLog",
      make: (o: object) =>
        new RedisSlidingWindowLog({ client: offline, limit: 5, windowMs: 1000, ...o }),
      prefix: "tollgate:swl:",
      variants: [{ limit: 6 }, { windowMs: 2000 }],
    },
    {
      name: "RedisSlidingWindowCounter",
      make: (o: object) =>
        new RedisSlidingWindowCounter({ client: offline, limit: 5, windowMs: 1000, ...o }),
      prefix: "tollgate:swc:",
      variants: [{ limit: 6 }, { windowMs: 2000 }],
    },
  ])(
    "$name: equal options give equal keyspaces, different ones differ",
    ({ make, prefix, variants }) => {
      const base = make({});
      expect(base.prefix).toBe(prefix);
      expect(base.keyspace).toMatch(/^[0-9a-f]{8}$/);
      // Options that do not define the state leave the keyspace alone.
      expect(make({ timeoutMs: 50, failure: "closed", maxTtlMs: 5000 }).keyspace).toBe(
        base.keyspace,
      );
      const seen = new Set([base.keyspace]);
      for (const variant of [...variants, { clock: () => 0 }]) {
        const other = make(variant).keyspace;
        expect(seen.has(other), JSON.stringify(variant)).toBe(false);
        seen.add(other);
      }
      // A custom prefix keeps the fingerprint: limiters under one prefix still stay apart.
      expect(make({ prefix: "app:" }).keyspace).toBe(base.keyspace);
      expect(make({ keyspace: "login" }).keyspace).toBe("login");
    },
  );

  test("the five algorithms with the same numbers have five keyspaces", () => {
    const spaces = [
      fingerprint({
        algorithm: "token-bucket",
        state: { capacity: 5, refillPerSecond: 1 },
        clock: "server",
      }),
      fingerprint({
        algorithm: "leaky-bucket",
        state: { capacity: 5, leakPerSecond: 1 },
        clock: "server",
      }),
      new RedisFixedWindow({ client: offline, limit: 5, windowMs: 1 }).keyspace,
      new RedisSlidingWindowLog({ client: offline, limit: 5, windowMs: 1 }).keyspace,
      new RedisSlidingWindowCounter({ client: offline, limit: 5, windowMs: 1 }).keyspace,
    ];
    expect(new Set(spaces).size).toBe(5);
  });

  test.each([
    { name: "a number", keyspace: 5, error: TypeError, message: "got 5" },
    { name: "null", keyspace: null, error: TypeError, message: "got null" },
    { name: "the empty string", keyspace: "", error: RangeError, message: 'got ""' },
  ])("keyspace $name is refused", ({ keyspace, error, message }) => {
    const make = () =>
      new RedisTokenBucket({
        client: offline,
        capacity: 1,
        refillPerSecond: 1,
        keyspace: keyspace as never,
      });
    expect(make).toThrow(error);
    expect(make).toThrow(`RedisTokenBucket: keyspace must be a non-empty string, ${message}`);
  });
});

const redis = useRedis();

describe.skipIf(!redis.available)("keyspaces on a real Redis", () => {
  let c: TestClient;
  beforeAll(async () => {
    c = await ADAPTERS[0]!.connect(redis.url());
  });
  afterAll(async () => {
    if (c) await deleteTestKeys(c);
    await c?.close();
  });

  test("regression: two Redis limiters with different capacities under the default prefix do not share keys", async () => {
    // A login limiter (5 per 15 minutes) and an API limiter (100 per hour), both keyed
    // by IP: before keyspaces, both read and wrote tollgate:token-bucket:<ip>, so the API
    // traffic spent the login budget and the login limiter's state capped the API at 5.
    // (At 100 per second the API bucket was full again, and its key gone, 10 ms after its
    // charge: a loaded machine read EXISTS after that.)
    const ip = `198.51.100.${process.pid % 250}`;
    const login = new RedisTokenBucket({ client: c.client, capacity: 5, refillPerSecond: 5 / 900 });
    const api = new RedisTokenBucket({
      client: c.client,
      capacity: 100,
      refillPerSecond: 100 / 3600,
    });
    try {
      expect((await login.consume(ip, 5)).remaining).toBe(0);
      expect((await login.consume(ip)).allowed).toBe(false);
      const d = await api.consume(ip);
      expect(d.allowed).toBe(true);
      expect(d.remaining).toBe(99);
      expect(keyOf(login, ip)).not.toBe(keyOf(api, ip));
      expect(await c.command("EXISTS", keyOf(login, ip), keyOf(api, ip))).toBe(2);
    } finally {
      await login.reset(ip);
      await api.reset(ip);
    }
  });

  test("limiters with the same algorithm and options share state, across clients of both libraries", async () => {
    const other = await ADAPTERS[1]!.connect(redis.url());
    try {
      const prefix = uniquePrefix();
      const a = new RedisFixedWindow({ client: c.client, prefix, limit: 3, windowMs: 60_000 });
      const b = new RedisFixedWindow({ client: other.client, prefix, limit: 3, windowMs: 60_000 });
      expect(a.keyspace).toBe(b.keyspace);
      await a.consume("k", 2);
      const d = await b.consume("k");
      expect(d.allowed).toBe(true);
      expect(d.remaining).toBe(0);
      expect((await a.consume("k")).allowed).toBe(false);
    } finally {
      await other.close();
    }
  });

  test("the key is <prefix><keyspace>:<key>, one key per caller's key", async () => {
    const prefix = uniquePrefix();
    const bucket = new RedisTokenBucket({
      client: c.client,
      prefix,
      capacity: 2,
      refillPerSecond: 0,
    });
    await bucket.consume("user:1");
    expect(await c.command("KEYS", `${prefix}*`)).toEqual([`${prefix}${bucket.keyspace}:user:1`]);
  });

  test("two algorithms under one custom prefix and one key do not collide (no WRONGTYPE)", async () => {
    const prefix = uniquePrefix();
    const bucket = new RedisTokenBucket({
      client: c.client,
      prefix,
      capacity: 2,
      refillPerSecond: 0,
    });
    const log = new RedisSlidingWindowLog({ client: c.client, prefix, limit: 2, windowMs: 60_000 });
    expect((await bucket.consume("k")).remaining).toBe(1);
    expect((await log.consume("k")).remaining).toBe(1);
  });

  test("a pinned keyspace keeps the state across a change of capacity, capped at the new one", async () => {
    const prefix = uniquePrefix();
    const before = new RedisTokenBucket({
      client: c.client,
      prefix,
      keyspace: "api",
      capacity: 10,
      refillPerSecond: 0,
    });
    expect((await before.consume("k", 4)).remaining).toBe(6);
    const raised = new RedisTokenBucket({
      client: c.client,
      prefix,
      keyspace: "api",
      capacity: 20,
      refillPerSecond: 0,
    });
    expect((await raised.peek("k", 0)).remaining).toBe(6); // the stored tokens carry over
    const lowered = new RedisTokenBucket({
      client: c.client,
      prefix,
      keyspace: "api",
      capacity: 3,
      refillPerSecond: 0,
    });
    expect((await lowered.peek("k", 0)).remaining).toBe(3); // capped at the new capacity
    expect(keyOf(before, "k")).toBe(`${prefix}api:k`);
  });

  test("regression: a key of the earlier hash layout is a store failure, never misread", async () => {
    const old = `tollgate-test:${process.pid}:legacy-${Date.now()}`;
    // The earlier layout was prefix + key with the prefix 'tollgate:token-bucket:', and a hash.
    const bucket = new RedisTokenBucket({
      client: c.client,
      prefix: "tollgate:",
      keyspace: "token-bucket",
      capacity: 5,
      refillPerSecond: 0,
      failure: "throw",
    });
    try {
      await c.command("HSET", `tollgate:token-bucket:${old}`, "tokens", "2", "anchor", "0");
      await c.command("PEXPIRE", `tollgate:token-bucket:${old}`, "60000");
      await expect(bucket.peek(old, 0)).rejects.toThrow(/Redis failed: .*WRONGTYPE/);
    } finally {
      await bucket.reset(old);
    }
  });
});

describe("the Redis wrappers recognise the other library's client", () => {
  test("regression: fromIoredis given a node-redis client names fromNodeRedis", () => {
    const client = createClient({ url: "redis://127.0.0.1:1" });
    expect(() => fromIoredis(client as never)).toThrow(TypeError);
    expect(() => fromIoredis(client as never)).toThrow(
      "fromIoredis: this is a node-redis client (it has evalSha, not evalsha): wrap it with fromNodeRedis(client)",
    );
  });

  test("regression: fromNodeRedis given an ioredis client names fromIoredis", () => {
    const client = new Redis({ lazyConnect: true, port: 1 });
    try {
      expect(() => fromNodeRedis(client as never)).toThrow(TypeError);
      expect(() => fromNodeRedis(client as never)).toThrow(
        "fromNodeRedis: this is an ioredis client (it has evalsha, not evalSha): wrap it with fromIoredis(client)",
      );
    } finally {
      client.disconnect();
    }
  });

  test("cluster clients of both libraries: accepted by their own wrapper, named by the other", () => {
    const ioCluster = new Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true });
    const nodeCluster = createCluster({ rootNodes: [{ url: "redis://127.0.0.1:1" }] });
    try {
      expect(() => fromIoredis(ioCluster)).not.toThrow();
      expect(() => fromNodeRedis(nodeCluster as never)).not.toThrow();
      expect(() => fromIoredis(nodeCluster as never)).toThrow("wrap it with fromNodeRedis(client)");
      expect(() => fromNodeRedis(ioCluster as never)).toThrow("wrap it with fromIoredis(client)");
    } finally {
      ioCluster.disconnect();
    }
  });

  test("a raw client given as a limiter's client names its wrapper", () => {
    const io = new Redis({ lazyConnect: true, port: 1 });
    const node = createClient({ url: "redis://127.0.0.1:1" });
    try {
      expect(
        () => new RedisTokenBucket({ client: io as never, capacity: 1, refillPerSecond: 1 }),
      ).toThrow("got an ioredis client: wrap it with fromIoredis(client)");
      expect(
        () => new RedisFixedWindow({ client: node as never, limit: 1, windowMs: 1000 }),
      ).toThrow("got a node-redis client: wrap it with fromNodeRedis(client)");
    } finally {
      io.disconnect();
    }
  });
});
