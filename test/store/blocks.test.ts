// The one block table of a store limiter (docs/semantics.md#blocks): a block set through a
// Redis limiter, or seen in its answer, is recorded in process at once, so every failure
// policy denies the key, and only unblock (here: reset) or its end lifts it.
import { describe, expect, test } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { type FailurePolicy, RedisTokenBucket } from "../../src/redis/index.js";
import { bucketReply } from "../support/reply-floats.js";
import { FakeRedis, flush } from "./fake-redis.js";

const down = new Error("connect ECONNREFUSED 127.0.0.1:1");

function setup(failure: FailurePolicy = "local") {
  const fake = new FakeRedis();
  let now = 0;
  const limiter = new RedisTokenBucket({
    client: fake,
    capacity: 5,
    refillPerSecond: 0,
    failure,
    clock: () => now,
    circuit: { failuresToOpen: 1_000_000 },
  });
  return { fake, limiter, set: (ms: number) => (now = ms) };
}

/** A consume the store fails to answer: the failure policy decides. */
async function failed(s: ReturnType<typeof setup>, key: string) {
  const pending = s.limiter.consume(key);
  await flush();
  s.fake.last().reject(down);
  return pending;
}

describe("a block set through a Redis limiter holds when Redis fails", () => {
  test("a block set while Redis is healthy is not lost at the first fallback: 'local' admits none", async () => {
    // Before: the 'local' fallback, built at the first failure, did not know the block;
    // 5 of 8 calls (its full capacity) were admitted.
    const s = setup("local");
    const blocking = s.limiter.block("mallory", 600_000);
    await flush();
    s.fake.last().resolve([600_000]);
    expect(await blocking).toBe(600_000);
    let admitted = 0;
    for (let i = 0; i < 8; i++) if ((await failed(s, "mallory")).allowed) admitted++;
    expect(admitted).toBe(0);
    // Other clients are decided by the fallback as before.
    expect((await failed(s, "alice")).allowed).toBe(true);
  });

  test.each<{ name: string; policy: FailurePolicy }>([
    { name: "open", policy: "open" },
    { name: "closed", policy: "closed" },
    {
      name: "a fallback limiter",
      policy: new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 0 })),
    },
  ])("every failure policy denies a blocked key: $name", async ({ policy }) => {
    const s = setup(policy);
    const blocking = s.limiter.block("mallory", 1000);
    await flush();
    s.fake.last().reject(down); // even a block the store did not take holds here
    await expect(blocking).rejects.toThrow(/RedisTokenBucket.block: Redis failed/);
    const d = await failed(s, "mallory");
    expect(d).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1000, source: "local" });
  });

  test("a block seen in Redis's answer is recorded too; reset or its end lifts it", async () => {
    const s = setup("local");
    const pending = s.limiter.consume("mallory");
    await flush();
    s.fake.last().resolve(bucketReply(2, 5, 30_000)); // blocked in Redis (another process set it)
    expect(await pending).toMatchObject({ allowed: false, source: "redis" });
    expect(s.limiter.blockedMs("mallory")).toBe(30_000);
    expect((await failed(s, "mallory")).allowed).toBe(false);
    s.set(30_000);
    expect(s.limiter.blockedMs("mallory")).toBe(0);
    expect((await failed(s, "mallory")).allowed).toBe(true);
    s.set(30_001);
    const again = s.limiter.consume("bob");
    await flush();
    s.fake.last().resolve(bucketReply(2, 5, 1000));
    await again;
    const resetting = s.limiter.reset("bob");
    await flush();
    s.fake.last().resolve([1]);
    await resetting;
    expect(s.limiter.blockedMs("bob")).toBe(0);
  });

  test("a healthy Redis that lost the block is only asked to peek, and the block set again", async () => {
    const s = setup("local");
    const blocking = s.limiter.block("mallory", 1000);
    await flush();
    s.fake.last().resolve([1000]);
    await blocking;
    // Redis lost the key (evicted): it answers as for a fresh bucket.
    const pending = s.limiter.consume("mallory");
    await flush();
    const call = s.fake.last();
    expect(call.args[3], "sent as a peek: nothing taken").toBe("0");
    call.resolve(bucketReply(1, 5, 0));
    expect(await pending).toMatchObject({ allowed: false, retryAfterMs: 1000, source: "local" });
    await flush();
    const reblock = s.fake.last();
    expect(reblock.args[2], "the time left").toBe("1000");
    expect(reblock.args[3], "as blockOnce").toBe("1");
    reblock.resolve([1000]);
  });
});
