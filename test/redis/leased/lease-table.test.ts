import { describe, expect, test } from "vitest";
import { LeaseEntry, LeaseTable } from "../../../src/redis/leased/lease-table.js";

// The local lease table's traces (docs/distributed.md#safety-and-the-outage-allowance),
// alone: entries that go, on a clock of our own.

describe("traces of keys that went", () => {
  /** Ms per entry that goes, best of three runs of `count`, into a table of `maxKeys`. */
  function msPerEntry(maxKeys: number, count: number, traced: boolean): number {
    let now = 0;
    // Each new trace full again later than every other: the table drops one for each.
    const fullAt = traced ? () => now + 1e9 : () => Number.NEGATIVE_INFINITY;
    const table = new LeaseTable(
      maxKeys,
      () => {},
      fullAt,
      () => now,
    );
    let n = 0;
    const churn = (times: number) => {
      for (let i = 0; i < times; i++) {
        const e = new LeaseEntry(`key${n++}`, "", 0, 0, now, 100);
        e.sharedAtMs = now;
        table.add(e);
        table.remove(e);
        now++;
      }
    };
    churn(maxKeys); // the traces, all taken
    let best = Number.POSITIVE_INFINITY;
    for (let run = 0; run < 3; run++) {
      const started = performance.now();
      churn(count);
      best = Math.min(best, (performance.now() - started) / count);
    }
    expect(table.traceCount).toBe(traced ? maxKeys : 0);
    return best;
  }

  // A map's first entries that went stay in it as holes until it is rebuilt, and walking
  // from its start to the oldest few steps over all of them: with 100,000 traces, 15 to 65
  // microseconds per entry that went, about 90 times an entry that leaves no trace (about
  // 10 times when it looks at a few).
  test("an entry that goes while all traces are taken looks at a few, not at those that went", () => {
    const traced = msPerEntry(100_000, 100_000, true);
    const untraced = msPerEntry(100_000, 100_000, false);
    expect(traced / untraced).toBeLessThan(30);
  });
});
