import type { Decision } from "../core/limiter.js";
import { fits } from "../core/numeric.js";
import { DoublesKernel, type Kernel } from "./kernel.js";
import {
  fixedWindowDecision,
  fixedWindowEndAt,
  fixedWindowRetunedEnd,
  fixedWindowUsed,
} from "./window-math.js";

/** `params` indexes: limit, windowMs. */
const LIMIT = 0;
const WINDOW_MS = 1;

/**
 * The slot of a `FixedWindow` key: `[count, endMs]` (units taken in the window ending at
 * `endMs`; `-Infinity` while unused), decided by `window-math.ts` as the class is.
 * Windows are aligned to the clock's zero, so every key shares their ends. @internal
 */
export class FixedWindowKernel extends DoublesKernel implements Kernel {
  readonly doubles = 2;

  constructor(limit: number, windowMs: number) {
    super([limit, windowMs], [0]);
  }

  /** The count is kept; the window ends as `fixedWindowRetunedEnd` says (fresh if none). */
  retuneSlot(next: Kernel, st: Float64Array, s: number, _slot: number, now: number): void {
    const windowMs = (next as FixedWindowKernel).params[WINDOW_MS]!;
    const end = fixedWindowRetunedEnd(st[s]!, st[s + 1]!, now, this.params[WINDOW_MS]!, windowMs);
    if (end === Number.NEGATIVE_INFINITY) st[s] = 0;
    st[s + 1] = end;
  }

  init(st: Float64Array, s: number): void {
    st[s] = 0;
    st[s + 1] = Number.NEGATIVE_INFINITY;
  }

  isIdle(st: Float64Array, s: number, _slot: number, now: number): boolean {
    return fixedWindowUsed(st[s]!, st[s + 1]!, now) === 0;
  }

  idleAtMs(st: Float64Array, s: number, _slot: number, now: number): number {
    return fixedWindowUsed(st[s]!, st[s + 1]!, now) === 0 ? now : st[s + 1]!;
  }

  usage(st: Float64Array, s: number, _slot: number, now: number): number {
    return fixedWindowUsed(st[s]!, st[s + 1]!, now) / this.params[LIMIT]!;
  }

  /** The later window's; of one window, the larger count (windows share their ends). */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number): void {
    const end = table[o + 1]!;
    const freshEnd = fresh[f + 1]!;
    if (freshEnd > end || (freshEnd === end && fresh[f]! > table[o]!)) {
      table[o] = fresh[f]!;
      table[o + 1] = freshEnd;
    }
  }

  traceApplies(table: Float64Array, o: number, now: number): boolean {
    return table[o]! > 0 && now < table[o + 1]!;
  }

  /** The end of the entry's window. */
  traceExpiresMs(table: Float64Array, o: number): number {
    return table[o]! > 0 ? table[o + 1]! : Number.NEGATIVE_INFINITY;
  }

  fitsAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    return cost === 0 || fits(cost, this.params[LIMIT]! - fixedWindowUsed(st[s]!, st[s + 1]!, now));
  }

  takeAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): void {
    const endMs = st[s + 1]!;
    st[s] = fixedWindowUsed(st[s]!, endMs, now) + cost;
    st[s + 1] = fixedWindowEndAt(endMs, now, this.params[WINDOW_MS]!);
  }

  /** Never called: `refundsWithoutReceipt` is false (a fixed window refunds only through receipts). */
  refundAt(
    _st: Float64Array,
    _s: number,
    _slot: number,
    _now: number,
    _cost: number,
    given: Float64Array,
    o: number,
  ): number {
    given[o] = 0;
    return 0;
  }

  override readonly refundsWithoutReceipt = false;

  /** The end of the window charged. */
  markReceipt(
    st: Float64Array,
    s: number,
    _slot: number,
    _now: number,
    marks: Float64Array,
    o: number,
  ): number {
    marks[o] = st[s + 1]!;
    return st[s + 1]!;
  }

  /** As `FixedWindow.refund(receipt)`: the count less the units, while its window lasts. */
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
    given[o] = 0;
    if (st[s + 1] !== marks[o]) return 0;
    const used = fixedWindowUsed(st[s]!, st[s + 1]!, now);
    const give = asked[o]! < used ? asked[o]! : used;
    if (!(give > 0)) return 0;
    const count = used - give;
    if (count === 0) this.init(st, s);
    else st[s] = count;
    given[o] = give;
    return 0;
  }

  allowAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    if (cost === 0) return true;
    const p = this.params;
    const endMs = st[s + 1]!;
    const used = fixedWindowUsed(st[s]!, endMs, now);
    if (!fits(cost, p[LIMIT]! - used)) return false;
    st[s] = used + cost;
    st[s + 1] = fixedWindowEndAt(endMs, now, p[WINDOW_MS]!);
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
    const oldEndMs = st[s + 1]!;
    const used = fixedWindowUsed(st[s]!, oldEndMs, now);
    const endMs = fixedWindowEndAt(oldEndMs, now, p[WINDOW_MS]!);
    const decision = fixedWindowDecision(cost, used, endMs - now, p[LIMIT]!);
    if (take && cost > 0 && decision.allowed) {
      st[s] = used + cost;
      st[s + 1] = endMs;
    }
    return decision;
  }
}
