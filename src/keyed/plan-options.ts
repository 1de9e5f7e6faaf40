import type { Limiter } from "../core/limiter.js";

/**
 * Per-key plans on the fast path of {@link KeyedLimiter}: a finite table of named
 * policies and a function from a key to the name of its plan.
 * @example
 * new KeyedLimiter({
 *   plans: {
 *     free: new TokenBucket({ capacity: 10, refillPerSecond: 1 }),
 *     pro: new TokenBucket({ capacity: 100, refillPerSecond: 10 }),
 *   },
 *   plan: (key) => (key.startsWith("pro:") ? "pro" : "free"),
 * })
 */
export interface KeyedPlans<Name extends string = string> {
  /**
   * The policy of each plan, by name (1 to 255 plans): built-in limiters of one algorithm
   * (or `allOf`s of the same algorithms in the same order) sharing one clock. Each plan's
   * keys copy its configuration; the limiters themselves are templates, never changed.
   */
  readonly plans: Readonly<Record<Name, Limiter>>;
  /**
   * The name of `key`'s plan, called when a key without state is used (at most once per
   * call); it must answer the same plan for a key every time it is asked. A name not in
   * `plans` is a `TypeError` for that call, which then changes nothing.
   */
  readonly plan: (key: string) => Name;
}
