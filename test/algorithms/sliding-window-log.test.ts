import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import { INITIAL_ENTRIES } from "../../src/algorithms/log-ring.js";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import type { SlidingWindowLogKernel } from "../../src/algorithms/sliding-window-log-kernel.js";
import { allOf } from "../../src/composite/all-of.js";
import { RateLimitError } from "../../src/core/errors.js";
import type { Receipt } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { describeSharedValidation, windowOptionCases } from "../support/limiter-checks.js";
import { manualClock } from "../support/manual-clock.js";
import { slidingLogModel } from "../support/models.js";
import { runSteps } from "../support/steps.js";
import {
  expectDenialChangesNothing,
  expectPeekPredictsConsume,
  expectSameAsModel,
  timeline,
  windowParams,
} from "../support/timeline.js";
import { describeClockResolution } from "../support/window-resolution.js";

const INF = Number.POSITIVE_INFINITY;

/** The log's private ring, read for white-box bounds (entries held, ring size, base). */
function internals(log: SlidingWindowLog): { size: number; slotCount: number; base: number } {
  const { kernel, state } = log as unknown as {
    kernel: SlidingWindowLogKernel;
    state: Float64Array;
  };
  const ring = kernel.ringAt(state, 0, 0);
  return { size: ring.size, slotCount: ring.slotCount, base: ring.base };
}

/**
 * The most cost admitted in any window `(end - windowMs, end]`, for `admitted` (time,
 * cost) pairs in time order: a two-pointer scan, O(n).
 */
function maxWindowSum(admitted: readonly (readonly [number, number])[], windowMs: number): number {
  let max = 0;
  let sum = 0;
  let left = 0;
  for (const [end, cost] of admitted) {
    sum += cost;
    while (admitted[left]![0] <= end - windowMs) sum -= admitted[left++]![1];
    if (sum > max) max = sum;
  }
  return max;
}

