import { afterEach, describe, expect, test, vi } from "vitest";
import { CATALOG } from "../../src/algorithms/catalog.js";
import { REDIS_TWINS } from "../../src/redis/catalog.js";
import type { RedisLike } from "../../src/redis/client.js";
import { RedisTokenBucket } from "../../src/redis/index.js";
import {
  checkEvictionPolicy,
  evictsLimiterKeys,
  policyOfReply,
} from "../../src/redis/maxmemory.js";
import { FakeRedis, flush } from "./fake-redis.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("circuit and failure options", () => {
  const base = { client: new FakeRedis(), capacity: 1, refillPerSecond: 1 };
  test.each([
    {
      name: "an unknown circuit option",
      circuit: { threshold: 3 },
      error: TypeError,
      message: /^RedisTokenBucket: circuit: unknown option "threshold"/,
    },
    {
      name: "failuresToOpen 0",
      circuit: { failuresToOpen: 0 },
      error: RangeError,
      message:
        /^RedisTokenBucket: circuit: failuresToOpen must be an integer from 1 to 2147483647, got 0$/,
    },
    {
      name: "a negative coolDownMs",
      circuit: { coolDownMs: -1 },
      error: RangeError,
      message: /^RedisTokenBucket: circuit: coolDownMs must be a finite number >= 0, got -1$/,
    },
    {
      name: "maxPendingCalls 1.5",
      circuit: { maxPendingCalls: 1.5 },
      error: RangeError,
      message: /^RedisTokenBucket: circuit: maxPendingCalls must be an integer/,
    },
    {
      name: "a clock that is not a function",
      circuit: { clock: 5 },
      error: TypeError,
      message:
        /^RedisTokenBucket: circuit: clock must be a function returning milliseconds, got 5$/,
    },
  ])("$name", ({ circuit, error, message }) => {
    expect(() => new RedisTokenBucket({ ...base, circuit: circuit as never })).toThrow(error);
    expect(() => new RedisTokenBucket({ ...base, circuit: circuit as never })).toThrow(message);
  });

  test.each(["allow", "deny"])("the pre-release name failure '%s' is refused", (failure) => {
    expect(() => new RedisTokenBucket({ ...base, failure: failure as never })).toThrow(
      new RangeError(
        `RedisTokenBucket: failure must be 'local', 'open', 'closed', 'throw' or a fallback limiter (consume, peek, reset), got "${failure}" (string)`,
      ),
    );
  });
});

describe("the local twin is the catalog's in-memory class", () => {
  test.each(CATALOG.map((d) => [d.id, d] as const))("%s", (id, descriptor) => {
    const Twin = REDIS_TWINS[id] as unknown as new (o: object) => { local: { Class: unknown } };
    const options =
      descriptor.measure.kind === "bucket"
        ? { capacity: 2, [descriptor.measure.rate]: 1 }
        : { limit: 2, windowMs: 1000 };
    expect(new Twin({ client: new FakeRedis(), ...options }).local.Class).toBe(descriptor.Class);
  });
});

describe("maxmemory-policy", () => {
  test.each([
    ["noeviction", false],
    ["allkeys-lru", true],
    ["allkeys-lfu", true],
    ["allkeys-random", true],
    ["volatile-lru", true],
    ["volatile-ttl", true],
    ["volatile-random", true],
  ] as const)("%s evicts limiter keys: %s", (policy, evicts) => {
    expect(evictsLimiterKeys(policy)).toBe(evicts);
  });

  test("reads the reply as an array pair, a map or a record", () => {
    expect(policyOfReply(["maxmemory-policy", "allkeys-lru"])).toBe("allkeys-lru");
    expect(policyOfReply(new Map([["maxmemory-policy", "noeviction"]]))).toBe("noeviction");
    expect(policyOfReply({ "maxmemory-policy": "volatile-lru" })).toBe("volatile-lru");
    expect(policyOfReply(["maxmemory-policy", Buffer.from("allkeys-lfu")])).toBe("allkeys-lfu");
    expect(policyOfReply([])).toBeUndefined();
    expect(policyOfReply("OK")).toBeUndefined();
  });

  const withPolicy = (reply: () => Promise<unknown>) => {
    const client = new FakeRedis() as RedisLike;
    const asked: (readonly string[])[] = [];
    client.command = (args) => {
      asked.push(args);
      return reply();
    };
    return { client, asked };
  };

  test("warns once per client when the policy would evict limiter keys", async () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    const { client, asked } = withPolicy(async () => ["maxmemory-policy", "allkeys-lru"]);
    const limiter = new RedisTokenBucket({ client, capacity: 1, refillPerSecond: 1 });
    void limiter.consume("a");
    void limiter.consume("b");
    await flush();
    expect(asked).toEqual([["CONFIG", "GET", "maxmemory-policy"]]);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toMatch(/maxmemory-policy is allkeys-lru/);
    expect(warn.mock.calls[0]![1]).toMatchObject({ code: "TOLLGATE_MAXMEMORY_POLICY" });
  });

  test.each([
    ["noeviction", async () => ["maxmemory-policy", "noeviction"]],
    ["a refused CONFIG", async () => Promise.reject(new Error("ERR unknown command 'CONFIG'"))],
    ["an empty reply (a renamed CONFIG)", async () => []],
  ] as const)("says nothing for %s", async (_name, reply) => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    const { client } = withPolicy(reply);
    checkEvictionPolicy(client);
    await flush();
    expect(warn).not.toHaveBeenCalled();
  });

  test("a command that throws synchronously is ignored", () => {
    const client = new FakeRedis() as RedisLike;
    client.command = () => {
      throw new Error("no");
    };
    expect(() => checkEvictionPolicy(client)).not.toThrow();
  });
});
