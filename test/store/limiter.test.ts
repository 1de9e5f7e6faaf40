import { afterEach, describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { metricsText } from "../../src/metrics/prometheus.js";
import { withMetrics } from "../../src/metrics/with-metrics.js";
import {
  type FailurePolicy,
  RateLimitStoreError,
  RedisTokenBucket,
  type StoreFailureEvent,
  type StoreRecoveryEvent,
  StoreTimeoutError,
  StoreUnavailableError,
} from "../../src/redis/index.js";
import { bucketReply } from "../support/reply-floats.js";
import { FakeRedis, flush } from "./fake-redis.js";

// The store-neutral limiter (src/store/limiter.ts) through RedisTokenBucket, on a fake
// client whose calls the tests settle by hand and a circuit clock they move by hand.

const down = new Error("connect ECONNREFUSED 127.0.0.1:1");

function setup(
  options: { failure?: FailurePolicy; failuresToOpen?: number; maxPendingCalls?: number } = {},
  fake = new FakeRedis(),
) {
  const clock = { now: 0 };
  const errors: StoreFailureEvent[] = [];
  const recoveries: StoreRecoveryEvent[] = [];
  const limiter = new RedisTokenBucket({
    client: fake,
    capacity: 10,
    refillPerSecond: 0,
    failure: options.failure ?? "open",
    circuit: {
      failuresToOpen: options.failuresToOpen ?? 5,
      coolDownMs: 1000,
      maxPendingCalls: options.maxPendingCalls ?? 1000,
      clock: () => clock.now,
    },
    onError: (event) => errors.push(event),
    onRecover: (event) => recoveries.push(event),
  });
  return { fake, clock, errors, recoveries, limiter };
}

/** Sends `n` calls and fails each in the store, in order; resolves with their decisions. */
async function failCalls(
  s: ReturnType<typeof setup>,
  n: number,
  key = "k",
): Promise<{ source: string }[]> {
  const decisions = [];
  for (let i = 0; i < n; i++) {
    const pending = s.limiter.consume(key);
    s.fake.last().reject(down);
    decisions.push(await pending);
  }
  return decisions;
}

describe("circuit breaker", () => {
  test("opens after five consecutive failures: onError once, then no call reaches the store", async () => {
    const s = setup();
    expect((await failCalls(s, 4)).map((d) => d.source)).toEqual(["open", "open", "open", "open"]);
    expect(s.errors).toEqual([]);
    await failCalls(s, 1);
    expect(s.errors).toHaveLength(1);
    expect(s.errors[0]).toMatchObject({ operation: "consume", key: "k", outcome: "open" });
    expect(s.errors[0]!.error.cause).toBe(down);
    expect(s.fake.calls).toHaveLength(5);
    for (let i = 0; i < 100; i++) {
      expect(await s.limiter.consume("k")).toMatchObject({ allowed: true, source: "open" });
    }
    expect(s.fake.calls).toHaveLength(5);
    expect(s.errors).toHaveLength(1);
    expect(s.limiter.circuits()).toEqual([
      {
        node: undefined,
        state: "open",
        consecutiveFailures: 5,
        pendingCalls: 0,
        failedCalls: 105,
        openedAtMs: 0,
      },
    ]);
  });

  test("after the cool-down one probe goes out; its answer closes the circuit, onRecover once", async () => {
    const s = setup();
    await failCalls(s, 5);
    s.clock.now = 999;
    await s.limiter.consume("k");
    expect(s.fake.calls).toHaveLength(5);
    s.clock.now = 1000;
    const probe = s.limiter.consume("k");
    expect(s.fake.calls).toHaveLength(6);
    expect(s.limiter.circuits()[0]!.state).toBe("half-open");
    // While the probe is out, everything else is answered by the policy.
    expect(await s.limiter.consume("k")).toMatchObject({ source: "open" });
    expect(s.fake.calls).toHaveLength(6);
    s.fake.last().resolve(bucketReply(1, 9));
    expect(await probe).toMatchObject({ allowed: true, remaining: 8, source: "redis" });
    expect(s.recoveries).toEqual([{ operation: "consume", failedCalls: 7, node: undefined }]);
    const next = s.limiter.consume("k");
    expect(s.fake.calls).toHaveLength(7);
    s.fake.last().resolve(bucketReply(1, 8));
    expect(await next).toMatchObject({ source: "redis" });
    expect(s.recoveries).toHaveLength(1);
    expect(s.errors).toHaveLength(1);
  });

  test("a failed probe re-opens silently for another cool-down; onError and onRecover alternate", async () => {
    const s = setup();
    await failCalls(s, 5);
    s.clock.now = 1000;
    await failCalls(s, 1); // the probe
    expect(s.limiter.circuits()[0]).toMatchObject({ state: "open", openedAtMs: 1000 });
    s.clock.now = 1999;
    await s.limiter.consume("k");
    expect(s.fake.calls).toHaveLength(6);
    s.clock.now = 2000;
    const probe = s.limiter.consume("k");
    s.fake.last().resolve(bucketReply(1, 9));
    await probe;
    expect(s.errors).toHaveLength(1);
    expect(s.recoveries).toHaveLength(1);
    // A second outage reports again.
    await failCalls(s, 5);
    expect(s.errors).toHaveLength(2);
  });

  test("an answer after the timeout is not an answer: the circuit stays open", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const fake = new FakeRedis();
      const errors: StoreFailureEvent[] = [];
      const limiter = new RedisTokenBucket({
        client: fake,
        capacity: 10,
        refillPerSecond: 0,
        timeoutMs: 50,
        failure: "closed",
        circuit: { failuresToOpen: 2, clock: () => 0 },
        onError: (event) => errors.push(event),
      });
      const a = limiter.consume("k");
      const b = limiter.consume("k");
      await vi.advanceTimersByTimeAsync(50);
      expect(await a).toMatchObject({ source: "closed" });
      expect(await b).toMatchObject({ source: "closed" });
      expect(errors).toHaveLength(1);
      expect(errors[0]!.error.timedOut).toBe(true);
      // The timed-out commands are still in the client's queue: pending until settled.
      expect(limiter.circuits()[0]).toMatchObject({ state: "open", pendingCalls: 2 });
      fake.calls[0]!.resolve(bucketReply(1, 9));
      fake.calls[1]!.reject(down);
      await flush();
      expect(limiter.circuits()[0]).toMatchObject({ state: "open", pendingCalls: 0 });
    } finally {
      vi.useRealTimers();
    }
  });

  describe("the call's timeout", () => {
    /** A limiter on a fake client, under 'throw', timing each call out after 250 ms. */
    function timed() {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const fake = new FakeRedis();
      const limiter = new RedisTokenBucket({
        client: fake,
        capacity: 10,
        refillPerSecond: 0,
        timeoutMs: 250,
        failure: "throw",
      });
      return { fake, limiter };
    }
    afterEach(() => {
      vi.useRealTimers();
    });

    test("rejects with a StoreTimeoutError cause once timeoutMs passes, not before", async () => {
      const { limiter } = timed();
      const outcome = limiter.consume("k").catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(249);
      expect(vi.getTimerCount()).toBe(1);
      await vi.advanceTimersByTimeAsync(1);
      const error = (await outcome) as RateLimitStoreError;
      expect(error).toBeInstanceOf(RateLimitStoreError);
      expect(error.cause).toBeInstanceOf(StoreTimeoutError);
      expect((error.cause as StoreTimeoutError).message).toBe("Redis did not answer within 250 ms");
      expect((error.cause as StoreTimeoutError).timeoutMs).toBe(250);
    });

    test("a reply read in the same turn as the expired timer wins over it", async () => {
      // After a blocked event loop, Node runs the expired timer before it reads the socket
      // where the reply already waits: the reply must still be the answer (units Redis
      // took are not answered again by the policy).
      const { fake, limiter } = timed();
      const pending = limiter.consume("k").catch((e: unknown) => e);
      vi.advanceTimersByTime(250); // the timer fires first
      fake.last().resolve(bucketReply(1, 10)); // then the socket is read, in the same turn
      expect(await pending).toMatchObject({ allowed: true, source: "redis" });
    });

    test("clears its timer when the answer comes first", async () => {
      const { fake, limiter } = timed();
      const pending = limiter.consume("k");
      fake.last().resolve(bucketReply(1, 10));
      expect(await pending).toMatchObject({ allowed: true, source: "redis" });
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  test("the pending cap answers by the policy at once, and sends again once a call settles", async () => {
    const s = setup({ maxPendingCalls: 3 });
    const pending = [s.limiter.consume("k"), s.limiter.consume("k"), s.limiter.consume("k")];
    expect(await s.limiter.consume("k")).toMatchObject({ allowed: true, source: "open" });
    expect(s.fake.calls).toHaveLength(3);
    expect(s.limiter.circuits()[0]).toMatchObject({ state: "closed", pendingCalls: 3 });
    s.fake.calls[0]!.resolve(bucketReply(1, 9));
    await pending[0];
    const next = s.limiter.consume("k");
    expect(s.fake.calls).toHaveLength(4);
    for (const call of s.fake.calls.slice(1)) call.resolve(bucketReply(1, 9));
    await Promise.all([...pending, next]);
    expect(s.errors).toEqual([]);
  });

  test("the pending cap under 'throw' rejects with StoreUnavailableError as the cause", async () => {
    const s = setup({ failure: "throw", maxPendingCalls: 1 });
    const first = s.limiter.consume("k");
    const error = await s.limiter.consume("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect((error as Error).message).toBe(
      "RedisTokenBucket.consume: 1 calls already pending (maxPendingCalls)",
    );
    expect((error as Error).cause).toBeInstanceOf(StoreUnavailableError);
    expect(((error as Error).cause as StoreUnavailableError).reason).toBe("pending-cap");
    s.fake.last().resolve(bucketReply(1, 9));
    await first;
  });

  test("one circuit per node: a failing node opens alone, the others keep answering", async () => {
    const fake = new FakeRedis((key) =>
      String(key).endsWith(":a") ? "10.0.0.1:7000" : "10.0.0.2:7001",
    );
    const s = setup({ failuresToOpen: 2 }, fake);
    await failCalls(s, 2, "a");
    expect(s.errors).toHaveLength(1);
    expect(s.errors[0]!.node).toBe("10.0.0.1:7000");
    const b = s.limiter.consume("b");
    expect(fake.calls).toHaveLength(3);
    fake.last().resolve(bucketReply(1, 9));
    expect(await b).toMatchObject({ source: "redis" });
    expect(await s.limiter.consume("a")).toMatchObject({ source: "open" });
    expect(fake.calls).toHaveLength(3);
    expect(s.limiter.circuits().map((c) => [c.node, c.state])).toEqual([
      ["10.0.0.1:7000", "open"],
      ["10.0.0.2:7001", "closed"],
    ]);
    expect(s.recoveries).toEqual([]);
  });

  test("a cluster kept a node-undefined circuit from before the slot table beside the nodes' ones", async () => {
    let slotsKnown = false;
    const fake = new FakeRedis((key) =>
      slotsKnown ? (String(key).endsWith(":a") ? "10.0.0.1:7000" : "10.0.0.2:7001") : undefined,
    );
    const s = setup({ failuresToOpen: 2 }, fake);
    // Before the slot table: the client's circuit, pending, then answered.
    const early = s.limiter.consume("a");
    expect(s.limiter.circuits().map((c) => [c.node, c.pendingCalls])).toEqual([[undefined, 1]]);
    slotsKnown = true;
    const late = s.limiter.consume("b");
    // A call still pending on the client's circuit keeps it listed.
    expect(s.limiter.circuits().map((c) => c.node)).toEqual([undefined, "10.0.0.2:7001"]);
    fake.calls[0]!.resolve(bucketReply(1, 9));
    fake.calls[1]!.resolve(bucketReply(1, 9));
    await Promise.all([early, late]);
    const third = s.limiter.consume("a");
    fake.last().resolve(bucketReply(1, 9));
    await third;
    expect(s.limiter.circuits().map((c) => [c.node, c.state])).toEqual([
      ["10.0.0.2:7001", "closed"],
      ["10.0.0.1:7000", "closed"],
    ]);
    expect(metricsText([withMetrics(s.limiter, { name: "cluster" })]).includes('node=""')).toBe(
      false,
    );
  });

  test("a failure on the client's circuit keeps it listed beside the nodes' circuits", async () => {
    let slotsKnown = false;
    const fake = new FakeRedis(() => (slotsKnown ? "10.0.0.1:7000" : undefined));
    const s = setup({ failuresToOpen: 1 }, fake);
    await failCalls(s, 1, "a"); // before the slot table: opens the client's circuit
    slotsKnown = true;
    const b = s.limiter.consume("b");
    fake.last().resolve(bucketReply(1, 9));
    await b;
    expect(s.limiter.circuits().map((c) => [c.node, c.state])).toEqual([
      [undefined, "open"],
      ["10.0.0.1:7000", "closed"],
    ]);
  });

  test("a client whose nodeOf answers undefined has one circuit", async () => {
    const s = setup({ failuresToOpen: 1 }, new FakeRedis(() => undefined));
    await failCalls(s, 1, "a");
    expect(await s.limiter.consume("b")).toMatchObject({ source: "open" });
    expect(s.limiter.circuits()).toHaveLength(1);
  });

  test("reset goes through the circuit: an open one rejects at once", async () => {
    const s = setup({ failuresToOpen: 1 });
    await failCalls(s, 1);
    const error = await s.limiter.reset("k").catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      "RedisTokenBucket.reset: circuit open after 1 consecutive failures",
    );
    expect(s.fake.calls).toHaveLength(1);
  });
});

describe("each policy on an open circuit", () => {
  const cases: {
    name: string;
    failure: () => FailurePolicy;
    want: object[];
  }[] = [
    {
      name: "local",
      failure: () => "local",
      want: [
        { allowed: true, remaining: 9, source: "local" },
        { allowed: true, remaining: 8, source: "local" },
      ],
    },
    {
      name: "open",
      failure: () => "open",
      want: [
        { allowed: true, remaining: 9, source: "open" },
        { allowed: true, remaining: 9, source: "open" },
      ],
    },
    {
      name: "closed",
      failure: () => "closed",
      want: [
        { allowed: false, remaining: 0, retryAfterMs: 1000, source: "closed" },
        { allowed: false, remaining: 0, retryAfterMs: 1000, source: "closed" },
      ],
    },
    {
      name: "a fallback limiter",
      failure: () => new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 0 })),
      want: [
        { allowed: true, remaining: 2, limit: 3, source: "local" },
        { allowed: true, remaining: 1, limit: 3, source: "local" },
      ],
    },
  ];
  test.each(cases)("$name", async ({ failure, want }) => {
    const s = setup({ failure: failure(), failuresToOpen: 1 });
    const first = s.limiter.consume("k");
    s.fake.last().reject(down);
    expect(await first).toMatchObject(want[0]!);
    expect(await s.limiter.consume("k")).toMatchObject(want[1]!);
    expect(s.fake.calls).toHaveLength(1);
    expect(s.errors.map((e) => e.outcome)).toEqual([want[0]!["source" as never]]);
  });

  test("throw: the opening call rejects with the store's error, later ones with the open circuit", async () => {
    const s = setup({ failure: "throw", failuresToOpen: 1 });
    const first = s.limiter.consume("k");
    s.fake.last().reject(down);
    const e1 = await first.catch((e: unknown) => e);
    expect((e1 as Error).message).toBe(
      "RedisTokenBucket.consume: Redis failed: connect ECONNREFUSED 127.0.0.1:1",
    );
    const e2 = await s.limiter.consume("k").catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(RateLimitStoreError);
    expect(((e2 as Error).cause as StoreUnavailableError).reason).toBe("circuit-open");
    expect(s.errors).toEqual([expect.objectContaining({ outcome: "throw", error: e1 })]);
  });
});