describe("SlidingWindowLog step tables", () => {
  // Each row: atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs (newest leaves).
  test("an entry counts while time > t - windowMs", () => {
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }),
      [
        [0, 1, true, 2, 0, 1000],
        [100, 1, true, 1, 0, 1000],
        [200, 1, true, 0, 0, 1000], // the last slot
        [300, 1, false, 0, 700, 900], // the entry at 0 leaves at 1000
        [999, 1, false, 0, 1, 201],
        [1000, 1, true, 0, 0, 1000], // at 1000 the entry at 0 no longer counts
        [1000, 1, false, 0, 100, 1000],
        [1000, 0, true, 0, 0, 1000], // cost 0: a free probe, always allowed
        [3000, 0, true, 3, 0, 0],
      ],
    );
  });

  test("several of the oldest entries must leave for one large cost", () => {
    const { limiter } = runSteps(
      (clock) => new SlidingWindowLog({ limit: 5, windowMs: 1000, clock }),
      [
        [0, 1, true, 4, 0, 1000],
        [100, 1, true, 3, 0, 1000],
        [200, 1, true, 2, 0, 1000],
        [300, 2, true, 0, 0, 1000],
        [400, 1, false, 0, 600, 900], // the entry at 0 is enough
        [400, 2, false, 0, 700, 900], // 0 and 100 must leave
        [400, 3, false, 0, 800, 900], // 0, 100 and 200
        [400, 4, false, 0, 900, 900], // all four: the entry at 300 holds 2
        [400, 5, false, 0, 900, 900],
        [400, 6, false, 0, INF, 900], // above the limit: never
        [1200, 4, false, 3, 100, 100], // 0, 100 and 200 have left
        [1300, 5, true, 0, 0, 1000],
      ],
    );
    expect(internals(limiter).size).toBe(1);
  });

  test("a heavy entry is remembered at its full weight", () => {
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 10, windowMs: 1000, clock }),
      [
        [0, 9, true, 1, 0, 1000],
        [500, 1, true, 0, 0, 1000],
        [999, 1, false, 0, 1, 501],
        [1000, 9, true, 0, 0, 1000],
        [1000, 1, false, 0, 500, 1000],
      ],
    );
  });

  test("a cost above the limit is denied with Infinity and takes nothing", () => {
    const { limiter } = runSteps(
      (clock) => new SlidingWindowLog({ limit: 3, windowMs: 1000, clock }),
      [
        [0, 4, false, 3, INF, 0],
        [0, 3.0000001, false, 3, INF, 0],
        [0, 3, true, 0, 0, 1000],
      ],
    );
    expect(limiter.peek(1e9).retryAfterMs).toBe(INF);
  });

  test("a clock going backwards lets no entry leave early", () => {
    const { limiter, clock } = runSteps(
      (clock) => new SlidingWindowLog({ limit: 2, windowMs: 1000, clock }),
      [
        [1000, 2, true, 0, 0, 1000],
        [500, 1, false, 0, 1000, 1000], // time stands still at 1000
        [1500, 1, false, 0, 500, 500],
        [1200, 1, false, 0, 500, 500], // still counted from 1500, the latest reading
        [2000, 1, true, 1, 0, 1000],
      ],
    );
    clock.set(-1e9);
    expect(limiter.peek()).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
  });

  test("fractional costs at the same instant share one entry", () => {
    const { limiter } = runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 1000, clock }),
      [
        [0, 0.25, true, 0, 0, 1000],
        [0, 0.25, true, 0, 0, 1000],
        [0, 0.5, true, 0, 0, 1000],
        [0, 0.001, false, 0, 1000, 1000],
        [1000, 1, true, 0, 0, 1000],
      ],
    );
    expect(internals(limiter).size).toBe(1);
  });

  test("fractional entries beyond 64 share granules, counting a little longer, never shorter", () => {
    // limit 1 keeps 64 entries at their exact time; the 65th (at 64 ms) is stamped at the
    // end of its granule of 1000 / 64 = 15.625 ms: 78.125 ms, so it leaves at 1078.125.
    const clock = manualClock();
    const log = new SlidingWindowLog({ limit: 1, windowMs: 1000, clock });
    for (let t = 0; t < 64; t++) {
      clock.set(t);
      const d = log.consume(1 / 128);
      expect(d, `at ${t}`).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
    }
    clock.set(64);
    expect(log.consume(1 / 128)).toMatchObject({ allowed: true, resetAfterMs: 1078.125 - 64 });
    expect(internals(log)).toMatchObject({ size: 65, slotCount: 128 });
    clock.set(1070);
    // An exact log would be empty now (the last entry, at 64, left at 1064).
    expect(log.peek(1)).toMatchObject({ allowed: false, retryAfterMs: 8.125, resetAfterMs: 8.125 });
    clock.set(1078.125);
    expect(log.consume(1)).toMatchObject({ allowed: true, remaining: 0 });
  });

  test("peek's resetAfterMs uses the granule stamp, as consume does (peek said windowMs)", () => {
    const clock = manualClock();
    const log = new SlidingWindowLog({ limit: 1, windowMs: 1000, clock });
    for (let t = 0; t < 64; t++) {
      clock.set(t);
      log.consume(1 / 128);
    }
    clock.set(64);
    const resetAfterMs = 1078.125 - 64; // stamped at the end of granule 4 of 15.625 ms
    expect(log.peek(1 / 128)).toMatchObject({ allowed: true, resetAfterMs });
    expect(log.consume(1 / 128)).toMatchObject({ allowed: true, resetAfterMs });
    expect(log.peek(0)).toMatchObject({ allowed: true, resetAfterMs });
  });

  test("windows longer than 2^31-1 ms", () => {
    const w = 2 ** 32;
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: w, clock }),
      [
        [5, 1, true, 0, 0, w],
        [w + 4, 1, false, 0, 1, 1],
        [w + 5, 1, true, 0, 0, w],
      ],
    );
  });

  test("huge values: limit 1e15, a window of a year, a clock at 1e13 ms", () => {
    const year = 31_536_000_000;
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1e15, windowMs: year, clock }),
      [
        [1e13, 1e15, true, 0, 0, year],
        [1e13 + 1, 1, false, 0, year - 1, year - 1],
        [1e13 + year, 1e15, true, 0, 0, year],
      ],
    );
  });

  test("holds at most limit entries for unit costs, and shrinks when they leave", () => {
    const clock = manualClock();
    const log = new SlidingWindowLog({ limit: 100, windowMs: 1000, clock });
    for (let t = 0; t < 150; t++) {
      clock.set(t);
      expect(log.allow(), `at ${t}`).toBe(t < 100);
    }
    expect(internals(log)).toMatchObject({ size: 100, slotCount: 100 });
    clock.set(1095);
    expect(log.consume()).toMatchObject({ allowed: true, remaining: 95 }); // 0..95 left
    expect(internals(log)).toMatchObject({ size: 5 });
    expect(internals(log).slotCount).toBeLessThanOrEqual(50);
    clock.set(5000);
    expect(log.isIdle()).toBe(true);
    expect(internals(log).slotCount).toBe(INITIAL_ENTRIES);
  });

  test("steady fractional traffic for 10^6 ms: the running sum does not drift", () => {
    // 0.03 every 20 ms in a 1000 ms window is exactly the limit of 1.5 at every step.
    const clock = manualClock();
    const log = new SlidingWindowLog({ limit: 1.5, windowMs: 1000, clock });
    let denied = 0;
    for (let t = 0; t < 1_000_000; t += 20) {
      clock.set(t);
      if (!log.allow(0.03)) denied++;
    }
    expect(denied).toBe(0);
    expect(log.peek(0.03)).toMatchObject({ allowed: false, retryAfterMs: 20 });
    expect(internals(log).size).toBe(50);
    expect(internals(log).base).toBeLessThanOrEqual(2 * 1.5 + 0.03);
  });

  test("the doc example", () => {
    const log = new SlidingWindowLog({ limit: 5, windowMs: 60_000, clock: manualClock() });
    expect(log.consume(5).allowed).toBe(true);
    expect(log.consume()).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
  });

  test("peek changes nothing; reset, isIdle and clone", () => {
    const clock = manualClock(100);
    const log = new SlidingWindowLog({ limit: 2, windowMs: 1000, clock });
    expect(log.isIdle()).toBe(true);
    expect(log.peek(2)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
    expect(log.isIdle()).toBe(true);
    expect(log.allow()).toBe(true);
    expect(log.isIdle()).toBe(false);
    const copy = log.clone();
    expect(copy).toMatchObject({ limit: 2, windowMs: 1000, clock });
    expect(copy.isIdle()).toBe(true);
    clock.set(1099);
    expect(log.isIdle()).toBe(false);
    clock.set(1100);
    expect(log.isIdle()).toBe(true);
    log.consume(2);
    log.reset();
    expect(log.isIdle()).toBe(true);
    expect(internals(log).slotCount).toBe(0);
    expect(log.consume(2)).toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe("SlidingWindowLog wait", () => {
  test("resolves when the oldest entry leaves; rejects a cost above the limit", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      vi.setSystemTime(0);
      const log = new SlidingWindowLog({ limit: 2, windowMs: 1000, clock: () => Date.now() });
      log.consume();
      vi.setSystemTime(300);
      log.consume();
      await expect(log.wait(3)).rejects.toThrow(
        new RangeError("SlidingWindowLog.wait: cost 3 exceeds limit 2"),
      );
      await expect(log.wait(2, { maxWaitMs: 999 })).rejects.toBeInstanceOf(RateLimitError);
      const granted = log.wait(1);
      await vi.advanceTimersByTimeAsync(699);
      expect(log.peek().allowed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await expect(granted).resolves.toMatchObject({ allowed: true, remaining: 0 });
      // A pending waiter keeps the limiter busy even when its state is reset to fresh.
      log.consume(2);
      const pending = log.wait(1);
      log.reset();
      expect(log.isIdle()).toBe(false);
      await vi.advanceTimersByTimeAsync(10_000);
      await expect(pending).resolves.toMatchObject({ allowed: true });
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("SlidingWindowLog validation", () => {
  test.each(windowOptionCases("SlidingWindowLog"))("$name", ({ options, error, message }) => {
    const make = () => new SlidingWindowLog(options as never);
    expect(make).toThrow(error);
    expect(make).toThrow(message);
  });
});

describeSharedValidation(
  "SlidingWindowLog",
  (clock) => new SlidingWindowLog({ limit: 1, windowMs: 1000, clock }),
);

describe("SlidingWindowLog properties", () => {
  test("decides as a plain array of (time, cost) for any timeline", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectSameAsModel(
          (clock) => new SlidingWindowLog({ limit, windowMs, clock }),
          slidingLogModel(limit, windowMs),
          calls,
        );
      }),
    );
  });

  test("decides as the model over long timelines with a larger limit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 20, max: 200 }),
        fc.integer({ min: 50, max: 5000 }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: -20, max: 60 }),
            cost: fc.integer({ min: 0, max: 8 }),
            op: fc.constantFrom("consume" as const, "allow" as const, "peek" as const),
          }),
          { minLength: 100, maxLength: 600 },
        ),
        (limit, windowMs, calls) => {
          expectSameAsModel(
            (clock) => new SlidingWindowLog({ limit, windowMs, clock }),
            slidingLogModel(limit, windowMs),
            calls,
          );
        },
      ),
      { numRuns: 50 },
    );
  });

  test("never admits more than limit in any window of windowMs, fractional costs included", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 10 }), fc.double({ min: 0.5, max: 10, noNaN: true })),
        fc.integer({ min: 1, max: 500 }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: -50, max: 100 }),
            cost: fc.oneof(
              fc.integer({ min: 0, max: 3 }),
              fc.double({ min: 0, max: 1, noNaN: true }),
            ),
          }),
          { maxLength: 300 },
        ),
        (limit, windowMs, calls) => {
          const clock = manualClock();
          const log = new SlidingWindowLog({ limit, windowMs, clock });
          const admitted: [number, number][] = [];
          let latest = Number.NEGATIVE_INFINITY;
          for (const { dt, cost } of calls) {
            clock.advance(dt);
            latest = Math.max(latest, clock());
            if (log.allow(cost)) admitted.push([latest, cost]);
          }
          expect(maxWindowSum(admitted, windowMs)).toBeLessThanOrEqual(limit + 1e-6);
        },
      ),
    );
  });

  test("many small fractional costs: never more than limit per window, at most 2n + 1 entries", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 50, max: 1000 }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: 0, max: 4 }),
            cost: fc.double({ min: 0.001, max: 0.05, noNaN: true }),
          }),
          { minLength: 150, maxLength: 300 },
        ),
        (limit, windowMs, calls) => {
          const clock = manualClock();
          const log = new SlidingWindowLog({ limit, windowMs, clock });
          const admitted: [number, number][] = [];
          for (const { dt, cost } of calls) {
            clock.advance(dt);
            if (log.allow(cost)) admitted.push([clock(), cost]);
            expect(internals(log).size).toBeLessThanOrEqual(2 * 64 + 1);
          }
          expect(maxWindowSum(admitted, windowMs)).toBeLessThanOrEqual(limit + 1e-6);
        },
      ),
    );
  });

  test("peek answers what consume then does", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectPeekPredictsConsume(
          (clock) => new SlidingWindowLog({ limit, windowMs, clock }),
          calls,
        );
      }),
    );
  });

  test("a denied call leaves peek unchanged", () => {
    fc.assert(
      fc.property(windowParams, timeline, ({ limit, windowMs }, calls) => {
        expectDenialChangesNothing(
          (clock) => new SlidingWindowLog({ limit, windowMs, clock }),
          calls,
        );
      }),
    );
  });
});

