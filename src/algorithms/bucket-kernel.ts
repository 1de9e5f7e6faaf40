import type { Decision } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import { bucketDecision, msToRefill, retunedUnits, tokensAfter, tokensAt } from "./bucket-math.js";
import { type Kernel, loadDoubles, saveDoubles } from "./kernel.js";

/** Slot doubles: tokens (free room, for a leaky bucket), then anchorMs (the class's fields). */
const DOUBLES = 2;
/** `params` indexes: capacity, ratePerSecond, the units of a new key. */
const CAPACITY = 0;
const RATE = 1;
const INITIAL = 2;

/**
 * The slot of a `TokenBucket` or `LeakyBucket` key (as a meter a leaky bucket's free room
 * is a token bucket's tokens): `[tokens, anchorMs]`, decided by `bucket-math.ts` as the
 * classes are. A full slot is `[capacity, -Infinity]`; a new key's is that, or, with fewer
 * initial units, `[initial, its first use]` (docs/semantics.md#initial-tokens).
 * @internal
 */
export class BucketKernel implements Kernel {
  readonly doubles = DOUBLES;
  readonly keyExtraBytes = 0;
  readonly maxGrowthBytes = 0;
  limit: number;
  /** @internal `[capacity, ratePerSecond, initial]` as raw doubles: V8 keeps the arithmetic unboxed. */
  private readonly params: Float64Array;
  /** @internal True for a leaky bucket: `reconfigure` keeps its level, not its free room. */
  private readonly keepsLevel: boolean;

  /**
   * @param ratePerSecond `refillPerSecond` of a token bucket, `leakPerSecond` of a leaky one.
   * @param keepsLevel True for a leaky bucket (see `retunedUnits`).
   * @param initialUnits The units of a new key: a token bucket's `initialTokens`, a leaky
   *   bucket's `capacity - initialLevel`.
   */
  constructor(
    capacity: number,
    ratePerSecond: number,
    keepsLevel = false,
    initialUnits = capacity,
  ) {
    this.params = new Float64Array([capacity, ratePerSecond, initialUnits]);
    this.limit = capacity;
    this.keepsLevel = keepsLevel;
  }

  /** Tokens accrued up to now at the old rate, carried over by `retunedUnits`; full stays full. */
  retuneSlot(next: Kernel, st: Float64Array, s: number, _slot: number, now: number): void {
    const p = this.params;
    const q = (next as BucketKernel).params;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (tokens >= p[CAPACITY]!) {
      st[s] = q[CAPACITY]!;
      st[s + 1] = Number.NEGATIVE_INFINITY;
      return;
    }
    st[s] = retunedUnits(tokens, p[CAPACITY]!, q[CAPACITY]!, this.keepsLevel);
    st[s + 1] = now;
  }

  /** An entry is a state: carried over as one (one that no longer applies is full: fresh). */
  retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    if (table[o + 1] === Number.NEGATIVE_INFINITY) return;
    this.retuneSlot(next, table, o, -1, now);
  }

  adopt(next: Kernel): void {
    this.params.set((next as BucketKernel).params);
    this.limit = next.limit;
  }

  /** A new key: full, or its initial units from now. */
  init(st: Float64Array, s: number, _slot: number, now: number): void {
    const p = this.params;
    if (p[INITIAL]! < p[CAPACITY]!) {
      st[s] = p[INITIAL]!;
      st[s + 1] = now;
    } else this.full(st, s);
  }

  /** @internal The full state: nothing to remember. */
  private full(st: Float64Array, s: number): void {
    st[s] = this.params[CAPACITY]!;
    st[s + 1] = Number.NEGATIVE_INFINITY;
  }

  isIdle(st: Float64Array, s: number, _slot: number, now: number): boolean {
    const p = this.params;
    return tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!) >= p[CAPACITY]!;
  }

  idleAtMs(st: Float64Array, s: number, _slot: number, now: number): number {
    const at = this.expiresAt(st[s]!, st[s + 1]!);
    return at > now ? at : now;
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
   * Keeps the more used of the two states: the one with fewer tokens now (every key shares
   * one capacity and rate, so it has fewer at every time until both are full). Compared at
   * now, not by the time each is full, which a large clock can round to one value.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void {
    const p = this.params;
    const kept = tokensAt(table[o]!, table[o + 1]!, now, p[CAPACITY]!, p[RATE]!);
    const joining = tokensAt(fresh[f]!, fresh[f + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (joining < kept) {
      table[o] = fresh[f]!;
      table[o + 1] = fresh[f + 1]!;
    }
  }

  traceApplies(table: Float64Array, o: number, now: number): boolean {
    const p = this.params;
    return tokensAt(table[o]!, table[o + 1]!, now, p[CAPACITY]!, p[RATE]!) < p[CAPACITY]!;
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
    const at = anchorMs + ((p[CAPACITY]! - tokens) * 1000) / p[RATE]!;
    // A few float steps later: where the refill time is below the clock's float step the
    // sum rounds back to the anchor, and the entry would stop applying too soon.
    return at + Math.abs(at) * 2 ** -50 + Number.MIN_VALUE;
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
    if (!this.traceApplies(table, o, now)) {
      this.init(st, s, _slot, now);
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

  /** `min(capacity, tokens + cost)`, as `TokenBucket.refund`; a full bucket is written full. */
  refundAt(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number {
    const p = this.params;
    const capacity = p[CAPACITY]!;
    const before = tokensAt(st[s]!, st[s + 1]!, now, capacity, p[RATE]!);
    const tokens = before + cost;
    let got = cost;
    if (tokens >= capacity) {
      this.full(st, s);
      const room = capacity > before ? capacity - before : 0;
      if (room < cost) got = room;
    } else {
      st[s] = tokens;
      st[s + 1] = now;
    }
    given[o] = got;
    return got;
  }

  readonly refundsWithoutReceipt = true;
  readonly leafCount = 1;

  /** When the bucket is full again with no further traffic: its refill repays the charge by then. */
  markReceipt(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    marks: Float64Array,
    o: number,
  ): number {
    const p = this.params;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    const fullAt = now + msToRefill(p[CAPACITY]! - tokens, p[RATE]!);
    marks[o] = fullAt;
    return fullAt;
  }

  /** As `TokenBucket.refund(receipt)`: at most the refill not yet repaid, less later credits. */
  refundMarkedAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    asked: Float64Array,
    creditSince: number,
    given: Float64Array,
    o: number,
  ): number {
    const give = this.receiptBound(marks[o]!, now, asked[o]!, creditSince);
    given[o] = 0;
    return give > 0 ? this.refundAt(st, s, slot, now, give, given, o) : 0;
  }

  /**
   * What a receipt whose bucket is full again at `fullAt` may give back at `now` of `asked`
   * units: at most `rate * (fullAt - now)`, less `creditSince`; all of it at a rate of 0.
   */
  receiptBound(fullAt: number, now: number, asked: number, creditSince: number): number {
    const rate = this.params[RATE]!;
    if (rate === 0) return asked;
    const bound = ((fullAt - now) * rate) / 1000 - creditSince;
    return bound < asked ? bound : asked;
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

  get savedWidth(): number {
    return this.doubles;
  }

  saveSlot(st: Float64Array, s: number, _slot?: number): number[] {
    return saveDoubles(st, s, this.doubles);
  }

  loadSlot(st: Float64Array, s: number, _slot: number, values: readonly number[]): void {
    loadDoubles(st, s, this.doubles, values);
  }

  bind(): void {}

  release(): void {}

  grow(): void {}
}
