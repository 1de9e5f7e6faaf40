import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { type AlgorithmDescriptor, CATALOG } from "../../src/algorithms/catalog.js";
import { REDIS_TWINS, type RedisTwinClass } from "../../src/redis/catalog.js";
import * as redis from "../../src/redis/index.js";
import { fingerprint } from "../../src/redis/keyspace.js";
import { RedisLimiter } from "../../src/redis/limiter.js";
import { REDIS_OPTIONS } from "../../src/redis/options.js";

// Construction never calls the client.
const client: redis.RedisLike = {
  evalSha: () => Promise.reject(new Error("not called")),
  evalScript: () => Promise.reject(new Error("not called")),
};
const ROWS: readonly AlgorithmDescriptor[] = CATALOG;

/** The twin of `d`, from the map keyed by catalog id. */
const twinOf = (d: AlgorithmDescriptor) =>
  (REDIS_TWINS as Readonly<Record<string, RedisTwinClass>>)[d.id];

/**
 * The state options of `d` (all but `clock`), in the descriptor's order: 10 each, 5 for an
 * optional one (`initialTokens`, `initialLevel`), so that it is not its default.
 */
const stateOf = (d: AlgorithmDescriptor) =>
  Object.fromEntries(
    d.options
      .filter((n) => n !== "clock")
      .map((n) => [n, (d.cli.optional ?? []).includes(n) ? 5 : 10]),
  );

/** A twin of `d` built with `extra` options; its constructor is public. */
const makeTwin = (d: AlgorithmDescriptor, extra: Record<string, unknown> = {}) => {
  const Twin = twinOf(d) as unknown as new (options: object) => RedisLimiter;
  return new Twin({ client, ...stateOf(d), ...extra });
};

describe("tollgate/redis has a twin of every core algorithm", () => {
  test("the map is keyed by exactly the catalog's ids", () => {
    expect(Object.keys(REDIS_TWINS).sort()).toEqual(CATALOG.map((d) => d.id).sort());
  });

  test.each(ROWS)("$id: its twin is $redis, exported by tollgate/redis", (d) => {
    const twin = twinOf(d);
    expect(twin?.name).toBe(d.redis);
    expect((redis as Record<string, unknown>)[d.redis]).toBe(twin);
    expect(makeTwin(d)).toBeInstanceOf(RedisLimiter);
  });

  test("every limiter class tollgate/redis exports is some algorithm's twin", () => {
    const twins = new Set<unknown>(Object.values(REDIS_TWINS));
    const limiters = Object.entries(redis)
      .filter(
        ([, value]) =>
          typeof value === "function" &&
          value !== RedisLimiter &&
          value.prototype instanceof RedisLimiter,
      )
      .map(([name, value]) => (twins.has(value) ? undefined : name));
    expect(limiters.filter((name) => name !== undefined)).toEqual([]);
  });

  test.each(ROWS)("$id: the twin takes the core options (but clock) and the Redis ones", (d) => {
    let message = "";
    try {
      makeTwin(d, { notAnOption: 1 });
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      message = (error as Error).message;
    }
    const known = /; known options: (.*)$/.exec(message)?.[1]?.split(", ");
    expect(known).toEqual([...d.options.filter((n) => n !== "clock"), ...REDIS_OPTIONS]);
  });

  test.each(ROWS)("$id: the twin's keyspace is the fingerprint of the catalog id", (d) => {
    const state = stateOf(d);
    expect(makeTwin(d).keyspace).toBe(fingerprint({ algorithm: d.id, state, clock: "server" }));
  });

  test.each([
    {
      name: "initialTokens equal to capacity",
      Twin: redis.RedisTokenBucket,
      initial: { initialTokens: 10 },
    },
    { name: "initialLevel 0", Twin: redis.RedisLeakyBucket, initial: { initialLevel: 0 } },
  ])("$name is the default's state: the same keyspace", ({ Twin, initial }) => {
    const Class = Twin as unknown as new (options: object) => RedisLimiter;
    const rate = Twin === redis.RedisTokenBucket ? { refillPerSecond: 1 } : { leakPerSecond: 1 };
    const plain = new Class({ client, capacity: 10, ...rate });
    expect(new Class({ client, capacity: 10, ...rate, ...initial }).keyspace).toBe(plain.keyspace);
    const other = Twin === redis.RedisTokenBucket ? { initialTokens: 9 } : { initialLevel: 1 };
    expect(new Class({ client, capacity: 10, ...rate, ...other }).keyspace).not.toBe(
      plain.keyspace,
    );
  });

  test("each twin has its own short default prefix", () => {
    const prefixes = ROWS.map((d) => makeTwin(d).prefix);
    expect(new Set(prefixes).size).toBe(CATALOG.length);
    ROWS.forEach((d, i) => {
      expect(prefixes[i]).toMatch(/^tollgate:[a-z]+:$/);
      expect(prefixes[i]).not.toBe(`tollgate:${d.id}:`);
    });
  });

  test("no twin file imports the map (a bundle of one twin must leave the others out)", () => {
    const dir = join(import.meta.dirname, "..", "..", "src", "redis");
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts") && f !== "catalog.ts")) {
      const text = readFileSync(join(dir, file), "utf8");
      expect(text, file).not.toMatch(/from\s+"\.\/catalog\.js"/);
      expect(text, file).not.toMatch(/import\s+\{[^}]*\}\s+from\s+"\.\.\/catalog\.js"/);
    }
  });
});