describe("SlidingWindowLog leave times (regression: an entry left before a full window)", () => {
  // 7.2 + 2 rounds down to 9.2 (exactly 9.2000000000000002): the entry of 7.2 left at
  // the reading 9.2, 1.9999999999999998 ms after it was logged, and a second unit passed.
  test("an entry whose leave time rounds down still counts at the rounded instant", () => {
    expect(7.2 + 2).toBe(9.2);
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 2, clock }),
      [
        [7.2, 1, true, 0, 0, 9.200000000000001 - 7.2],
        [9.2, 1, false, 0, 9.200000000000001 - 9.2],
        [9.200000000000001, 1, true, 0, 0],
      ],
    );
  });

  // The first fix moved the sum up by |x| * 2^-52, which rounds to two steps for 1.9: the
  // entry of 0.9 still counted at 1.9000000000000001, after its exact leave time.
  test("the moved-up leave time is the next double, not two steps on", () => {
    expect(0.9 + 1).toBe(1.9); // below the exact 1.90000000000000002
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 1, clock }),
      [
        [0.9, 1, true, 0, 0, 1.9000000000000001 - 0.9],
        [1.9, 1, false, 0, 1.9000000000000001 - 1.9],
        [1.9000000000000001, 1, true, 0, 0],
      ],
    );
  });

  // Near the clock bound the rounding is a whole step: 2^53 - 1 + 2 is 2^53, so at the
  // reading 2^53 (1 ms after the entry, in a 2 ms window) the full limit passed again.
  test("at 2^53 - 1 with windowMs 2 the entry still counts at 2^53", () => {
    const t = 2 ** 53 - 1;
    runSteps(
      (clock) => new SlidingWindowLog({ limit: 1, windowMs: 2, clock }),
      [
        [t, 1, true, 0, 0, 3],
        [t + 1, 1, false, 0, 2, 2],
        [t + 3, 1, true, 0, 0],
      ],
    );
  });
});

