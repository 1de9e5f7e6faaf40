import type { Decision } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import { DoublesKernel, type Kernel } from "./kernel.js";
import { windowIndex } from "./time.js";
import {
  counterDecision,
  counterEstimate,
  counterRefundCurr,
  counterRefundPrev,
  counterRetuned,
  counterRolledPrev,
} from "./window-math.js";

/** `params` indexes: limit, windowMs. */
const LIMIT = 0;
const WINDOW_MS = 1;

/**
 * The slot of a `SlidingWindowCounter` key: `[prev, curr, index]` (the counts of windows
 * `index - 1` and `index`), rolled to the window holding now as the class rolls itself
 * (`counterRolledPrev`; a roll changes no decision) and decided by `counterEstimate` and
 * `counterDecision`, as the class is. @internal
 */
export class SlidingWindowCounterKernel extends DoublesKernel implements Kernel {
  readonly doubles = 3;

  constructor(limit: number, windowMs: number) {
    super([limit, windowMs], [0, 1]);
  }

  /** Rolled to now, then carried over by `counterRetuned` (fresh if the estimate is 0). */
  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void {
    this.roll(st, s, now);
    const windowMs = (next as SlidingWindowCounterKernel).params[WINDOW_MS]!;
    const [prev, curr, index] = counterRetuned(
      st[s]!,
      st[s + 1]!,
      st[s + 2]!,
      now,
      this.params[WINDOW_MS]!,
      windowMs,
    );
    if (index === Number.NEGATIVE_INFINITY) {
      next.init(st, s, slot, now);
      return;
    }
    st[s] = prev;
    st[s + 1] = curr;
    st[s + 2] = index;
  }

