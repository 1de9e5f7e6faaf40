import type { CloneableLimiter, Limiter } from "../../src/index.js";
import { KeyedLimiter } from "../../src/index.js";

/**
 * The bounds of a {@link KeyedLimiter}: how many keys, how many accounted bytes, how long a
 * key, how many pending waits, and what happens at the bound. Spelled out here so the
 * bound tests state every option they rely on by its public name.
 */
export interface BoundOptions {
  /** Most keys kept at once. */
  readonly maxKeys?: number;
  /** Most accounted bytes (keys at 2 bytes per UTF-16 code unit plus overhead, slots, logs). */
  readonly maxBytes?: number;
  /** Longest key, in UTF-16 code units (1..65536). */
  readonly maxKeyLength?: number;
  /** Most pending `wait` calls per registry. */
  readonly maxWaiters?: number;
  /** At the bound: drop idle keys first and trace the rest ("evict"), or deny new keys ("refuse"). */
  readonly whenFull?: "evict" | "refuse";
  /** Period of the quiet-period sweep, in milliseconds (`Infinity` for none). */
  readonly sweepIntervalMs?: number;
}

/** The counters of a bounded {@link KeyedLimiter}. */
export interface BoundStats {
  readonly created: number;
  readonly evictedIdle: number;
  readonly evictedLossy: number;
  readonly slots: number;
  /** Accounted bytes now. */
  readonly bytes: number;
  /** Requests of new keys refused while full (`whenFull: "refuse"`). */
  readonly refused: number;
  /** Keys that came back from a conservative trace (`whenFull: "evict"`). */
  readonly restored: number;
}

/** Default `maxBytes`: 256 MiB. */
export const DEFAULT_MAX_BYTES = 268_435_456;

/** No background timer: the tests drive every sweep themselves. */
export const NO_SWEEP = { sweepIntervalMs: Number.POSITIVE_INFINITY } as const;

/** `new KeyedLimiter(policy, options)` with the bound options by their public names. */
export function bounded(
  policy: CloneableLimiter | ((key: string) => Limiter),
  options: BoundOptions,
): KeyedLimiter {
  // Passed as a variable, not a literal: the options' type grows with the engine.
  const o: object = options;
  return new KeyedLimiter(policy, o);
}

/** The registry's counters, bytes, refused and restored included. */
export function statsOf(keyed: KeyedLimiter): BoundStats {
  return keyed.stats as unknown as BoundStats;
}

/**
 * The reference of the flood property: one `policy.clone()` per key in a plain Map that
 * never forgets, fed exactly the requests the bounded registry let through. Admitted
 * traffic is what a bound must keep within the policy: a bounded registry that denies
 * more (a conservative trace, a refused new key) must not make the reference spend
 * what the registry did not, or a later, correct decision would look like a leak.
 */
export class UnboundedReference {
  private readonly map = new Map<string, Limiter>();

  constructor(private readonly policy: CloneableLimiter) {}

  private limiterOf(key: string): Limiter {
    let limiter = this.map.get(key);
    if (limiter === undefined) {
      limiter = this.policy.clone();
      this.map.set(key, limiter);
    }
    return limiter;
  }

  /** What the unbounded policy would answer now for `key`; changes nothing. */
  wouldAllow(key: string, cost: number): boolean {
    return this.limiterOf(key).peek(cost).allowed;
  }

  /** Records a request the bounded registry let through; false when the policy denies it. */
  admit(key: string, cost: number): boolean {
    return this.limiterOf(key).consume(cost).allowed;
  }
}