describeClockResolution("SlidingWindowLog", (options) => new SlidingWindowLog(options));

describe("SlidingWindowLog receipts after other refunds", () => {
  // Limit 10 per 1000 ms; each form decides by the one kernel (LogRing).
  const forms = [
    [
      "SlidingWindowLog",
      (clock: () => number) => {
        const log = new SlidingWindowLog({ limit: 10, windowMs: 1000, clock });
        return {
          charge: (cost: number) => log.charge(cost),
          refund: (cost: number) => log.refund(cost),
          refundReceipt: (r: Receipt, units?: number) => log.refund(r, units),
          remaining: () => log.peek(0).remaining,
        };
      },
    ],
    [
      "allOf part",
      (clock: () => number) => {
        const both = allOf(
          new SlidingWindowLog({ limit: 10, windowMs: 1000, clock }),
          new SlidingWindowLog({ limit: 100, windowMs: 1000, clock }),
        );
        return {
          charge: (cost: number) => both.charge(cost),
          refund: (cost: number) => both.refund(cost),
          refundReceipt: (r: Receipt, units?: number) => both.refund(r, units),
          remaining: () => both.peek(0).remaining,
        };
      },
    ],
    [
      "KeyedLimiter",
      (clock: () => number) => {
        const keyed = new KeyedLimiter(new SlidingWindowLog({ limit: 10, windowMs: 1000, clock }));
        return {
          charge: (cost: number) => keyed.charge("k", cost),
          refund: (cost: number) => keyed.refund("k", cost),
          refundReceipt: (r: Receipt, units?: number) => keyed.refund(r, units),
          remaining: () => keyed.peek("k", 0).remaining,
        };
      },
    ],
  ] as const;

  test.each(forms)(
    "%s: a log receipt gives back nothing of a later charge after a refund by key took its units",
    (_, make) => {
      const clock = manualClock(0);
      const log = make(clock);
      const r1 = log.charge(3);
      expect(log.refund(3)).toBe(3); // the newest entry: r1's units
      clock.set(100);
      log.charge(4);
      // Before, r1 found the next entry (the 4 of the later charge) and gave back 3 of them.
      expect(log.refundReceipt(r1)).toBe(0);
      expect(log.remaining()).toBe(6);
      // The later charge's own receipt still gives back its own.
      clock.set(200);
      const r3 = log.charge(2);
      expect(log.refundReceipt(r3)).toBe(2);
      expect(log.refundReceipt(r1)).toBe(0);
      expect(log.remaining()).toBe(6);
      // Charge, refund by key, charge again at the same instant (the same leave time): the
      // old receipt still gains nothing.
      clock.set(300);
      const r4 = log.charge(1);
      expect(log.refund(1)).toBe(1);
      log.charge(1);
      expect(log.refundReceipt(r4)).toBe(0);
      expect(log.remaining()).toBe(5);
    },
  );

  test.each(forms)(
    "%s: receipts sharing an entry give back at most what it still holds",
    (_, make) => {
      const clock = manualClock(0);
      const log = make(clock);
      // Two charges at one instant share one entry of 5.
      const a = log.charge(2);
      const b = log.charge(3);
      expect(log.refund(4)).toBe(4); // by key: 1 of the entry is left
      expect(log.refundReceipt(b)).toBe(1); // all it still holds, not 3
      expect(log.refundReceipt(a)).toBe(0); // emptied: a later charge is not its entry
      clock.set(10);
      log.charge(4);
      expect(log.refundReceipt(a)).toBe(0);
      expect(log.refundReceipt(b)).toBe(0);
      expect(log.remaining()).toBe(6);
    },
  );
});

