import { describe, expect, test } from "vitest";
import type { Clock, Limiter } from "../../src/core/limiter.js";

/**
 * The validation tables every algorithm shares: a bad cost for `allow`/`consume`/`peek`
 * and a bad clock reading, each asserting the class and the full message. `make`
 * builds a valid limiter of the class named `where` on the given clock.
 */
export function describeSharedValidation(where: string, make: (clock: Clock) => Limiter): void {
  describe(`${where} cost and clock validation`, () => {
    const limiter = make(() => 0);
    test.each([
      { name: "string cost", cost: "1", error: TypeError, got: '"1" (string)' },
      { name: "null cost", cost: null, error: TypeError, got: "null" },
      { name: "boolean cost", cost: true, error: TypeError, got: "true (boolean)" },
      { name: "NaN cost", cost: Number.NaN, error: RangeError, got: "NaN" },
      { name: "negative cost", cost: -1, error: RangeError, got: "-1" },
      { name: "infinite cost", cost: Number.POSITIVE_INFINITY, error: RangeError, got: "Infinity" },
    ])("$name", ({ cost, error, got }) => {
      const message = `${where}: cost must be a finite number >= 0, got ${got}`;
      for (const method of ["allow", "consume", "peek"] as const) {
        const call = () => limiter[method](cost as never);
        expect(call, method).toThrow(error);
        expect(call, method).toThrow(message);
      }
      expect(limiter.isIdle()).toBe(true);
    });

    test.each([
      { name: "NaN reading", reading: Number.NaN, error: RangeError, got: "NaN" },
      { name: "string reading", reading: "5", error: TypeError, got: '"5" (string)' },
      {
        name: "infinite reading",
        reading: Number.POSITIVE_INFINITY,
        error: RangeError,
        got: "Infinity",
      },
      { name: "undefined reading", reading: undefined, error: TypeError, got: "undefined" },
    ])("a clock returning a $name is an error, not a NaN decision", ({ reading, error, got }) => {
      const message = `${where}: clock must return a finite number of milliseconds, got ${got}`;
      const bad = make(() => reading as number);
      for (const call of [() => bad.allow(), () => bad.consume(), () => bad.peek()]) {
        expect(call).toThrow(error);
        expect(call).toThrow(message);
      }
    });
  });
}

/** One row of a constructor validation table. */
export interface OptionCase {
  readonly name: string;
  readonly options: unknown;
  readonly error: typeof TypeError | typeof RangeError;
  readonly message: string;
}

/**
 * The constructor validation table of a window algorithm (options `limit`, `windowMs`,
 * `clock`), in the order the options are listed.
 */
export function windowOptionCases(where: string): OptionCase[] {
  const base = { limit: 1, windowMs: 1000 };
  const gt0 = "must be a finite number > 0, got";
  return [
    {
      name: "no options",
      options: undefined,
      error: TypeError,
      message: `${where}: options must be an object, got undefined`,
    },
    {
      name: "null options",
      options: null,
      error: TypeError,
      message: `${where}: options must be an object, got null`,
    },
    {
      name: "array options",
      options: [],
      error: TypeError,
      message: `${where}: options must be an object, got an array`,
    },
    {
      name: "number options",
      options: 5,
      error: TypeError,
      message: `${where}: options must be an object, got 5`,
    },
    {
      name: "limit missing",
      options: { windowMs: 1000 },
      error: TypeError,
      message: `${where}: missing option "limit"; for example: new ${where}({ limit: 100, windowMs: 60_000 })`,
    },
    {
      name: "limit string",
      options: { ...base, limit: "10" },
      error: TypeError,
      message: `${where}: limit ${gt0} "10" (string)`,
    },
    {
      name: "limit 0",
      options: { ...base, limit: 0 },
      error: RangeError,
      message: `${where}: limit ${gt0} 0`,
    },
    {
      name: "limit negative",
      options: { ...base, limit: -3 },
      error: RangeError,
      message: `${where}: limit ${gt0} -3`,
    },
    {
      name: "limit NaN",
      options: { ...base, limit: Number.NaN },
      error: RangeError,
      message: `${where}: limit ${gt0} NaN`,
    },
    {
      name: "limit Infinity",
      options: { ...base, limit: Number.POSITIVE_INFINITY },
      error: RangeError,
      message: `${where}: limit ${gt0} Infinity`,
    },
    {
      name: "windowMs missing",
      options: { limit: 1 },
      error: TypeError,
      message: `${where}: missing option "windowMs"; for example: new ${where}({ limit: 100, windowMs: 60_000 })`,
    },
    {
      name: "windowMs string",
      options: { ...base, windowMs: "1s" },
      error: TypeError,
      message: `${where}: windowMs ${gt0} "1s" (string)`,
    },
    {
      name: "windowMs 0",
      options: { ...base, windowMs: 0 },
      error: RangeError,
      message: `${where}: windowMs ${gt0} 0`,
    },
    {
      name: "windowMs negative",
      options: { ...base, windowMs: -1000 },
      error: RangeError,
      message: `${where}: windowMs ${gt0} -1000`,
    },
    {
      name: "windowMs NaN",
      options: { ...base, windowMs: Number.NaN },
      error: RangeError,
      message: `${where}: windowMs ${gt0} NaN`,
    },
    {
      name: "windowMs Infinity",
      options: { ...base, windowMs: Number.POSITIVE_INFINITY },
      error: RangeError,
      message: `${where}: windowMs ${gt0} Infinity`,
    },
    {
      name: "clock not a function",
      options: { ...base, clock: 5 },
      error: TypeError,
      message: `${where}: clock must be a function returning milliseconds, got 5`,
    },
    {
      name: "clock an object",
      options: { ...base, clock: {} },
      error: TypeError,
      message: `${where}: clock must be a function returning milliseconds, got an object`,
    },
    {
      name: "first problem wins",
      options: { limit: 0, windowMs: -1, clock: 5 },
      error: RangeError,
      message: `${where}: limit ${gt0} 0`,
    },
    {
      name: "windowMs before clock",
      options: { limit: 1, windowMs: "x", clock: 5 },
      error: TypeError,
      message: `${where}: windowMs ${gt0} "x" (string)`,
    },
  ];
}