describe("the default policy, 'local'", () => {
  test("is the default, and limits each process alone with the same algorithm: never unlimited", async () => {
    const fake = new FakeRedis();
    const limiter = new RedisTokenBucket({
      client: fake,
      capacity: 2,
      refillPerSecond: 0,
      circuit: { failuresToOpen: 1, clock: () => 0 },
    });
    expect(limiter.failure).toBe("local");
    const first = limiter.consume("k");
    fake.last().reject(down);
    expect(await first).toMatchObject({ allowed: true, remaining: 1, source: "local" });
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, source: "local" });
    expect(await limiter.peek("other")).toMatchObject({ allowed: true, remaining: 1 });
    // reset forgets the local state too (the store's reset itself fails: circuit open).
    await limiter.reset("k").catch(() => {});
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, remaining: 1 });
  });

  test("a key Redis said was empty stays denied when Redis then refuses writes (OOM)", async () => {
    let now = 0;
    const fake = new FakeRedis();
    const limiter = new RedisTokenBucket({
      client: fake,
      capacity: 5,
      refillPerSecond: 0.01,
      clock: () => now,
      circuit: { failuresToOpen: 1, clock: () => now },
    });
    const drained = limiter.consume("k");
    fake.last().resolve(bucketReply(0, 0)); // denied: the shared bucket is empty, 100 s per token
    expect(await drained).toMatchObject({ allowed: false, source: "redis" });
    const oom = new Error("OOM command not allowed when used memory > 'maxmemory'.");
    const refused = limiter.consume("k");
    fake.last().reject(oom);
    // Before: the local bucket of 5, fresh, admitted it.
    expect(await refused).toMatchObject({ allowed: false, remaining: 0, source: "local" });
    expect((await limiter.consume("k")).retryAfterMs).toBe(100_000);
    now = 60_000;
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 40_000 });
    // Another key was never seen empty: the local limiter decides it as usual.
    expect(await limiter.consume("other")).toMatchObject({ allowed: true, source: "local" });
    // Once the store said the key may pass, the local limiter decides it again.
    now = 100_000;
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, source: "local" });
  });

  test("uses the limiter's explicit clock", async () => {
    let now = 0;
    const fake = new FakeRedis();
    const limiter = new RedisTokenBucket({
      client: fake,
      capacity: 1,
      refillPerSecond: 1,
      clock: () => now,
      circuit: { failuresToOpen: 1, clock: () => 0 },
    });
    const first = limiter.consume("k");
    fake.last().reject(down);
    expect(await first).toMatchObject({ allowed: true, source: "local" });
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    now = 1000;
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, source: "local" });
  });

  test("a key longer than the local bound is folded, not thrown on", async () => {
    const fake = new FakeRedis();
    const limiter = new RedisTokenBucket({
      client: fake,
      capacity: 1,
      refillPerSecond: 0,
      circuit: { failuresToOpen: 1, clock: () => 0 },
    });
    const long = "x".repeat(100_000);
    const first = limiter.consume(long);
    fake.last().reject(down);
    expect(await first).toMatchObject({ allowed: true, source: "local" });
    expect(await limiter.consume(long)).toMatchObject({ allowed: false, source: "local" });
    expect(await limiter.consume(`${long}y`)).toMatchObject({ allowed: true, source: "local" });
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("circuits by node", () => {
  test("a nodeOf that names a node per key keeps at most MAX_NODE_CIRCUITS circuits", async () => {
    const { MAX_NODE_CIRCUITS } = await import("../../src/store/limiter.js");
    const fake = new FakeRedis((key) => String(key));
    const s = setup({}, fake);
    for (let i = 0; i < MAX_NODE_CIRCUITS + 10; i++) void s.limiter.consume(`k${i}`);
    expect(s.limiter.circuits()).toHaveLength(MAX_NODE_CIRCUITS + 1);
    for (const call of fake.calls) call.resolve(bucketReply(1, 10));
    await flush();
  });
});