  /** An entry is a state: rolled and carried over as one; one that no longer applies is cleared. */
  override retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    if (!this.traceApplies(table, o, now)) {
      table[o] = 0;
      table[o + 1] = 0;
      table[o + 2] = Number.NEGATIVE_INFINITY;
      return;
    }
    this.retuneSlot(next, table, o, -1, now);
    if (table[o] === 0 && table[o + 1] === 0) table[o + 2] = Number.NEGATIVE_INFINITY;
  }

  /** @internal Rolls the slot at `s` to the window holding `now`. */
  protected override roll(st: Float64Array, s: number, now: number): void {
    const windowMs = this.params[WINDOW_MS]!;
    const index = st[s + 2]!;
    if (now < (index + 1) * windowMs) return;
    const k = windowIndex(now, windowMs);
    st[s] = counterRolledPrev(index, st[s + 1]!, k);
    st[s + 1] = 0;
    st[s + 2] = k;
  }

  /** @internal The slot's estimate at `now`, rolled. */
  private estimate(st: Float64Array, s: number, now: number): number {
    this.roll(st, s, now);
    const windowMs = this.params[WINDOW_MS]!;
    return counterEstimate(st[s]!, st[s + 1]!, (st[s + 2]! + 1) * windowMs, now, windowMs);
  }

  init(st: Float64Array, s: number, _slot: number, now: number): void {
    st[s] = 0;
    st[s + 1] = 0;
    st[s + 2] = windowIndex(now, this.params[WINDOW_MS]!);
  }

  isIdle(st: Float64Array, s: number, _slot: number, now: number): boolean {
    this.roll(st, s, now);
    return st[s] === 0 && st[s + 1] === 0;
  }

  idleAtMs(st: Float64Array, s: number, _slot: number, now: number): number {
    this.roll(st, s, now);
    const windowMs = this.params[WINDOW_MS]!;
    const endMs = (st[s + 2]! + 1) * windowMs;
    if (st[s + 1]! > 0) return endMs + windowMs;
    return st[s]! > 0 ? endMs : now;
  }

  /** The estimate, as a share of `limit`. */
  usage(st: Float64Array, s: number, _slot: number, now: number): number {
    return this.estimate(st, s, now) / this.params[LIMIT]!;
  }

  /**
   * Both states rolled to the later one's window, then the larger of each count: the
   * previous count of a state one window behind is its current one; further behind, nothing.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number): void {
    if (table[o + 2] === Number.NEGATIVE_INFINITY) {
      table[o] = fresh[f]!;
      table[o + 1] = fresh[f + 1]!;
      table[o + 2] = fresh[f + 2]!;
      return;
    }
    const k = table[o + 2]! > fresh[f + 2]! ? table[o + 2]! : fresh[f + 2]!;
    const prev = Math.max(rolledPrev(table, o, k), rolledPrev(fresh, f, k));
    const curr = Math.max(
      table[o + 2] === k ? table[o + 1]! : 0,
      fresh[f + 2] === k ? fresh[f + 1]! : 0,
    );
    table[o] = prev;
    table[o + 1] = curr;
    table[o + 2] = k;
  }

  traceApplies(table: Float64Array, o: number, now: number): boolean {
    return this.traceExpiresMs(table, o) > now;
  }

  /** The end of the window by which both counts have rolled out. */
  traceExpiresMs(table: Float64Array, o: number): number {
    const k = table[o + 2]!;
    if (k === Number.NEGATIVE_INFINITY) return k;
    const windowMs = this.params[WINDOW_MS]!;
    if (table[o + 1]! > 0) return (k + 2) * windowMs;
    return table[o]! > 0 ? (k + 1) * windowMs : Number.NEGATIVE_INFINITY;
  }

  fitsAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    return cost === 0 || fits(cost, this.params[LIMIT]! - this.estimate(st, s, now));
  }

  takeAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): void {
    this.roll(st, s, now);
    st[s + 1] = st[s + 1]! + cost;
  }

  /** From the current count first, then the previous, as `SlidingWindowCounter.refund`. */
  refundAt(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number {
    this.roll(st, s, now);
    const curr = st[s + 1]!;
    const before = st[s]! + curr;
    st[s] = counterRefundPrev(st[s]!, curr, cost);
    st[s + 1] = counterRefundCurr(curr, cost);
    given[o] = before - (st[s]! + st[s + 1]!);
    return 0;
  }

  /** The index of the window charged; it gives back until the end of the next one. */
  markReceipt(
    st: Float64Array,
    s: number,
    _slot: number,
    _now: number,
    marks: Float64Array,
    o: number,
  ): number {
    marks[o] = st[s + 2]!;
    return (st[s + 2]! + 2) * this.params[WINDOW_MS]!;
  }

  /** As `SlidingWindowCounter.refund(receipt)`: from its window's count, current or previous. */
  refundMarkedAt(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    marks: Float64Array,
    asked: Float64Array,
    _creditSince: number,
    given: Float64Array,
    o: number,
  ): number {
    this.roll(st, s, now);
    const index = st[s + 2]!;
    const at = index === marks[o] ? s + 1 : index === marks[o]! + 1 ? s : -1;
    if (at < 0) {
      given[o] = 0;
      return 0;
    }
    const count = st[at]!;
    const give = asked[o]! < count ? asked[o]! : count;
    st[at] = count - give;
    given[o] = give;
    return 0;
  }

  allowAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    if (cost === 0) return true;
    if (!fits(cost, this.params[LIMIT]! - this.estimate(st, s, now))) return false;
    st[s + 1] = st[s + 1]! + cost;
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
    this.roll(st, s, now);
    const p = this.params;
    const curr = st[s + 1]!;
    const decision = counterDecision(cost, st[s + 2]!, st[s]!, curr, now, p[LIMIT]!, p[WINDOW_MS]!);
    if (take && cost > 0 && decision.allowed) st[s + 1] = curr + cost;
    return decision;
  }
}

/** The previous count of the state at `t[o ..]` once rolled to window `k` (>= its own). */
function rolledPrev(t: Float64Array, o: number, k: number): number {
  const index = t[o + 2]!;
  if (index === k) return t[o]!;
  return counterRolledPrev(index, t[o + 1]!, k);
}
