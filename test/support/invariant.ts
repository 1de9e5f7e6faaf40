import { burstBeyondBound } from "./reservation-timeline.js";

/**
 * The reference model of the invariant every limiter shares, whatever features meet
 * (docs/semantics.md#the-shared-invariant): over any interval, the units admitted and still
 * counted never exceed the policy's bound. An admitted request is an act (`atMs`, `units`);
 * a refund through a receipt takes units off its own act (the act did not count, as far as
 * it gave back); a refund without a receipt is a negative act when it is made.
 * @module
 */

/** One policy: a bucket, or a window of one of the three kinds. */
export type Policy =
  | { readonly kind: "bucket"; readonly capacity: number; readonly ratePerSecond: number }
  | {
      readonly kind: "fixed" | "log" | "counter";
      readonly limit: number;
      readonly windowMs: number;
    };

/** Units admitted at `atMs`, less what refunds through its receipt gave back. */
export interface Act {
  readonly atMs: number;
  units: number;
}

const EPS = 1e-9;

/**
 * The first breach of `policy`'s bound by `acts` (in any order), or undefined:
 * - a bucket: over any interval of d ms, at most `capacity + rate * d` (the burst bound);
 * - a fixed window or a counter: per window `[kW, (k+1)W)`, at most `limit` (the counter's
 *   estimate is at least its current window's count);
 * - a sliding log: over any `(t - W, t]`, at most `limit`.
 * A policy that `reconfigure` changed is checked with the largest numbers it had.
 */
export function breach(policy: Policy, acts: readonly Act[]): string | undefined {
  const sorted = [...acts].filter((a) => a.units !== 0).sort((a, b) => a.atMs - b.atMs);
  if (policy.kind === "bucket") {
    const burst = burstBeyondBound(
      sorted.map((a) => ({ atMs: a.atMs, units: a.units, what: "" })),
      policy.capacity,
      policy.ratePerSecond,
    );
    return burst === undefined ? undefined : `bucket: ${JSON.stringify(burst)}`;
  }
  const { limit, windowMs } = policy;
  if (policy.kind === "log") {
    for (const end of sorted) {
      let sum = 0;
      for (const a of sorted)
        if (a.atMs > end.atMs - windowMs && a.atMs <= end.atMs) sum += a.units;
      if (sum > limit + EPS * Math.max(1, limit)) {
        return `log: (${end.atMs - windowMs}, ${end.atMs}] holds ${sum} > ${limit}`;
      }
    }
    return undefined;
  }
  const sums = new Map<number, number>();
  for (const a of sorted) {
    const k = Math.floor(a.atMs / windowMs);
    sums.set(k, (sums.get(k) ?? 0) + a.units);
  }
  for (const [k, sum] of sums) {
    if (sum > limit + EPS * Math.max(1, limit))
      return `${policy.kind}: window ${k} holds ${sum} > ${limit}`;
  }
  return undefined;
}

/** `policy` with its size (and rate) at least `other`'s: the bound over a `reconfigure`. */
export function widest(policy: Policy, other: Policy): Policy {
  if (policy.kind === "bucket" && other.kind === "bucket") {
    return {
      kind: "bucket",
      capacity: Math.max(policy.capacity, other.capacity),
      ratePerSecond: Math.max(policy.ratePerSecond, other.ratePerSecond),
    };
  }
  if (policy.kind !== "bucket" && other.kind !== "bucket") {
    return { ...policy, limit: Math.max(policy.limit, other.limit) };
  }
  throw new TypeError("widest: two kinds of policy");
}
