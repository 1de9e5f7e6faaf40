import { windowEnd } from "../../algorithms/time.js";
import {
  fixedWindowDecision,
  fixedWindowEndAt,
  fixedWindowUsed,
} from "../../algorithms/window-math.js";
import type { Decision } from "../../limiter.js";
import { fits } from "../../numeric.js";
import type { SlotLayout } from "../layout.js";

/** `params` indexes: limit, windowMs. */
const LIMIT = 0;
const WINDOW_MS = 1;
/** The part of a window a trace value's share spans: short of its end, so it stays inside. */
const SHARE_SPAN = 1 - 2 ** -20;

/**
 * The slot of a `FixedWindow` key: `[count, endMs]` (units taken in the window ending at
 * `endMs`; `-Infinity` while unused), decided by `window-math.ts` as the class is.
 * Windows are aligned to the clock's zero, so every key shares their ends.
 * @internal
 */
export class FixedWindowLayout implements SlotLayout {
  readonly doubles = 2;
  readonly keyExtraBytes = 0;
  readonly maxGrowthBytes = 0;
  readonly limit: number;
  /** @internal */
  private readonly params: Float64Array;

  constructor(limit: number, windowMs: number) {
    this.params = new Float64Array([limit, windowMs]);
    this.limit = limit;
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

  readonly traceWidth = 1;

  /**
   * The window's start plus its share used, `windowStart + (used / limit) * windowMs`, a
   * hair short of the window's end: it grows with the count within a window and from one
   * window to the next, so the table's maximum keeps the most-used key of the latest window.
   */
  traceValue(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    const p = this.params;
    const windowMs = p[WINDOW_MS]!;
    const start = windowEnd(now, windowMs) - windowMs;
    const used = fixedWindowUsed(st[s]!, st[s + 1]!, now);
    const share = used >= p[LIMIT]! ? 1 : used / p[LIMIT]!;
    out[o] = start + share * windowMs * SHARE_SPAN;
  }

  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number): void {
    if (fresh[f]! > table[o]!) table[o] = fresh[f]!;
  }

  /** The end of the entry's window. */
  traceExpiresMs(table: Float64Array, o: number): number {
    const value = table[o]!;
    return value === Number.NEGATIVE_INFINITY ? value : windowEnd(value, this.params[WINDOW_MS]!);
  }

  /** The count the entry bounds, rounded up (never below the count that left). */
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
    const windowMs = p[WINDOW_MS]!;
    const limit = p[LIMIT]!;
    const end = value === Number.NEGATIVE_INFINITY ? value : windowEnd(value, windowMs);
    if (!(end > now)) {
      this.init(st, s);
      return;
    }
    const share = (value - (end - windowMs)) / (windowMs * SHARE_SPAN);
    // The float error of the start (a few steps of |value|) and of the share, rounded up.
    const margin = ((Math.abs(value) * 2 ** -48) / windowMs + 2 ** -40) * limit;
    const count = share * limit + margin;
    st[s] = count < limit ? count : limit;
    st[s + 1] = end;
  }

  fitsAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    return cost === 0 || fits(cost, this.params[LIMIT]! - fixedWindowUsed(st[s]!, st[s + 1]!, now));
  }

  takeAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): void {
    const endMs = st[s + 1]!;
    st[s] = fixedWindowUsed(st[s]!, endMs, now) + cost;
    st[s + 1] = fixedWindowEndAt(endMs, now, this.params[WINDOW_MS]!);
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

  bind(): void {}

  release(): void {}

  grow(): void {}
}
