import { expect, describe as group, test } from "vitest";
import { checkCost, checkNumber, checkOptionNames, describe } from "../src/core/errors.js";

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
    { name: "plain function", value: function f() {}, text: "a function" },
    // A class given where an instance was meant (`allOf(TokenBucket, ...)`, `limiter:
    // TokenBucket`) read "a function", which did not say what was wrong.
    {
      name: "class",
      value: class TokenBucket {},
      text: "the class TokenBucket, not an instance (new TokenBucket({ ... }))",
    },
    // `rateLimit({ limiter: KeyedLimiter })` was told `new KeyedLimiter({ ... })`, which
    // fails next: a registry takes a limiter, not options.
    {
      name: "the registry class",
      value: class KeyedLimiter {},
      text: "the class KeyedLimiter, not an instance (new KeyedLimiter(new TokenBucket({ ... })))",
    },
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

group("checkOptionNames", () => {
  const known = ["maxKeys", "idleTimeoutMs", "clock"];
  test.each([
    {
      name: "a typo in case is named, with the option meant",
      options: { maxkeys: 10 },
      message:
        'X: unknown option "maxkeys" (did you mean "maxKeys"?); known options: maxKeys, idleTimeoutMs, clock',
    },
    {
      name: "a near misspelling (two edits) is named, with the option meant",
      options: { idleTimoutMs: 10 },
      message:
        'X: unknown option "idleTimoutMs" (did you mean "idleTimeoutMs"?); known options: maxKeys, idleTimeoutMs, clock',
    },
    {
      name: "a shortened name (the start of one option) is named, with the option meant",
      options: { idleTime: 10 },
      message:
        'X: unknown option "idleTime" (did you mean "idleTimeoutMs"?); known options: maxKeys, idleTimeoutMs, clock',
    },
    {
      name: "a peer's name gets the site's hint",
      options: { max: 5 },
      hints: { max: "use the limiter's limit or capacity" },
      message:
        'X: unknown option "max" (use the limiter\'s limit or capacity); known options: maxKeys, idleTimeoutMs, clock',
    },
    {
      name: "an unrelated name lists the known options only",
      options: { burst: 5 },
      message: 'X: unknown option "burst"; known options: maxKeys, idleTimeoutMs, clock',
    },
    {
      name: "an unknown option set to undefined is still an error",
      options: { clocks: undefined },
      message:
        'X: unknown option "clocks" (did you mean "clock"?); known options: maxKeys, idleTimeoutMs, clock',
    },
  ])("$name", ({ options, hints, message }) => {
    expect(() => checkOptionNames("X", options, known, hints)).toThrow(new TypeError(message));
  });

  test("an option inherited from a prototype is checked too (Object.keys missed it)", () => {
    const options = Object.assign(Object.create({ max: 3 }), { maxKeys: 2 });
    expect(() => checkOptionNames("X", options, known)).toThrow(
      new TypeError('X: unknown option "max"; known options: maxKeys, idleTimeoutMs, clock'),
    );
    const inherited = Object.create({ maxKeys: 3 });
    expect(checkOptionNames("X", inherited, known)).toBeUndefined();
  });

  test("known options pass, in any combination", () => {
    expect(checkOptionNames("X", {}, known)).toBeUndefined();
    expect(checkOptionNames("X", { maxKeys: 1, clock: () => 0 }, known)).toBeUndefined();
  });

  test("a short unknown name is not matched to a long option by edit distance", () => {
    expect(() => checkOptionNames("X", { ab: 1 }, ["a", "abcdef"])).toThrow(
      new TypeError('X: unknown option "ab"; known options: a, abcdef'),
    );
  });
});
