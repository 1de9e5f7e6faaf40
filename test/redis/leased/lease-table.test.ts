import { describe, expect, test } from "vitest";
import { LeaseEntry, LeaseTable } from "../../../src/redis/leased/lease-table.js";

// The local lease table's traces (docs/distributed.md#safety-and-the-outage-allowance),
// alone: entries that go, on a clock of our own.

describe("traces of keys that went", () => {
  // A map's first entries that went stay in it as holes until it is rebuilt, and walking
  // from its start to the oldest few stepped over all of them: with 100,000 traces, 15 to 65
  // µs per entry that went (about 90 times an entry that leaves no trace). The work is
  // counted here, not timed: traces looked at per entry that goes, holes included.
  test("an entry that goes while all traces are taken looks at a few, not at those that went", () => {
    const maxKeys = 100_000;
    let now = 0;
    // Each new trace full again later than every other: the table drops one for each.
    const table = new LeaseTable(
      maxKeys,
      () => {},
      () => now + 1e9,
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
    expect(table.traceCount).toBe(maxKeys);
    const before = table.traceLooks;
    const count = 4 * maxKeys;
    churn(count);
    expect(table.traceCount).toBe(maxKeys);
    // Eight looked at for each, plus each hole skipped once: about 9 per entry that goes.
    expect((table.traceLooks - before) / count).toBeLessThan(12);
  });
});
