import { describe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";

/** Reads a number from a script reply: an integer, or a float sent as a `%.17g` string. */
export function replyNumber(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "string" || value instanceof Uint8Array) {
    const text = String(value);
    if (text === "inf") return Number.POSITIVE_INFINITY;
    if (text === "-inf") return Number.NEGATIVE_INFINITY;
    const n = Number(text);
    if (text !== "" && !Number.isNaN(n)) return n;
  }
  throw new TypeError(`unexpected reply element ${describe(value)}`);
}

/**
 * Reads the float a decision script sent as two integers, `value[at]` and `value[at + 1]`
 * (`luaFloats` in src/redis/lua/common.ts says how): the same double bit for bit.
 * @throws {TypeError} For elements that are not two such integers.
 */
export function replyFloat(value: readonly unknown[], at: number): number {
  const a = replyNumber(value[at]);
  const b = replyNumber(value[at + 1]);
  if (!Number.isSafeInteger(a) || !Number.isInteger(b) || b < 0 || b >= 67108864) {
    throw new TypeError(
      `unexpected reply float ${describe(value[at])}, ${describe(value[at + 1])}`,
    );
  }
  const biased = ((a % 4096) + 4096) % 4096;
  const mantissa = (((a - biased) / 4096) * 67108864 + b) / 9007199254740992;
  const e = biased - 1100;
  return e > 1023 ? mantissa * 2 * 2 ** (e - 1) : mantissa * 2 ** e;
}

/** The reply of a script as an array of at least `length` elements. */
export function replyArray(value: unknown, length: number): unknown[] {
  if (!Array.isArray(value) || value.length < length) {
    throw new TypeError(`unexpected reply ${describe(value)}`);
  }
  return value;
}

/**
 * Checks that the script's verdict equals the one recomputed in TypeScript from the
 * state it returned (they run the same arithmetic); a mismatch is a bug, reported as
 * a store failure rather than a silently inconsistent decision.
 * @throws {TypeError} When they disagree.
 */
export function checkAgreement(decision: Decision, allowed: unknown): Decision {
  if (decision.allowed !== (replyNumber(allowed) === 1)) {
    throw new TypeError(`script and decision disagree: script allowed=${String(allowed)}`);
  }
  return decision;
}
