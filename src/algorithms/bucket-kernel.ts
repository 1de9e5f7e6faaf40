import type { Decision } from "../core/limiter.js";
import { decisionMs, fits, retryNotEarly } from "../core/numeric.js";
import { BucketLedger } from "./bucket-ledger.js";
import { bucketDecision, msToRefill, retunedUnits, tokensAfter, tokensAt } from "./bucket-math.js";
import { DoublesKernel, type Kernel } from "./kernel.js";

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
 * initial units, `[initial, its first use]` (docs/semantics.md#initial-tokens). @internal
 */
export class BucketKernel extends DoublesKernel implements Kernel {
  readonly doubles = DOUBLES;

  /**
   * @param ratePerSecond `refillPerSecond` of a token bucket, `leakPerSecond` of a leaky one.
   * @param keepsLevel True for a leaky bucket: `reconfigure` keeps its level, not its free
   *   room (see `retunedUnits`).
   * @param initialUnits The units of a new key (`BucketBase.initialUnits`).
   */
  constructor(
    capacity: number,
    ratePerSecond: number,
    private readonly keepsLevel: boolean,
    initialUnits: number,
  ) {
    super([capacity, ratePerSecond, initialUnits]);
  }

  /** Tokens accrued up to now at the old rate, carried over by `retunedUnits`; full stays full. */
  retuneSlot(next: Kernel, st: Float64Array, s: number, _slot: number, now: number): void {
    const p = this.params;
    const q = (next as BucketKernel).params;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (tokens >= p[CAPACITY]!) {
      (next as BucketKernel).full(st, s);
      return;
    }
    st[s] = retunedUnits(tokens, p[CAPACITY]!, q[CAPACITY]!, this.keepsLevel);
    st[s + 1] = now;
  }

  /** An entry is a state: carried over as one (one that no longer applies is full: fresh). */
  override retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    if (table[o + 1] === Number.NEGATIVE_INFINITY) return;
    this.retuneSlot(next, table, o, -1, now);
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
    let decision = bucketDecision(cost, tokens, capacity, rate);
    if (!decision.allowed) {
      const units = st[s]!;
      const since = st[s + 1]!;
      const retryAfterMs = retryNotEarly(decision.retryAfterMs, now, (at) =>
        fits(cost, tokensAt(units, since, at, capacity, rate)),
      );
      decision = { ...decision, retryAfterMs };
    }
    if (take && decision.allowed && cost > 0) {
      st[s] = tokensAfter(tokens, cost);
      st[s + 1] = now;
    }
    return decision;
  }
}

/**
 * A bucket slot `[units, anchorMs]` with units held for pending waiters and reservations, and
 * their {@link BucketLedger} (this is its host): one for a bucket class's `wait`/`reserve`,
 * one per waiting key of a `KeyedLimiter` bucket policy, so both wait by the same rules.
 * Held units count as taken, yet the slot keeps its units as if they were not: the units
 * are `min(capacity + held, units + refill) - held`, so giving held units back restores the
 * balance bit for bit. With nothing held the slot is exactly the kernel's. @internal
 */
export abstract class HeldBucket {
  /** Units held for the ledger's entries (its total, up to float rounding). */
  held = 0;
  /** The pending waiters and reservations. */
  readonly ledger: BucketLedger;
  /** The capacity in force (read live: `reconfigure` changes it). */
  abstract readonly capacity: number;
  /** The rate in force, `refillPerSecond` or `leakPerSecond` (read live). */
  abstract readonly ratePerSecond: number;
  /** The doubles holding the slot, read at each use (an engine that grows replaces them). */
  protected abstract readonly st: Float64Array;
  /** The slot's offset in {@link st}. */
  protected abstract readonly s: number;
  /** Reads the clock (with the bucket's high-water mark). */
  abstract now(): number;

  /**
   * @param where `TokenBucket` or `LeakyBucket`, for messages.
   * @param shaping True for the leaky bucket's shaping: delay by the level, refuse when full.
   * @param sizeWord The word a fresh `wait` of the caller uses for a cost that can never fit,
   *   for the waiters `replan` refuses: `"capacity"` (a bucket's own `wait`) or `"limit"`
   *   (`KeyedLimiter.wait`).
   */
  constructor(
    readonly where: string,
    readonly shaping: boolean,
    readonly sizeWord: "capacity" | "limit" = "capacity",
  ) {
    this.ledger = new BucketLedger(this);
  }

