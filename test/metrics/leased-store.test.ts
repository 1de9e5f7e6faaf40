// withMetrics on a LeasedTokenBucket: the store families come from its storeHealth(), fed
// by its lease exchanges (a MemoryLeaseStore that can fail, a manual clock and timers).
import { describe, expect, it } from "vitest";
import { metricsText } from "../../src/metrics/prometheus.js";
import { withMetrics } from "../../src/metrics/with-metrics.js";
import { LeasedTokenBucket, MemoryLeaseStore } from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import { manualScheduler } from "../support/manual-scheduler.js";

describe("withMetrics on a LeasedTokenBucket", () => {
  it("showed no tollgate_store_ lines during an outage; now failures and an open circuit", async () => {
    const clock = manualClock(1000);
    const timers = manualScheduler(clock);
    const store = new MemoryLeaseStore({ capacity: 100, refillPerSecond: 10, clock });
    const leased = new LeasedTokenBucket({
      capacity: 100,
      refillPerSecond: 10,
      store,
      clock,
      scheduler: timers.schedule,
      onError: () => {},
    });
    const m = withMetrics(leased, { name: "leased" });
    const closed = 'tollgate_store_circuit_state{limiter="leased",node="",state="closed"} 1';
    const open = 'tollgate_store_circuit_state{limiter="leased",node="",state="open"} 1';

    m.consume("k");
    await timers.advance(5); // the first lease arrives
    expect(m.metrics().store).toEqual({ failures: 0, circuits: [{ node: "", state: "closed" }] });
    expect(metricsText([m])).toContain(closed);

    store.failing = true;
    for (let i = 0; i < 30; i++) m.consume("k"); // spends the lease: a refill is asked for
    await timers.advance(5);
    const during = m.metrics().store;
    expect(during?.failures).toBeGreaterThan(0);
    expect(during?.failures).toBe(leased.stats.failedExchanges);
    expect(during?.circuits).toEqual([{ node: "", state: "open" }]);
    const text = metricsText([m]);
    expect(text).toContain(open);
    expect(text).toContain(`tollgate_store_failures_total{limiter="leased"} ${during?.failures}`);

    store.failing = false;
    for (let t = 0; t < 20 && leased.storeHealth().circuits[0]?.state !== "closed"; t++) {
      m.consume("k");
      await timers.advance(100);
    }
    expect(m.metrics().store?.circuits).toEqual([{ node: "", state: "closed" }]);
    expect(m.metrics().store?.failures).toBe(during?.failures); // a counter: it never goes back
    await leased.close();
  });
});
