import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ReorderBuffer } from "../../src/cli/reorder.js";

/** Pushes `times` (item = arrival index) and returns what came out, in order. */
function run(windowMs: number, times: readonly number[]) {
  const out: { atMs: number; item: number }[] = [];
  const buffer = new ReorderBuffer<number>(windowMs, (atMs, item) => out.push({ atMs, item }));
  const afterEach: number[] = [];
  times.forEach((t, i) => {
    buffer.push(t, i);
    afterEach.push(out.length);
  });
  buffer.flush();
  return { out, afterEach, buffer };
}

describe("ReorderBuffer", () => {
  test("steps: holds items until they are windowMs behind the latest time", () => {
    // window 10; pushed time -> items released after the push (by arrival index)
    const steps = [
      { push: 100, released: [] },
      { push: 95, released: [] }, // back 5: reordered
      { push: 104, released: [] }, // releases up to 94: nothing yet
      { push: 110, released: [1, 0] }, // 95 and 100 are now 10 behind 110
      { push: 99, released: [4] }, // behind the last released (100): too late, out at once at 100
      { push: 130, released: [2, 3] }, // 104 and 110; 130 stays
    ];
    const out: { atMs: number; item: number }[] = [];
    const buffer = new ReorderBuffer<number>(10, (atMs, item) => out.push({ atMs, item }));
    let seen = 0;
    steps.forEach(({ push, released }, i) => {
      buffer.push(push, i);
      expect(
        out.slice(seen).map((o) => o.item),
        `step ${i}`,
      ).toEqual(released);
      seen = out.length;
    });
    expect(out.find((o) => o.item === 4)).toEqual({ atMs: 100, item: 4 });
    expect({ reordered: buffer.reordered, late: buffer.late, size: buffer.size }).toEqual({
      reordered: 1,
      late: 1,
      size: 1,
    });
    buffer.flush();
    expect(out.map((o) => o.item)).toEqual([1, 0, 4, 2, 3, 5]);
    expect(buffer.lastReleasedMs).toBe(130);
  });

  test("equal times keep their arrival order", () => {
    const { out } = run(5, [10, 10, 9, 10, 9]);
    expect(out.map((o) => o.item)).toEqual([2, 4, 0, 1, 3]);
  });

  test("window 0 reorders nothing: every step back is late and decided at the latest time", () => {
    const { out, buffer } = run(0, [10, 5, 12, 11, 12]);
    expect(out).toEqual([
      { atMs: 10, item: 0 },
      { atMs: 10, item: 1 },
      { atMs: 12, item: 2 },
      { atMs: 12, item: 3 },
      { atMs: 12, item: 4 },
    ]);
    expect([buffer.reordered, buffer.late, buffer.peakSize]).toEqual([0, 2, 1]);
  });

  test.each([
    {
      name: "negative",
      windowMs: -1,
      error: RangeError,
      message: "ReorderBuffer: windowMs must be a finite number >= 0, got -1",
    },
    {
      name: "infinite",
      windowMs: Number.POSITIVE_INFINITY,
      error: RangeError,
      message: "ReorderBuffer: windowMs must be a finite number >= 0, got Infinity",
    },
    {
      name: "NaN",
      windowMs: Number.NaN,
      error: RangeError,
      message: "ReorderBuffer: windowMs must be a finite number >= 0, got NaN",
    },
    {
      name: "a string",
      windowMs: "60" as unknown as number,
      error: TypeError,
      message: 'ReorderBuffer: windowMs must be a finite number >= 0, got "60" (string)',
    },
  ])("windowMs $name is refused", ({ windowMs, error, message }) => {
    expect(() => new ReorderBuffer(windowMs, () => {})).toThrow(error);
    expect(() => new ReorderBuffer(windowMs, () => {})).toThrow(message);
  });

  test("property: output is the sorted input when no item trails by more than the window", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 50 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 50 }))),
        (windowMs, steps) => {
          // Each time trails the running maximum by at most windowMs.
          let max = 0;
          const times = steps.map(([forward, back]) => {
            max += forward;
            return max - Math.min(back, windowMs);
          });
          const { out, buffer } = run(windowMs, times);
          const sorted = times
            .map((t, i) => ({ t, i }))
            .sort((a, b) => a.t - b.t || a.i - b.i)
            .map((x) => x.i);
          expect(out.map((o) => o.item)).toEqual(sorted);
          expect(out.every((o) => o.atMs === times[o.item])).toBe(true);
          expect(buffer.late).toBe(0);
        },
      ),
    );
  });

  test("property: release times never go back and every item comes out once", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.array(fc.integer({ min: 0, max: 500 })),
        (windowMs, times) => {
          const { out, buffer } = run(windowMs, times);
          expect(out.map((o) => o.item).sort((a, b) => a - b)).toEqual(times.map((_, i) => i));
          for (let i = 1; i < out.length; i++)
            expect(out[i]!.atMs).toBeGreaterThanOrEqual(out[i - 1]!.atMs);
          // A late item is decided at a time later than its own; an ordered one at its own.
          const moved = out.filter((o) => o.atMs !== times[o.item]).length;
          expect(moved).toBe(buffer.late);
          // Held items never trail the latest pushed time by more than the window.
          expect(buffer.peakSize).toBeLessThanOrEqual(times.length);
        },
      ),
    );
  });
});
