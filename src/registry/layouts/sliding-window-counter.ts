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
  readonly limit: number;
  private readonly params: Float64Array;

  constructor(limit: number, windowMs: number) {
    this.params = new Float64Array([limit, windowMs]);
    this.limit = limit;
  }

  /** Rolls the slot at `s` to the window holding `now`. */
  private roll(st: Float64Array, s: number, now: number): void {
    const windowMs = this.params[WINDOW_MS]!;
    const index = st[s + 2]!;
    if (now < (index + 1) * windowMs) return;
    const k = windowIndex(now, windowMs);
    st[s] = counterRolledPrev(index, st[s + 1]!, k);
    st[s + 1] = 0;
    st[s + 2] = k;
  }

  /** The slot's estimate at `now`, rolled. */
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
  traceValue(st: Float64Array, s: number, slot: number, now: number): number {
    return this.idleAtMs(st, s, slot, now);
  }

  traceExpiresMs(value: number): number {
    return value;
  }

  restore(st: Float64Array, s: number, slot: number, value: number, now: number): void {
    this.restoreUntil(st, s, slot, value, now);
  }

  restoreUntil(st: Float64Array, s: number, _slot: number, busyUntilMs: number, now: number): void {
    const windowMs = this.params[WINDOW_MS]!;
    const limit = this.params[LIMIT]!;
    const k = windowIndex(now, windowMs);
    st[s] = limit;
    st[s + 1] = busyUntilMs > (k + 1) * windowMs ? limit : 0;
    st[s + 2] = k;
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

  release(): void {}

  grow(): void {}
}
