import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { DistinctEstimate } from "../../src/cli/distinct.js";
import { ClientTally } from "../../src/cli/tally.js";

/** One request: key, minute, denials per policy (two policies). */
type Request = readonly [key: string, minute: number, denied: readonly [0 | 1, 0 | 1]];

/** The reference: plain per-key counters, unbounded. */
function reference(requests: readonly Request[]) {
  const keys = new Map<string, { requests: number; peak: number; denied: number[] }>();
  const perMinute = new Map<string, number>();
  for (const [key, minute, denied] of requests) {
    const k = keys.get(key) ?? { requests: 0, peak: 0, denied: [0, 0] };
    k.requests++;
    const m = `${key} ${minute}`;
    const inMinute = (perMinute.get(m) ?? 0) + 1;
    perMinute.set(m, inMinute);
    k.peak = Math.max(k.peak, inMinute);
    k.denied[0]! += denied[0];
    k.denied[1]! += denied[1];
    keys.set(key, k);
  }
  return keys;
}

const requestArb = fc.tuple(
  fc.constantFrom("a", "b", "c", "d", "e", "192.0.2.100", "2001:db8::1"),
  fc.integer({ min: 0, max: 4 }),
  fc.tuple(fc.constantFrom<0 | 1>(0, 1), fc.constantFrom<0 | 1>(0, 1)),
);

function run(tally: ClientTally, requests: readonly Request[]): void {
  // Minutes never go back in a replay (the reorder window orders them).
  const sorted = [...requests].sort((x, y) => x[1] - y[1]);
  for (const [key, minute, denied] of sorted) tally.count(key, minute, Uint8Array.from(denied));
}

describe("ClientTally", () => {
  test("within its capacity it is exact: the reference model's counts", () => {
    fc.assert(
      fc.property(fc.array(requestArb, { maxLength: 200 }), (requests) => {
        const sorted = [...requests].sort((x, y) => x[1] - y[1]);
        const tally = new ClientTally(100, 2);
        run(tally, sorted);
        const want = reference(sorted);
        expect(tally.distinct).toBe(want.size);
        expect(tally.distinctExact).toBe(true);
        expect(tally.untallied).toBe(0);
        const top = tally.top(100);
        const denied = [...want].filter(([, k]) => k.denied[0]! + k.denied[1]! > 0);
        expect(top.map((k) => k.key).sort()).toEqual(denied.map(([key]) => key).sort());
        for (const k of top) {
          const w = want.get(k.key)!;
          expect(k).toEqual({
            key: k.key,
            requests: w.requests,
            peakPerMinute: w.peak,
            denied: w.denied,
            approximate: false,
            deniedErrorMax: 0,
          });
        }
      }),
    );
  });

  test("the top list is ordered by denials of the first policy, then of all", () => {
    const tally = new ClientTally(10, 2);
    tally.count("x", 0, Uint8Array.of(0, 1));
    tally.count("x", 0, Uint8Array.of(0, 1));
    tally.count("y", 0, Uint8Array.of(1, 0));
    tally.count("z", 0, Uint8Array.of(0, 0));
    expect(tally.top(10).map((k) => k.key)).toEqual(["y", "x"]);
    expect(tally.top(1).map((k) => k.key)).toEqual(["y"]);
    expect(tally.top(0)).toEqual([]);
  });

  test("clients beyond the bound do not grow memory: at most capacity keys are held", () => {
    const tally = new ClientTally(100, 1);
    const none = Uint8Array.of(0);
    const denied = Uint8Array.of(1);
    for (let i = 0; i < 20_000; i++) {
      tally.count(`client-${i}`, 0, i % 3 === 0 ? denied : none);
      // One heavy client, denied every tenth request.
      tally.count("heavy", 0, i % 10 === 0 ? denied : none);
    }
    expect(tally.size).toBe(100);
    expect(tally.distinctExact).toBe(false);
    expect(tally.untallied).toBeGreaterThan(0);
    // Space-Saving: a client with more denials than (all denials) / capacity is held, and
    // its true denials lie within [denied, denied + error].
    const [top] = tally.top(1);
    expect(top!.key).toBe("heavy");
    expect(top!.denied[0]!).toBeLessThanOrEqual(2000);
    expect(top!.denied[0]! + top!.deniedErrorMax).toBeGreaterThanOrEqual(2000);
  });

  test("beyond the bound, a held key's true denials lie in [denied, denied + error]", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.constantFrom<0 | 1>(0, 1, 1)), {
          maxLength: 400,
        }),
        (stream) => {
          const tally = new ClientTally(8, 1);
          const truth = new Map<string, number>();
          for (const [k, d] of stream) {
            tally.count(`k${k}`, 0, Uint8Array.of(d));
            truth.set(`k${k}`, (truth.get(`k${k}`) ?? 0) + d);
          }
          expect(tally.size).toBeLessThanOrEqual(8);
          for (const k of tally.top(8)) {
            const t = truth.get(k.key)!;
            expect(k.denied[0]!).toBeLessThanOrEqual(t);
            expect(k.denied[0]! + k.deniedErrorMax).toBeGreaterThanOrEqual(t);
          }
        },
      ),
    );
  });

  test("a capacity that is not an integer >= 1 is refused", () => {
    expect(() => new ClientTally(0, 1)).toThrow(
      "ClientTally: capacity must be an integer >= 1, got 0",
    );
    expect(() => new ClientTally(1.5, 1)).toThrow(RangeError);
  });
});

describe("DistinctEstimate", () => {
  test.each([0, 1, 10, 1000, 50_000])("%i distinct strings: within 3%", (n) => {
    const e = new DistinctEstimate();
    for (let i = 0; i < n; i++) {
      e.add(`100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`);
      e.add(`100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`); // repeats count once
    }
    expect(Math.abs(e.estimate() - n)).toBeLessThanOrEqual(Math.max(1, n * 0.03));
  });
});
