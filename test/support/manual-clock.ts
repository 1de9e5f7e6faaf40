/** A clock for tests: time moves only when told to. */
export interface ManualClock {
  (): number;
  /** Sets the time in ms (it may go backwards, to test that limiters cope). */
  set(ms: number): void;
  /** Moves the time forward (or back, for a negative `ms`). */
  advance(ms: number): void;
}

/** A {@link ManualClock} starting at `startMs`. */
export function manualClock(startMs = 0): ManualClock {
  let now = startMs;
  const clock = (() => now) as ManualClock;
  clock.set = (ms) => {
    now = ms;
  };
  clock.advance = (ms) => {
    now += ms;
  };
  return clock;
}
