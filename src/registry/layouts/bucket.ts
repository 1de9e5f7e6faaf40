import { bucketDecision, tokensAfter, tokensAt } from "../../algorithms/bucket-math.js";
import type { Decision } from "../../limiter.js";
import { fits } from "../../numeric.js";
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

  usage(st: Float64Array, s: number, _slot: number, now: number): number {
    const p = this.params;
    return 1 - tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!) / p[CAPACITY]!;
  }

  /** A trace entry is the state itself, `[tokens, anchorMs]`: restored exactly. */
  readonly traceWidth = 2;

  traceValue(
    st: Float64Array,
    s: number,
    _slot: number,
    _now: number,
    out: Float64Array,
    o: number,
  ): void {
    out[o] = st[s]!;
    out[o + 1] = st[s + 1]!;
  }

  /**
   * Keeps the more used of the two states: the one full again later (every key shares one
   * capacity and rate, so that one has fewer tokens at every time until then); for a rate
   * of 0, the one with fewer tokens.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void {
    if (
      !(this.expiresAt(table[o]!, table[o + 1]!) > now) ||
      this.expiresAt(fresh[f]!, fresh[f + 1]!) > this.expiresAt(table[o]!, table[o + 1]!) ||
      (this.params[RATE] === 0 && fresh[f]! < table[o]!)
    ) {
      table[o] = fresh[f]!;
      table[o + 1] = fresh[f + 1]!;
    }
  }

  traceExpiresMs(table: Float64Array, o: number): number {
    return this.expiresAt(table[o]!, table[o + 1]!);
  }

  /** When the state `tokens` at `anchorMs` is full again (`-Infinity` for none, `Infinity` never). */
  private expiresAt(tokens: number, anchorMs: number): number {
    const p = this.params;
    if (anchorMs === Number.NEGATIVE_INFINITY || !(tokens < p[CAPACITY]!))
      return Number.NEGATIVE_INFINITY;
    if (p[RATE] === 0) return Number.POSITIVE_INFINITY;
    return anchorMs + ((p[CAPACITY]! - tokens) * 1000) / p[RATE]!;
  }

  /** The entry's state, as it was (fresh where it no longer applies). */
  restore(
    st: Float64Array,
    s: number,
    _slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    if (!(this.traceExpiresMs(table, o) > now)) {
      this.init(st, s);
      return;
    }
    st[s] = table[o]!;
    st[s + 1] = table[o + 1]!;
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
