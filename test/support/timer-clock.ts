import { vi } from "vitest";
import type { Clock } from "../../src/core/limiter.js";

/**
 * Fake `setTimeout`/`clearTimeout` (vitest) and a manual clock that moves with them: the
 * clock reads the fake timers' own time, so a timer firing inside `advance(ms)` sees the
 * clock at its exact due time (a manual clock set to the end of the step first would let
 * it see a later time). Starts at 0. Call `vi.useRealTimers()` after the test.
 */
export function timerClock(): { clock: Clock; advance(ms: number): Promise<void> } {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"], now: 0 });
  return {
    clock: () => vi.getMockedSystemTime()!.getTime(),
    advance: async (ms) => {
      await vi.advanceTimersByTimeAsync(ms);
    },
  };
}

/** Records when (clock time) each labelled promise settled, and how. */
export function settleLog(clock: Clock) {
  const log: string[] = [];
  return {
    log,
    track<T>(label: string, promise: Promise<T>): Promise<void> {
      return promise.then(
        () => {
          log.push(`${label}@${clock()}`);
        },
        (error: unknown) => {
          log.push(`${label}!${(error as Error)?.name ?? String(error)}@${clock()}`);
        },
      );
    },
  };
}