describe("a charge after reconfigure shortened the window keeps leave times in order", () => {
  // The entry logged before the shorter window leaves at 1051, a new one would at 1050:
  // it was appended after it, out of order, and the snapshot was refused by restore.
  test("its snapshot restores, class and keyed", () => {
    let now = 1000;
    const clock = () => now;
    const log = new SlidingWindowLog({ limit: 2, windowMs: 50, clock });
    log.consume();
    log.reconfigure({ windowMs: 51 });
    log.reconfigure({ windowMs: 50 });
    expect(log.consume().allowed).toBe(true);
    const copy = new SlidingWindowLog({ limit: 2, windowMs: 50, clock });
    copy.restore(log.snapshot());
    expect(copy.consume().allowed).toBe(false);
    now = 1050;
    expect(copy.consume().allowed).toBe(false); // never sooner: both count until 1051
    now = 1051;
    expect(copy.peek().remaining).toBe(1);

    now = 1000;
    const keyed = new KeyedLimiter(new SlidingWindowLog({ limit: 2, windowMs: 50, clock }));
    keyed.consume("a");
    keyed.reconfigure({ windowMs: 51 });
    keyed.reconfigure({ windowMs: 50 });
    keyed.consume("a");
    keyed.restore("b", keyed.snapshot("a"));
    expect(keyed.consume("b").allowed).toBe(false);
  });
});

