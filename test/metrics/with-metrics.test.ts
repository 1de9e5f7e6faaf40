// withMetrics: what each call counts (a step table), the near-limit share, the bounded
// top-N of near-limit keys, and what a KeyedLimiter and a store tell through the snapshot.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { rateLimit } from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { NearLimitKeys } from "../../src/metrics/near-limit-keys.js";
import { metricsText } from "../../src/metrics/prometheus.js";
import { MeteredLimiter, withMetrics } from "../../src/metrics/with-metrics.js";

const manual = () => {
  let now = 0;
  const clock = () => now;
  return { clock, advance: (ms: number) => (now += ms) };
};

describe("withMetrics on a KeyedLimiter", () => {
  it("steps: allow and consume count allowed/denied, consume the near-limit ones, peek nothing", () => {
    const { clock } = manual();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }));
    const m = withMetrics(keyed, { name: "api", nearLimitShare: 0.2 });
    const steps: [string, () => unknown, [number, number, number]][] = [
      ["allow a (9 left)", () => m.allow("a"), [1, 0, 0]],
      ["consume a 6 (3 left)", () => m.consume("a", 6).remaining, [2, 0, 0]],
      ["consume a 1 (2 left: near, 2 <= 0.2 * 10)", () => m.consume("a").remaining, [3, 0, 1]],
      ["peek a: nothing counted", () => m.peek("a", 5), [3, 0, 1]],
      ["consume a 5: denied", () => m.consume("a", 5).allowed, [3, 1, 1]],
      ["allow a 5: denied", () => m.allow("a", 5), [3, 2, 1]],
      ["consume a 2 (0 left: near)", () => m.consume("a", 2).remaining, [4, 2, 2]],
    ];
    for (const [name, act, [allowed, denied, near]] of steps) {
      act();
      const s = m.metrics();
      expect([name, s.allowed, s.denied, s.nearLimit]).toEqual([name, allowed, denied, near]);
    }
    const s = m.metrics();
    expect(s).toMatchObject({
      name: "api",
      nearLimitShare: 0.2,
      keys: 1,
      evictedIdle: 0,
      evictedLossy: 0,
      refused: 0,
    });
    expect(s.store).toBeUndefined();
    expect(s.nearLimitKeys).toEqual([]);
  });

  it("reads evictions from the registry's stats", () => {
    const { clock } = manual();
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }), {
      maxKeys: 2,
    });
    const m = withMetrics(keyed);
    for (const key of ["a", "b", "c", "d"]) m.consume(key);
    expect(m.metrics().evictedLossy).toBe(2);
    expect(m.metrics().keys).toBe(2);
  });

  it("counts an async consume when it resolves, and a granted or refused wait", async () => {
    const decision = { allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 };
    const m = withMetrics({ consume: async () => decision }, { name: "redis" });
    await m.consume("k");
    await Promise.resolve();
    expect(m.metrics()).toMatchObject({ allowed: 1, nearLimit: 1, keys: undefined });
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0 }));
    const w = withMetrics(keyed);
    await w.wait("k");
    await expect(w.wait("k", 1, { maxWaitMs: 0 })).rejects.toThrow(
      /can never be granted|maxWaitMs/,
    );
    expect(w.metrics()).toMatchObject({ allowed: 1, denied: 1 });
  });

  it("feeds the store's health from storeHealth() or the store option", () => {
    const health = { failures: 3, circuits: [{ node: "n1", state: "open" as const }] };
    const limiter = {
      consume: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
      storeHealth: () => health,
    };
    expect(withMetrics(limiter).metrics().store).toEqual(health);
    expect(withMetrics({ consume: limiter.consume }, { store: () => health }).metrics().store).toBe(
      health,
    );
  });

  it("keeps the tollgate/http view of the limiter: its window and key length", async () => {
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }), {
      maxKeyLength: 64,
    });
    const m = withMetrics(keyed);
    expect([m.windowMs, m.maxKeyLength]).toEqual([60_000, 64]);
    expect(() => rateLimit({ limiter: m, windowSeconds: 60 })).not.toThrow();
    expect(() => rateLimit({ limiter: m, windowSeconds: 30 })).toThrow(/limiter's window is 60 s/);
  });

  it("checks its options at the boundary", () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1 }));
    expect(() => withMetrics(keyed, { nearLimitShare: 1.5 })).toThrow(
      /nearLimitShare must be a finite number from 0 to 1, got 1.5/,
    );
    expect(() => withMetrics(keyed, { nearLimitKeys: 101 })).toThrow(
      /nearLimitKeys must be an integer from 0 to 100/,
    );
    expect(() => withMetrics(keyed, { name: "" })).toThrow(/name must be a string of 1 to 128/);
    expect(() => withMetrics(keyed, { topKeys: 5 } as never)).toThrow(/use "nearLimitKeys"/);
    expect(() => withMetrics({} as never)).toThrow(/limiter must be a tollgate limiter/);
  });
});

describe("withMetrics on an unkeyed limiter", () => {
  it("is a limiter itself, so tollgate/http takes it as one global limit", () => {
    const { clock } = manual();
    const m = withMetrics(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
    expect(m).toBeInstanceOf(MeteredLimiter);
    expect([m.allow(), m.consume().remaining, m.consume().allowed]).toEqual([true, 0, false]);
    expect(m.metrics()).toMatchObject({ allowed: 2, denied: 1, nearLimit: 1, keys: undefined });
    expect(m.isIdle()).toBe(false);
    m.reset();
    expect(m.isIdle()).toBe(true);
    expect(() => rateLimit({ limiter: m })).not.toThrow();
  });

  it("an unkeyed SlidingWindowLog reports no keys: its log's entry count is not keys", () => {
    // A private `size` getter of the log (its entries) was read as `keys`, and sent as
    // tollgate_keys; `keys` is a keyed limiter's (docs/metrics.md).
    const { clock } = manual();
    const m = withMetrics(new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }), {
      name: "log",
    });
    m.consume();
    m.consume();
    expect(m.metrics().keys).toBeUndefined();
    expect(metricsText([m])).not.toContain("tollgate_keys");
  });
});

describe("the near-limit keys: bounded, and the heavy hitters stay", () => {
  it("a flood of one-off keys keeps at most N entries and never pushes out a key with more than total/N hits", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.oneof(fc.constantFrom("big", "mid"), fc.string({ maxLength: 3 })), {
          maxLength: 300,
        }),
        (n, hits) => {
          const top = new NearLimitKeys(n);
          const truth = new Map<string, number>();
          for (const key of hits) {
            top.hit(key);
            truth.set(key, (truth.get(key) ?? 0) + 1);
          }
          const kept = top.top();
          expect(kept.length).toBeLessThanOrEqual(n);
          for (const [key, count] of truth) {
            const entry = kept.find((e) => e.key === key);
            // Space-Saving: a key with more than total/N hits is kept, with hits - error <= count <= hits.
            if (count > hits.length / n) expect(entry).toBeDefined();
            if (entry !== undefined) {
              expect(entry.hits).toBeGreaterThanOrEqual(count);
              expect(entry.hits - entry.error).toBeLessThanOrEqual(count);
            }
          }
        },
      ),
    );
  });

  it("withMetrics keeps them only when nearLimitKeys is set", () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0 }));
    const m = withMetrics(keyed, { nearLimitKeys: 2 });
    for (const key of ["a", "b", "c"]) m.consume(key);
    m.consume("c");
    expect(m.metrics().nearLimitKeys.length).toBe(2);
    expect(m.metrics().nearLimitKeys.map((e) => e.key)).toContain("c");
  });
});
