import { bucketDecision, tokensAfter, tokensAt } from "../../algorithms/bucket-math.js";
import type { Decision } from "../../limiter.js";
import { fits, TOLERANCE } from "../../numeric.js";
import type { SlotLayout } from "../layout.js";

/** Slot doubles: tokens (free room, for a leaky bucket), then anchorMs (the class's fields). */
const DOUBLES = 2;
/** `params` indexes: capacity, ratePerSecond. */
const CAPACITY = 0;
const RATE = 1;

/**
 * The slot of a `TokenBucket` or `LeakyBucket` key (as a meter a leaky bucket's free room
 * is a token bucket's tokens): `[tokens, anchorMs]`, decided by `bucket-math.ts` as the
 * classes are. A slot never used is `[capacity, -Infinity]` (full).
 * @internal
 */
export class BucketLayout implements SlotLayout {
  readonly doubles = DOUBLES;
  readonly keyExtraBytes = 0;
  readonly maxGrowthBytes = 0;
  readonly limit: number;
  /** @internal `[capacity, ratePerSecond]` as raw doubles: V8 keeps the arithmetic unboxed. */
  private readonly params: Float64Array;

  /** @param ratePerSecond `refillPerSecond` of a token bucket, `leakPerSecond` of a leaky one. */
  constructor(capacity: number, ratePerSecond: number) {
    this.params = new Float64Array([capacity, ratePerSecond]);
    this.limit = capacity;
  }

  init(st: Float64Array, s: number): void {
    st[s] = this.params[CAPACITY]!;
    st[s + 1] = Number.NEGATIVE_INFINITY;
  }

  isIdle(st: Float64Array, s: number, _slot: number, now: number): boolean {
    const p = this.params;
    return tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!) >= p[CAPACITY]!;
  }

  idleAtMs(st: Float64Array, s: number, _slot: number, now: number): number {
    const p = this.params;
    const missing = p[CAPACITY]! - tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (!(missing > 0)) return now;
    if (p[RATE] === 0) return Number.POSITIVE_INFINITY;
    const at = now + (missing * 1000) / p[RATE]!;
    return at + Math.abs(at) * 2 ** -50; // a few float steps later: never early
  }

  readonly traceWidth = 1;

  /**
   * The time the bucket is full again (a later one bounds an earlier one); for a rate of 0,
   * which is never full again, the tokens missing instead (more bounds fewer), for good.
   */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    const p = this.params;
    out[o] =
      p[RATE] === 0
        ? p[CAPACITY]! - tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, 0)
        : this.idleAtMs(st, s, slot, now);
  }

  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number): void {
    if (fresh[f]! > table[o]!) table[o] = fresh[f]!;
  }

  traceExpiresMs(table: Float64Array, o: number): number {
    if (this.params[RATE] !== 0) return table[o]!;
    return table[o]! > 0 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
  }

  /** Full again at the entry's time: the capacity less what refills until then. */
  restore(
    st: Float64Array,
    s: number,
    _slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    const value = table[o]!;
    const p = this.params;
    const capacity = p[CAPACITY]!;
    const rate = p[RATE]!;
    if (!(this.traceExpiresMs(table, o) > now)) {
      this.init(st, s);
      return;
    }
    // Made a hair smaller for the float error of the numbers, so never above what left.
    const missing =
      rate === 0
        ? value + Math.abs(value) * 2 ** -48
        : ((value - now) * rate) / 1000 + (Math.abs(value) * 2 ** -48 * rate) / 1000;
    const tokens = capacity - missing - capacity * TOLERANCE * TOLERANCE;
    st[s] = tokens < capacity ? tokens : capacity;
    st[s + 1] = now;
  }

  fitsAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    const p = this.params;
    return cost === 0 || fits(cost, tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!));
  }

  takeAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): void {
    const p = this.params;
    st[s] = tokensAfter(tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!), cost);
    st[s + 1] = now;
  }

  allowAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    const p = this.params;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (!fits(cost, tokens)) return cost === 0; // a free probe is allowed even in an overdraft
    if (cost > 0) {
      st[s] = tokensAfter(tokens, cost);
      st[s + 1] = now;
    }
    return true;
  }

  decideAt(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision {
    const p = this.params;
    const capacity = p[CAPACITY]!;
    const rate = p[RATE]!;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, capacity, rate);
    const decision = bucketDecision(cost, tokens, capacity, rate);
    if (take && decision.allowed && cost > 0) {
      st[s] = tokensAfter(tokens, cost);
      st[s + 1] = now;
    }
    return decision;
  }

  bind(): void {}

  release(): void {}

  grow(): void {}
}
