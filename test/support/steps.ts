import { expect } from "vitest";
import type { Decision, Limiter } from "../../src/core/limiter.js";
import { type ManualClock, manualClock } from "./manual-clock.js";

/**
 * One row of a Go-style step table: at `atMs`, `consume(cost)` answers `allowed`,
 * `remaining`, `retryAfterMs` and, when given, `resetAfterMs`.
 */
export type Step = readonly [
  atMs: number,
  cost: number,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
  resetAfterMs?: number,
];

/**
 * Runs `steps` against the limiter `make` builds on a manual clock, with the step index
 * in every failure message; returns the limiter and its clock for further checks.
 */
export function runSteps<L extends Limiter>(
  make: (clock: ManualClock) => L,
  steps: readonly Step[],
): { limiter: L; clock: ManualClock } {
  const clock = manualClock();
  const limiter = make(clock);
  steps.forEach(([atMs, cost, allowed, remaining, retryAfterMs, resetAfterMs], i) => {
    clock.set(atMs);
    const expected: Partial<Decision> = { allowed, remaining, retryAfterMs };
    if (resetAfterMs !== undefined) Object.assign(expected, { resetAfterMs });
    expect(limiter.consume(cost), `step ${i} at ${atMs} ms, cost ${cost}`).toMatchObject(expected);
  });
  return { limiter, clock };
}
