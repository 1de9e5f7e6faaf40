import type { SlidingWindowCounter } from "../algorithms/sliding-window-counter.js";
import { windowIndex } from "../algorithms/time.js";
import {
  counterDecision,
  counterEstimate,
  counterResetMs,
  counterRolledPrev,
} from "../algorithms/window-math.js";
import type { Decision } from "../limiter.js";
import { fits } from "../numeric.js";
import { FixedWindowSlab } from "./window-slab.js";

/** Index in `params` of the latest clock reading seen (the store-wide high-water mark). */
const SEEN = 0;
/** Indexes in `params` of the counter's limit and window length (ms). */
const LIMIT = 1;
const WINDOW_MS = 2;
/** Doubles per slot: prev, curr, then the window index (the fields of `SlidingWindowCounter`). */
const STRIDE = 3;

/**
 * The fast path of {@link KeyedLimiter} for a `SlidingWindowCounter` policy: no object
 * per key. The slab machinery of `BucketSlab` and the clock handling of
 * {@link FixedWindowSlab} (one reading per call, one high-water mark for the store,
 * `SlidingWindowCounter`'s own `RangeError` for a `windowMs` below the clock's float step),
 * with three doubles per slot: `[prev, curr, index]` (the counts of windows `index - 1`
 * and `index`; the window's end `(index + 1) * windowMs` is computed, not stored).
 *
 * A slot is rolled to the window holding now as the class rolls itself (the roll changes
 * no decision, so peeks and denials may do it), with `counterRolledPrev`; decisions come
 * from `counterEstimate` and `counterDecision`, so every decision is bit for bit the one a
 * `SlidingWindowCounter` of its own would give. A key is idle once its estimate is 0
 * (both counts 0 after the roll); at the bound the one dropped has the smallest
 * `resetAfterMs` (`counterResetMs`), and among equals the smallest estimate.
 * @internal
 */
export class CounterSlab extends FixedWindowSlab {
  constructor(policy: SlidingWindowCounter, maxKeys: number) {
    super(policy, maxKeys, "SlidingWindowCounter", STRIDE);
  }

  /**
   * Rolls the slot starting at `s` to the window holding now (the latest reading, which
   * every caller has just read), as the class does. Now is read here rather than passed:
   * a double passed to a call that is not inlined is boxed (16 bytes per call).
   */
  private roll(s: number): void {
    const st = this.state;
    const p = this.params;
    const now = p[SEEN]!;
    const windowMs = p[WINDOW_MS]!;
    const index = st[s + 2]!;
    if (now < (index + 1) * windowMs) return;
    const k = windowIndex(now, windowMs);
    st[s] = counterRolledPrev(index, st[s + 1]!, k);
    st[s + 1] = 0;
    st[s + 2] = k;
  }

  override allow(key: string, cost: number): boolean {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    if (cost === 0) return true;
    let slot = this.lastSlot;
    const p = this.params;
    const limit = p[LIMIT]!;
    const windowMs = p[WINDOW_MS]!;
    if (key !== this.lastKey) {
      const found = this.index.get(key);
      if (found === undefined) return this.allowFresh(key, cost);
      slot = found;
      this.lastKey = key;
      this.lastSlot = slot;
    }
    const s = slot * STRIDE;
    this.roll(s);
    const st = this.state;
    const curr = st[s + 1]!;
    const endMs = (st[s + 2]! + 1) * windowMs;
    if (!fits(cost, limit - counterEstimate(st[s]!, curr, endMs, now, windowMs))) return false;
    st[s + 1] = curr + cost;
    return true;
  }

  /** `allow` for a key without state: a fresh counter, whose estimate is 0. */
  private allowFresh(key: string, cost: number): boolean {
    const p = this.params;
    if (!fits(cost, p[LIMIT]!)) return false;
    const now = p[SEEN]!; // this call's reading
    this.fill(this.insert(key, now) * STRIDE, cost, windowIndex(now, p[WINDOW_MS]!));
    return true;
  }

  override consume(key: string, cost: number): Decision {
    return this.decideCounter(key, cost, true);
  }

  override peek(key: string, cost: number): Decision {
    return this.decideCounter(key, cost, false);
  }

  private decideCounter(key: string, cost: number, take: boolean): Decision {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    const slot = key === this.lastKey ? this.lastSlot : this.index.get(key);
    const p = this.params;
    const windowMs = p[WINDOW_MS]!;
    let prev = 0;
    let curr = 0;
    let index: number;
    const s = slot === undefined ? -1 : slot * STRIDE;
    if (s < 0) index = windowIndex(now, windowMs);
    else {
      this.roll(s);
      const st = this.state;
      prev = st[s]!;
      curr = st[s + 1]!;
      index = st[s + 2]!;
    }
    const decision = counterDecision(cost, index, prev, curr, now, p[LIMIT]!, windowMs);
    if (take && cost > 0 && decision.allowed) {
      if (slot === undefined) this.fill(this.insert(key, now) * STRIDE, curr + cost, index);
      else {
        this.state[s + 1] = curr + cost;
        this.lastKey = key;
        this.lastSlot = slot;
      }
    }
    return decision;
  }

  /** Writes a new key's state at `s`: nothing in the previous window, `curr` in window `index`. */
  private fill(s: number, curr: number, index: number): void {
    const st = this.state; // after `insert`, which may have grown the slab
    st[s] = 0;
    st[s + 1] = curr;
    st[s + 2] = index;
  }

  /** True once the slot's estimate is 0 (keys with waiters are not in the slab). */
  protected override isIdle(slot: number, _now: number): boolean {
    const s = slot * STRIDE;
    this.roll(s);
    return this.state[s]! === 0 && this.state[s + 1]! === 0;
  }

  /** Milliseconds until the slot's estimate is 0: its `resetAfterMs`. */
  protected override untilIdle(slot: number, now: number): number {
    const s = slot * STRIDE;
    this.roll(s);
    const st = this.state;
    const windowMs = this.params[WINDOW_MS]!;
    return counterResetMs((st[s + 2]! + 1) * windowMs - now, st[s]!, st[s + 1]!, windowMs);
  }

  /** The slot's estimate at the latest reading: breaks ties of `resetAfterMs` at the bound. */
  protected override usage(slot: number): number {
    const s = slot * STRIDE;
    const st = this.state;
    const p = this.params;
    const windowMs = p[WINDOW_MS]!;
    const now = p[SEEN]!;
    this.roll(s);
    return counterEstimate(st[s]!, st[s + 1]!, (st[s + 2]! + 1) * windowMs, now, windowMs);
  }
}
