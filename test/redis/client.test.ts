import { Buffer } from "node:buffer";
import { describe, expect, test } from "vitest";
import { fromIoredis, fromNodeRedis, redisKey } from "../../src/redis/client.js";
import { ADAPTERS } from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";
import { describeAdapterContract, describeStepTablesInMemory } from "./contract.js";

const redis = useRedis();

describeStepTablesInMemory();
for (const adapter of ADAPTERS) describeAdapterContract(adapter, redis);

describe("adapters", () => {
  test("fromIoredis sends EVALSHA/EVAL with numkeys, keys, then args", async () => {
    const sent: unknown[][] = [];
    const fake = {
      evalsha: async (...args: unknown[]) => sent.push(["evalsha", ...args]),
      eval: async (...args: unknown[]) => sent.push(["eval", ...args]),
    };
    const client = fromIoredis(fake);
    await client.evalSha("abc", ["k1", "k2"], ["1", "2"]);
    await client.evalScript("return 1", ["k"], []);
    expect(sent).toEqual([
      ["evalsha", "abc", 2, "k1", "k2", "1", "2"],
      ["eval", "return 1", 1, "k"],
    ]);
  });

  test("fromNodeRedis sends keys and arguments as options", async () => {
    const sent: unknown[][] = [];
    const fake = {
      evalSha: async (...args: unknown[]) => sent.push(["evalSha", ...args]),
      eval: async (...args: unknown[]) => sent.push(["eval", ...args]),
    };
    const client = fromNodeRedis(fake);
    await client.evalSha("abc", ["k1"], ["1"]);
    await client.evalScript("return 1", [], ["x"]);
    expect(sent).toEqual([
      ["evalSha", "abc", { keys: ["k1"], arguments: ["1"] }],
      ["eval", "return 1", { keys: [], arguments: ["x"] }],
    ]);
  });
});

describe("redisKey", () => {
  test.each([
    { name: "plain text stays a string", prefix: "p:", key: "user:42", expected: "p:user:42" },
    { name: "well-formed astral text stays a string", prefix: "", key: "😀", expected: "😀" },
  ])("$name", ({ prefix, key, expected }) => {
    expect(redisKey(prefix, key)).toBe(expected);
  });

  test.each([
    { name: "a lone high surrogate", key: "\uD800", bytes: [0x70, 0xed, 0xa0, 0x80] },
    { name: "a lone low surrogate", key: "\uDC00", bytes: [0x70, 0xed, 0xb0, 0x80] },
    {
      name: "a lone surrogate beside text",
      key: "é\uD83D",
      bytes: [0x70, 0xc3, 0xa9, 0xed, 0xa0, 0xbd],
    },
  ])("$name becomes WTF-8 bytes, distinct from U+FFFD", ({ key, bytes }) => {
    const k = redisKey("p", key);
    expect(Buffer.isBuffer(k)).toBe(true);
    expect([...(k as Buffer)]).toEqual(bytes);
    expect((k as Buffer).equals(Buffer.from(`p\uFFFD`))).toBe(false);
  });

  test("WTF-8 equals UTF-8 on the well-formed part", () => {
    const k = redisKey("pré:😀", "\uDFFF") as Buffer;
    expect(k.subarray(0, -3).equals(Buffer.from("pré:😀", "utf8"))).toBe(true);
  });
});
