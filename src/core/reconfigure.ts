import { checkOptionNames, checkOptions, hasMethods } from "./errors.js";

/**
 * The shared rules of `reconfigure`: which options may change (the algorithm's numbers,
 * never the clock), how they are checked (the constructor's messages, unknown names are a
 * `TypeError`), and the two-step shape that lets `allOf` and `KeyedLimiter` check every
 * part before changing any: `plan` checks and reads the clock, the returned `apply` cannot
 * throw. See docs/semantics.md#changing-limits-live. @module
 */

/** Applies a checked reconfiguration; never throws. */
export type ApplyReconfigure = () => void;

/** A limiter whose options can change live, in two steps (check, then apply). Internal. */
export interface Reconfigurable {
  /**
   * Checks `options` against the current ones and reads the clock; returns what applies
   * them at that reading. Throws, changing nothing, for a bad option. @internal
   */
  planReconfigure(options: unknown): ApplyReconfigure;
}

/** True when `limiter` can plan a reconfiguration (a built-in algorithm or an `allOf`). */
export function isReconfigurable(limiter: unknown): limiter is Reconfigurable {
  return hasMethods(limiter, "planReconfigure");
}

/** Why `clock` is refused: readings of two clocks cannot be compared. */
const CLOCK_HINT =
  "the clock cannot change: readings of two clocks do not compare; make a new limiter";

/**
 * Checks the options of `Where.reconfigure`: an object naming only `known` (the
 * constructor's names less `clock`); `hints` as the constructor's.
 * @throws {TypeError} If `options` is not an object or names an unknown option (`clock` included).
 */
export function checkReconfigureOptions<T extends object>(
  where: string,
  options: unknown,
  known: readonly string[],
  hints: Readonly<Record<string, string>>,
): Partial<T> {
  const at = `${where}.reconfigure`;
  const o = checkOptions<Partial<T>>(at, options);
  const names = known.filter((name) => name !== "clock");
  checkOptionNames(at, o, names, { ...hints, clock: CLOCK_HINT });
  return o;
}
