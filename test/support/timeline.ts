import fc from "fast-check";
import { expect } from "vitest";
import type { Limiter } from "../../src/core/limiter.js";
import { manualClock } from "./manual-clock.js";
import type { Model } from "./models.js";

/** One call of a random timeline: move the clock by `dt` ms (maybe back), then call `op`. */
export interface Call {
  readonly dt: number;
  readonly cost: number;
  readonly op: "consume" | "peek" | "allow";
}

/** Integer limits and window lengths, small enough that windows are crossed often. */
export const windowParams = fc.record({
  limit: fc.integer({ min: 1, max: 12 }),
  windowMs: fc.integer({ min: 1, max: 1000 }),
});

/** Timelines of integer steps (clock moves back now and then) and integer costs up to 14. */
export const timeline = fc.array(
  fc.record({
    dt: fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 700 }) },
      { weight: 1, arbitrary: fc.integer({ min: -400, max: -1 }) },
    ),
    cost: fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 3 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 14 }) },
    ),
    op: fc.constantFrom<Call["op"]>("consume", "consume", "peek", "allow"),
  }),
  { maxLength: 100 },
);

/**
 * Replays `calls` against the limiter `make` builds and against `model`, expecting the
 * same decision at every step (`allow` compares only `allowed`). `retryClose` compares
 * `retryAfterMs` to a relative 1e-12 instead of exactly (for solved, non-integer times).
 */
export function expectSameAsModel(
  make: (clock: () => number) => Limiter,
  model: Model,
  calls: readonly Call[],
  retryClose = false,
): void {
  const clock = manualClock(0);
  const limiter = make(clock);
  calls.forEach(({ dt, cost, op }, i) => {
    clock.advance(dt);
    const where = `call ${i}: ${op}(${cost}) at ${clock()} ms`;
    const m = model(clock(), cost, op !== "peek");
    if (op === "allow") {
      expect(limiter.allow(cost), where).toBe(m.allowed);
      return;
    }
    const d = op === "peek" ? limiter.peek(cost) : limiter.consume(cost);
    if (retryClose && Number.isFinite(m.retryAfterMs)) {
      expect(d.retryAfterMs, where).toBeCloseTo(m.retryAfterMs, 9);
      expect({ ...d, retryAfterMs: 0 }, where).toEqual({
        ...m,
        retryAfterMs: 0,
        limit: d.limit,
      });
    } else {
      expect(d, where).toEqual({ ...m, limit: d.limit });
    }
  });
}

/** After every denied `consume`, `peek` answers as before it, for several costs. */
export function expectDenialChangesNothing(
  make: (clock: () => number) => Limiter,
  calls: readonly Call[],
): void {
  const clock = manualClock(0);
  const limiter = make(clock);
  for (const { dt, cost } of calls) {
    clock.advance(dt);
    const before = [0, 1, 2, 5].map((c) => limiter.peek(c));
    const idle = limiter.isIdle();
    if (!limiter.consume(cost).allowed) {
      expect([0, 1, 2, 5].map((c) => limiter.peek(c))).toEqual(before);
      expect(limiter.isIdle()).toBe(idle);
    }
  }
}

/** At every step, `peek(cost)` answers exactly what the `consume(cost)` right after it does. */
export function expectPeekPredictsConsume(
  make: (clock: () => number) => Limiter,
  calls: readonly Call[],
): void {
  const clock = manualClock(0);
  const limiter = make(clock);
  calls.forEach(({ dt, cost }, i) => {
    clock.advance(dt);
    const predicted = limiter.peek(cost);
    expect(limiter.consume(cost), `call ${i}: consume(${cost}) at ${clock()} ms`).toEqual(
      predicted,
    );
  });
}
