import { windowIndex } from "../../algorithms/time.js";
import {
  counterDecision,
  counterEstimate,
  counterRolledPrev,
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
 * The slot of a `SlidingWindowCounter` key: `[prev, curr, index]` (the counts of windows
 * `index - 1` and `index`), rolled to the window holding now as the class rolls itself
 * (`counterRolledPrev`; a roll changes no decision) and decided by `counterEstimate` and
 * `counterDecision`, as the class is.
 * @internal
 */
export class SlidingWindowCounterLayout implements SlotLayout {
  readonly doubles = 3;
  readonly keyExtraBytes = 0;
  readonly maxGrowthBytes = 0;
  readonly limit: number;
  /** @internal */
  private readonly params: Float64Array;

  constructor(limit: number, windowMs: number) {
    this.params = new Float64Array([limit, windowMs]);
    this.limit = limit;
  }

  /** @internal Rolls the slot at `s` to the window holding `now`. */
  private roll(st: Float64Array, s: number, now: number): void {
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

  /**
   * Both counts at `limit` when the key could have taken units in this window (it is busy
   * past its end), else the previous count alone: no count of a state idle by then is higher.
   */
  readonly traceWidth = 1;

  /**
   * The window's start plus its share used, `k * windowMs + (max(prev, curr) / limit) *
   * windowMs`, a hair short of the window's end (as `FixedWindowLayout` does): it grows
   * with either count and from one window to the next. Restored, both counts are that share.
   */
  traceValue(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    this.roll(st, s, now);
    const most = st[s]! > st[s + 1]! ? st[s]! : st[s + 1]!;
    out[o] = this.encode(st[s + 2]!, most);
  }

  /** `k * windowMs` plus the share `units / limit` (at most 1) of a window. */
  private encode(k: number, units: number): number {
    const p = this.params;
    const share = units >= p[LIMIT]! ? 1 : units / p[LIMIT]!;
    return k * p[WINDOW_MS]! + share * p[WINDOW_MS]! * SHARE_SPAN;
  }

  /** The window index and the units (rounded up) of a trace value. */
  private decode(value: number): [number, number] {
    const p = this.params;
    const windowMs = p[WINDOW_MS]!;
    const limit = p[LIMIT]!;
    const k = windowIndex(value, windowMs);
    const share = (value - k * windowMs) / (windowMs * SHARE_SPAN);
    const margin = ((Math.abs(value) * 2 ** -48) / windowMs + 2 ** -40) * limit;
    const units = share * limit + margin;
    return [k, units < limit ? units : limit];
  }

  /**
   * An entry of the previous window still bounds the new window's previous count: the
   * joined entry is of the newer window, with the larger share of the two.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number): void {
    const old = table[o]!;
    const value = fresh[f]!;
    if (old === Number.NEGATIVE_INFINITY) {
      table[o] = value;
      return;
    }
    const [kOld, uOld] = this.decode(old);
    const [kNew, uNew] = this.decode(value);
    if (kOld === kNew) {
      if (value > old) table[o] = value;
      return;
    }
    const [k, u, other, otherK] = kOld > kNew ? [kOld, uOld, uNew, kNew] : [kNew, uNew, uOld, kOld];
    // One window behind: its counts become the previous count; further behind, nothing.
    table[o] = this.encode(k, otherK === k - 1 && other > u ? other : u);
  }

  /** Two windows after the entry's window: its counts have rolled out by then. */
  traceExpiresMs(table: Float64Array, o: number): number {
    const value = table[o]!;
    if (value === Number.NEGATIVE_INFINITY) return value;
    return (windowIndex(value, this.params[WINDOW_MS]!) + 2) * this.params[WINDOW_MS]!;
  }

  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    if (!(this.traceExpiresMs(table, o) > now)) {
      this.init(st, s, slot, now);
      return;
    }
    const [k, units] = this.decode(table[o]!);
    st[s] = units;
    st[s + 1] = units;
    st[s + 2] = k;
    this.roll(st, s, now);
  }

  fitsAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): boolean {
    return cost === 0 || fits(cost, this.params[LIMIT]! - this.estimate(st, s, now));
  }

  takeAt(st: Float64Array, s: number, _slot: number, now: number, cost: number): void {
    this.roll(st, s, now);
    st[s + 1] = st[s + 1]! + cost;
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

  bind(): void {}

  release(): void {}

  grow(): void {}
}
