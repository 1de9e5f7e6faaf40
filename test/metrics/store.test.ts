// withMetrics on a tollgate/redis limiter whose store is down: the calls answered by the
// failure policy count as store failures, and the circuits' states come from circuits().
import { describe, expect, it } from "vitest";
import { metricsText } from "../../src/metrics/prometheus.js";
import { withMetrics } from "../../src/metrics/with-metrics.js";
import { type RedisLike, RedisTokenBucket } from "../../src/redis/index.js";

/** A client whose every call fails, as a store that is down. */
const down: RedisLike = {
  evalSha: () => Promise.reject(new Error("ECONNREFUSED")),
  evalScript: () => Promise.reject(new Error("ECONNREFUSED")),
};

describe("withMetrics on a store-backed limiter", () => {
  it("counts the policy's answers as store failures and reports the circuit open", async () => {
    const limiter = new RedisTokenBucket({
      client: down,
      capacity: 5,
      refillPerSecond: 1,
      failure: "open",
      circuit: { failuresToOpen: 2 },
      onError: () => {},
    });
    const m = withMetrics(limiter, { name: "redis" });
    expect(m.metrics().store).toEqual({ failures: 0, circuits: [{ node: "", state: "closed" }] });
    for (let i = 0; i < 3; i++) {
      const d = await m.consume("k");
      expect(d.allowed).toBe(true); // failure: "open"
    }
    await Promise.resolve();
    expect(m.metrics().store).toEqual({ failures: 3, circuits: [{ node: "", state: "open" }] });
    expect(metricsText([m])).toContain(
      'tollgate_store_circuit_state{limiter="redis",node="",state="open"} 1',
    );
    expect(metricsText([m])).toContain('tollgate_store_failures_total{limiter="redis"} 3');
  });

  it("counts a rejection (failure: throw) as a store failure", async () => {
    const limiter = new RedisTokenBucket({
      client: down,
      capacity: 5,
      refillPerSecond: 1,
      failure: "throw",
      onError: () => {},
    });
    const m = withMetrics(limiter);
    await expect(m.consume("k")).rejects.toThrow();
    await Promise.resolve();
    expect(m.metrics().store?.failures).toBe(1);
  });
});