describe("allow() reads a denial in place: it answers and keeps state as consume()", () => {
  // `SlidingWindowLogKernel.allowAt` decides a denial from the ring's head, size and base
  // before the long path. Twins fed the same calls, one deciding by allow and one by
  // consume, must answer and hold alike over wrapped rings, granules, tombstones,
  // receipts, reconfigure, restore and explicit times; and a keyed registry at maxBytes
  // (rings that may not grow merge) likewise.
  const cost = fc.oneof(
    fc.constantFrom(0, 1, 1, 2, 0.3, 0.7, 0.01, 1e-9, 9, 200),
    fc.double({ min: 0, max: 3, noNaN: true }),
  );
  const call = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        k: fc.constant("dt" as const),
        ms: fc.oneof(
          fc.integer({ min: -5, max: 40 }),
          fc.double({ min: -5, max: 40, noNaN: true }),
        ),
      }),
    },
    { weight: 8, arbitrary: fc.record({ k: fc.constant("allow" as const), cost, key: fc.nat(2) }) },
    {
      weight: 2,
      arbitrary: fc.record({ k: fc.constant("charge" as const), cost, key: fc.nat(2) }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ k: fc.constant("refund" as const), cost, key: fc.nat(2) }),
    },
    { weight: 2, arbitrary: fc.record({ k: fc.constant("receipt" as const), i: fc.nat(30) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        k: fc.constant("reconfigure" as const),
        limit: fc.constantFrom(1, 3, 8, 70),
        windowMs: fc.constantFrom(10, 100, 400),
      }),
    },
    { weight: 1, arbitrary: fc.record({ k: fc.constant("restore" as const) }) },
  );
  const limits = fc.constantFrom(1, 2.5, 8, 64, 70);

  test("at the instant the oldest entry leaves, allow admits: it is not read as still in", () => {
    const clock = manualClock();
    const single = new SlidingWindowLog({ limit: 2, windowMs: 1000, clock });
    const keyed = new KeyedLimiter(new SlidingWindowLog({ limit: 2, windowMs: 1000, clock }));
    const steps: [number, boolean][] = [
      [0, true],
      [10, true],
      [999, false], // full: the in-place denial
      [1000, true], // the entry at 0 leaves at 1000: the long path admits
      [1009, false],
      [1010, true], // the entry at 10 leaves at 1010
    ];
    for (const [atMs, allowed] of steps) {
      clock.set(atMs);
      expect(single.allow(), `class at ${atMs}`).toBe(allowed);
      expect(keyed.allow("k"), `keyed at ${atMs}`).toBe(allowed);
    }
  });

  test("the class", () => {
    fc.assert(
      fc.property(
        limits,
        fc.constantFrom(10, 50, 100, 1000),
        fc.array(call, { minLength: 150, maxLength: 400 }),
        (limit, windowMs, calls) => {
          const clock = manualClock();
          const twins = [0, 1].map(() => new SlidingWindowLog({ limit, windowMs, clock }));
          const receipts: Receipt[][] = [[], []];
          for (const c of calls) {
            if (c.k === "dt") {
              clock.advance(c.ms);
              continue;
            }
            const out = twins.map((log, t) => {
              switch (c.k) {
                case "allow":
                  return t === 0 ? log.allow(c.cost) : log.consume(c.cost).allowed;
                case "charge":
                  receipts[t]!.push(log.charge(c.cost));
                  return receipts[t]!.at(-1)!.allowed;
                case "refund":
                  return log.refund(c.cost);
                case "receipt": {
                  const r = receipts[t]![c.i % Math.max(1, receipts[t]!.length)];
                  return r === undefined ? 0 : log.refund(r);
                }
                case "reconfigure":
                  log.reconfigure({ limit: c.limit, windowMs: c.windowMs });
                  return 0;
                default:
                  log.restore(JSON.parse(JSON.stringify(log.snapshot())));
                  return 0;
              }
            });
            expect(out[0]).toEqual(out[1]);
            expect(twins[0]!.snapshot()).toEqual(twins[1]!.snapshot());
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  test("a keyed registry at maxBytes, rings that may not grow merging", () => {
    fc.assert(
      fc.property(limits, fc.array(call, { minLength: 100, maxLength: 300 }), (limit, calls) => {
        const clock = manualClock();
        const twins = [0, 1].map(
          () =>
            new KeyedLimiter(new SlidingWindowLog({ limit, windowMs: 1000, clock }), {
              maxBytes: 2 ** 16,
              whenFull: "refuse",
            }),
        );
        // Keys that fill the bytes: their rings are full when the calls begin.
        // (One latest time serves the registry: the keys' entries are logged in turns.)
        for (const keyed of twins) {
          for (let j = 0; j < 80; j++) {
            for (let i = 0; i < 24; i++) keyed.allowAt(`held-${i}`, j * 12, 0.001);
          }
        }
        for (const c of calls) {
          if (c.k === "dt") {
            clock.advance(c.ms);
            continue;
          }
          const out = twins.map((keyed, t) => {
            const key = c.k === "receipt" ? "" : `held-${"key" in c ? c.key : 0}`;
            switch (c.k) {
              case "allow":
                return t === 0 ? keyed.allow(key, c.cost) : keyed.consume(key, c.cost).allowed;
              case "charge":
                return keyed.charge(key, c.cost).allowed;
              case "refund":
                return keyed.refund(key, c.cost);
              case "reconfigure":
                keyed.reconfigure({ limit: c.limit, windowMs: c.windowMs });
                return 0;
              case "restore":
                keyed.restore("held-1", keyed.snapshot("held-0"));
                return 0;
              default:
                return 0;
            }
          });
          expect(out[0]).toEqual(out[1]);
        }
        expect(twins[0]!.snapshotAll().keys).toEqual(twins[1]!.snapshotAll().keys);
        expect(twins[0]!.stats).toEqual(twins[1]!.stats);
        expect(twins[0]!.stats.evictedLossy).toBe(0);
      }),
      { numRuns: 60 },
    );
  });
});
