// tollgate/testing's manualClock: time moves only when told to; bad times are refused
// with the site, the name, the range and the value.
import { describe, expect, test } from "vitest";
import { TokenBucket } from "../src/index.js";
import { manualClock } from "../src/testing/index.js";

describe("manualClock", () => {
  test("reads what set and advance made it, backwards too", () => {
    const clock = manualClock(1000);
    expect([clock(), clock.nowMs]).toEqual([1000, 1000]);
    clock.advance(250);
    clock.advance(-50);
    expect(clock()).toBe(1200);
    clock.set(5);
    expect([clock(), clock.nowMs]).toEqual([5, 5]);
    expect(manualClock()()).toBe(0);
  });

  test("drives a limiter: the bucket decides at the times the test says", () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 1, clock });
    expect([bucket.allow(), bucket.allow()]).toEqual([true, false]);
    clock.advance(999);
    expect(bucket.allow()).toBe(false);
    clock.advance(1);
    expect(bucket.allow()).toBe(true);
  });

  test.each([
    {
      name: "startMs NaN",
      call: () => manualClock(Number.NaN),
      error: RangeError,
      message: "manualClock: startMs must be a finite number of milliseconds, got NaN",
    },
    {
      name: "startMs a string",
      call: () => manualClock("0" as never),
      error: TypeError,
      message: 'manualClock: startMs must be a finite number of milliseconds, got "0" (string)',
    },
    {
      name: "set(Infinity)",
      call: () => manualClock().set(Number.POSITIVE_INFINITY),
      error: RangeError,
      message: "ManualClock.set: ms must be a finite number of milliseconds, got Infinity",
    },
    {
      name: "advance(undefined)",
      call: () => manualClock().advance(undefined as never),
      error: TypeError,
      message: "ManualClock.advance: ms must be a finite number of milliseconds, got undefined",
    },
    {
      name: "advance past the largest double",
      call: () => manualClock(Number.MAX_VALUE).advance(Number.MAX_VALUE),
      error: RangeError,
      message:
        "ManualClock.advance: the time must be a finite number of milliseconds, got Infinity",
    },
  ])("$name: refused", ({ call, error, message }) => {
    expect(call).toThrow(error);
    expect(call).toThrow(new error(message));
  });
});
