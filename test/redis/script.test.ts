import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import type { RedisLike } from "../../src/redis/client.js";
import { RESET_SCRIPT } from "../../src/redis/limiter.js";
import { FIXED_WINDOW_SCRIPT } from "../../src/redis/lua/fixed-window.js";
import { SLIDING_WINDOW_COUNTER_SCRIPT } from "../../src/redis/lua/sliding-window-counter.js";
import { SLIDING_WINDOW_LOG_SCRIPT } from "../../src/redis/lua/sliding-window-log.js";
import { TOKEN_BUCKET_SCRIPT } from "../../src/redis/lua/token-bucket.js";
import { isNoScript, runScript, Script } from "../../src/redis/script.js";
import { ioredisAdapter, type TestClient } from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";

const SCRIPTS = [
  TOKEN_BUCKET_SCRIPT,
  FIXED_WINDOW_SCRIPT,
  SLIDING_WINDOW_LOG_SCRIPT,
  SLIDING_WINDOW_COUNTER_SCRIPT,
  RESET_SCRIPT,
].map((script) => ({ name: script.name, script }));

describe("Script", () => {
  test("sha1 is the SHA1 of the source in lowercase hex (known vector)", () => {
    // printf 'return 1' | sha1sum
    expect(new Script("one", "return 1").sha1).toBe("e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  });

  test("sha1 hashes the UTF-8 bytes", () => {
    // printf 'return "é"' | sha1sum
    expect(new Script("e", 'return "é"').sha1).toBe("3cf71d276cb9832cebc56895d377282f6a326756");
  });

  test.each(SCRIPTS)("$name: one distinct 40-hex digest", ({ script }) => {
    expect(script.sha1).toMatch(/^[0-9a-f]{40}$/);
    expect(SCRIPTS.filter((s) => s.script.sha1 === script.sha1)).toHaveLength(1);
  });
});

const redis = useRedis();
describe.skipIf(!redis.available)("Script against Redis", () => {
  let c: TestClient;
  beforeAll(async () => {
    c = await ioredisAdapter.connect(redis.url());
  });
  afterAll(async () => {
    await c?.close();
  });

  test.each(SCRIPTS)(
    "$name: SCRIPT LOAD returns the digest computed with node:crypto",
    async ({ script }) => {
      expect(await c.command("SCRIPT", "LOAD", script.source)).toBe(script.sha1);
    },
  );
});

describe("isNoScript", () => {
  test.each([
    {
      name: "a NOSCRIPT reply",
      error: new Error("NOSCRIPT No matching script. Please use EVAL."),
      expected: true,
    },
    { name: "another reply", error: new Error("ERR unknown command"), expected: false },
    { name: "a mention later in the text", error: new Error("ERR NOSCRIPT"), expected: false },
    { name: "a non-Error", error: "NOSCRIPT as a string", expected: true },
  ])("$name", ({ error, expected }) => {
    expect(isNoScript(error)).toBe(expected);
  });
});

describe("runScript", () => {
  const script = new Script("t", "return 1");

  function fake(evalSha: RedisLike["evalSha"], evalScript: RedisLike["evalScript"]): RedisLike {
    return { evalSha, evalScript };
  }

  test("answers by digest when the server has the script", async () => {
    const evalScript = vi.fn(async () => "unused");
    const client = fake(async (sha, keys, args) => [sha, keys, args], evalScript);
    expect(await runScript(client, script, ["k"], ["a"])).toEqual([script.sha1, ["k"], ["a"]]);
    expect(evalScript).not.toHaveBeenCalled();
  });

  test("falls back to the source on NOSCRIPT", async () => {
    const client = fake(
      async () => {
        throw new Error("NOSCRIPT No matching script. Please use EVAL.");
      },
      async (source, keys, args) => [source, keys, args],
    );
    expect(await runScript(client, script, ["k"], ["a"])).toEqual(["return 1", ["k"], ["a"]]);
  });

  test("passes any other error through without retrying", async () => {
    const evalScript = vi.fn(async () => "unused");
    const failure = new Error("ECONNRESET");
    const client = fake(async () => {
      throw failure;
    }, evalScript);
    await expect(runScript(client, script, [], [])).rejects.toBe(failure);
    expect(evalScript).not.toHaveBeenCalled();
  });
});
