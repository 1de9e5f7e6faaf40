import { expect, describe as group, test } from "vitest";
import { checkCost, checkNumber, describe } from "../src/errors.js";

group("describe", () => {
  test.each([
    { name: "number", value: 0, text: "0" },
    { name: "negative zero", value: -0, text: "0" },
    { name: "NaN", value: Number.NaN, text: "NaN" },
    { name: "string", value: "10", text: '"10" (string)' },
    // Regression: a bigint read "1", as if it were the number 1 that the check accepts.
    { name: "bigint", value: 1n, text: "1n (bigint)" },
    { name: "null", value: null, text: "null" },
    { name: "undefined", value: undefined, text: "undefined" },
    { name: "function", value: () => 1, text: "a function" },
    { name: "array", value: [1], text: "an array" },
    { name: "object", value: { valueOf: () => 1 }, text: "an object" },
    { name: "boolean", value: true, text: "true (boolean)" },
    { name: "symbol", value: Symbol("s"), text: "Symbol(s) (symbol)" },
  ])("$name", ({ value, text }) => {
    expect(describe(value)).toBe(text);
  });
});

group("checks", () => {
  test("a bigint cost is a TypeError that says it was a bigint", () => {
    expect(() => checkCost("X", 1n)).toThrow(
      new TypeError("X: cost must be a finite number >= 0, got 1n (bigint)"),
    );
  });

  test("checkNumber names the inclusive and exclusive ranges", () => {
    expect(() => checkNumber("X", "a", 0, 0, false)).toThrow(
      new RangeError("X: a must be a finite number > 0, got 0"),
    );
    expect(() => checkNumber("X", "a", -1, 0, true)).toThrow(
      new RangeError("X: a must be a finite number >= 0, got -1"),
    );
    expect(checkNumber("X", "a", 0, 0, true)).toBe(0);
  });
});