  /** The stored units brought to `now`: the units plus the held ones, capped at capacity + held. */
  baseAt(now: number): number {
    const st = this.st;
    const s = this.s;
    return tokensAt(st[s]!, st[s + 1]!, now, this.capacity + this.held, this.ratePerSecond);
  }

  /** Units at `now`: tokens (may be negative while held) or free room. */
  unitsAt(now: number): number {
    return this.baseAt(now) - this.held;
  }

  /** @internal */
  private write(units: number, now: number): void {
    const st = this.st;
    const s = this.s;
    st[s] = units;
    st[s + 1] = now;
  }

  /** Takes `cost` at `now` (`units` then) for a request that may act at once, as `consume` does. */
  take(units: number, cost: number, now: number): void {
    this.write(tokensAfter(units, cost) + this.held, now);
  }

  /** Holds `units` more (negative: fewer; given back) at `now`. */
  hold(units: number, now: number): void {
    this.write(this.baseAt(now), now);
    this.held = units === -this.held ? 0 : this.held + units;
  }

  /** `units` held are spent at `now`: they stay taken, no longer held. */
  spend(units: number, now: number): void {
    this.write(this.baseAt(now) - units, now);
    this.held = units === this.held ? 0 : this.held - units;
  }

  /**
   * `consume` (`take`) or `peek` of `cost` at `now`: as the kernel decides, except that a
   * plain request behind a leaky bucket's shaping queue is denied until the queue is served
   * (a free probe, cost 0, is allowed in debt, as `bucketDecision` allows it).
   */
  decideAt(now: number, cost: number, take: boolean): Decision {
    const capacity = this.capacity;
    const rate = this.ratePerSecond;
    const units = this.unitsAt(now);
    if (this.shaping && this.held !== 0 && cost > 0 && this.ledger.blocks(units)) {
      const fitMs = fits(cost, capacity)
        ? msToRefill(cost - units, rate)
        : Number.POSITIVE_INFINITY;
      const servedMs = this.ledger.msUntilServed(units);
      return {
        allowed: false,
        limit: capacity,
        remaining: 0,
        retryAfterMs: decisionMs(fitMs > servedMs ? fitMs : servedMs),
        resetAfterMs: decisionMs(msToRefill(capacity - units, rate)),
      };
    }
    let decision = bucketDecision(cost, units, capacity, rate);
    if (!decision.allowed) {
      const retryAfterMs = retryNotEarly(decision.retryAfterMs, now, (at) =>
        fits(cost, this.unitsAt(at)),
      );
      decision = { ...decision, retryAfterMs };
    }
    if (take && decision.allowed && cost > 0) this.take(units, cost, now);
    return decision;
  }

  /**
   * Gives back `cost` (> 0) at `now`: the base rises by it, but never above `capacity`,
   * which is a fresh bucket whose waiters then took theirs (a refund repays their debt and
   * grants no one more than a fresh bucket would; a base already above it stays), nor past
   * the slack of a pending reservation ({@link BucketLedger.slack}). Waiters are then
   * served in order. Returns the units given back.
   */
  refundAt(now: number, cost: number): number {
    const slack = this.ledger.slack(this.unitsAt(now), now);
    const give = slack < cost ? (slack > 0 ? slack : 0) : cost;
    if (give === 0) return 0;
    const base = this.baseAt(now);
    const capacity = this.capacity;
    const up = base + give;
    const raised = up <= capacity ? up : base > capacity ? base : capacity;
    this.write(raised, now);
    this.ledger.serve();
    // All of it, unless the capacity cut it (then what was room, never a float step more).
    const rise = raised > base ? raised - base : 0;
    return raised === base + give || rise > give ? give : rise;
  }

  /**
   * `reconfigure` to `capacity` at `now`, before the numbers change (due entries settled first):
   * the units accrued at the old rate are carried over by `retunedUnits`, the held ones kept; a
   * full slot with nothing held stays full. Then `ledger.replan()`, once the new numbers are read.
   */
  retune(now: number, capacity: number): void {
    const held = this.held;
    const units = this.unitsAt(now);
    if (held === 0 && units >= this.capacity) this.write(capacity, Number.NEGATIVE_INFINITY);
    else this.write(retunedUnits(units, this.capacity, capacity, this.shaping) + held, now);
  }

  /**
   * Back to `units` at `now` (`-Infinity`: full for good until used, with nothing held): the
   * entries keep their units and place, and may be due sooner.
   */
  resetTo(units: number, now: number): void {
    this.write(units, now);
    if (this.held !== 0) this.ledger.reset(now);
  }
}
