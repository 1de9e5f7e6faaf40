import type { FixedWindow } from "../algorithms/fixed-window.js";
import { checkWindowClock, windowClockBoundMs } from "../algorithms/time.js";
import {
  fixedWindowDecision,
  fixedWindowEndAt,
  fixedWindowUsed,
} from "../algorithms/window-math.js";
import { badClock } from "../errors.js";
import type { Decision } from "../limiter.js";
import { fits } from "../numeric.js";
import { BucketSlab } from "./bucket-slab.js";

/** Index in `params` of the latest clock reading seen (the store-wide high-water mark). */
const SEEN = 0;
/** Indexes in `params` of the window's limit and length (ms). */
const LIMIT = 1;
const WINDOW_MS = 2;
/** Doubles per slot: count, then endMs (the fields of `FixedWindow`). */
const STRIDE = 2;
/** The class whose errors a window slab repeats (see `checkWindowClock`). */
const CLASS = "FixedWindow";

/**
 * The fast path of {@link KeyedLimiter} for a `FixedWindow` policy: no object per key.
 *
 * The slab machinery of {@link BucketSlab} (Map from key to slot, `Float64Array` slab
 * growing by doubling up to `maxKeys`, free list threaded through the slab, slot-to-key
 * array, one-entry cache of the last key, incremental sweep, eviction at the bound, keys
 * with waiters moved out) with `FixedWindow`'s state in a slot: `[count, endMs]` (units
 * taken in the window ending at `endMs`). `params` holds `[seenMs, limit, windowMs]`.
 * Decisions come from the functions `FixedWindow` itself uses (`fixedWindowUsed`,
 * `fixedWindowEndAt`, `fixedWindowDecision` in `window-math.ts`), so every decision is
 * bit for bit the one a `FixedWindow` of its own would give.
 *
 * A key is idle once its window has ended (a key in the slab always has a count > 0), and
 * the one dropped at the bound is the one whose window ends first (smallest
 * `resetAfterMs`), and among those ending together the one with the smallest count. The clock is read once per call with one high-water mark for the whole
 * store; a reading where `windowMs` is below the clock's float step throws `FixedWindow`'s
 * own `RangeError` and is not kept.
 * @internal
 */
export class FixedWindowSlab extends BucketSlab {
  /** Readings must stay within ±this for `windowMs` to be at least the clock's float step. */
  private readonly clockBoundMs: number;
  /** The class whose resolution error this slab throws. */
  private readonly where: string;

  /**
   * @param where The policy's class name, for its clock resolution error.
   * @param doublesPerSlot Doubles of state per key (2 here; a subclass may keep more).
   */
  constructor(
    policy: Pick<FixedWindow, "limit" | "windowMs" | "clock">,
    maxKeys: number,
    where = CLASS,
    doublesPerSlot = STRIDE,
  ) {
    // The base class keeps `[seenMs, a, b]` in `params`: here a = limit, b = windowMs.
    super(
      [{ capacity: policy.limit, ratePerSecond: policy.windowMs }],
      policy.clock,
      maxKeys,
      doublesPerSlot,
    );
    this.clockBoundMs = windowClockBoundMs(policy.windowMs);
    this.where = where;
  }

  /**
   * Reads the clock once; a reading behind the latest one counts as the latest. A reading
   * where `windowMs` is below the clock's float step throws and is not kept.
   */
  protected override now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock("KeyedLimiter", t);
    const p = this.params;
    const now = t > p[SEEN]! ? t : p[SEEN]!;
    p[SEEN] = checkWindowClock(this.where, now, p[WINDOW_MS]!, this.clockBoundMs);
    return now;
  }

  override allow(key: string, cost: number): boolean {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    if (cost === 0) return true;
    let slot = this.lastSlot;
    const p = this.params;
    const limit = p[LIMIT]!;
    if (key !== this.lastKey) {
      const found = this.index.get(key);
      if (found === undefined) {
        // A fresh window: nothing used.
        if (!fits(cost, limit)) return false;
        this.store(
          this.insert(key, now),
          cost,
          fixedWindowEndAt(Number.NEGATIVE_INFINITY, now, p[WINDOW_MS]!),
        );
        return true;
      }
      slot = found;
      this.lastKey = key;
      this.lastSlot = slot;
    }
    const st = this.state;
    const s = slot * STRIDE;
    const endMs = st[s + 1]!;
    const used = fixedWindowUsed(st[s]!, endMs, now);
    if (!fits(cost, limit - used)) return false;
    st[s] = used + cost;
    st[s + 1] = fixedWindowEndAt(endMs, now, p[WINDOW_MS]!);
    return true;
  }

  override consume(key: string, cost: number): Decision {
    return this.decideWindow(key, cost, true);
  }

  override peek(key: string, cost: number): Decision {
    return this.decideWindow(key, cost, false);
  }

  private decideWindow(key: string, cost: number, take: boolean): Decision {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    const slot = key === this.lastKey ? this.lastSlot : this.index.get(key);
    const p = this.params;
    const st = this.state;
    const s = slot === undefined ? -1 : slot * STRIDE;
    const count = s < 0 ? 0 : st[s]!;
    const oldEndMs = s < 0 ? Number.NEGATIVE_INFINITY : st[s + 1]!;
    const used = fixedWindowUsed(count, oldEndMs, now);
    const endMs = fixedWindowEndAt(oldEndMs, now, p[WINDOW_MS]!);
    const decision = fixedWindowDecision(cost, used, endMs - now, p[LIMIT]!);
    if (take && cost > 0 && decision.allowed) {
      if (slot === undefined) this.store(this.insert(key, now), used + cost, endMs);
      else {
        st[s] = used + cost;
        st[s + 1] = endMs;
        this.lastKey = key;
        this.lastSlot = slot;
      }
    }
    return decision;
  }

  /** True once the slot's window has ended (keys with waiters are not in the slab). */
  protected override isIdle(slot: number, now: number): boolean {
    const s = slot * STRIDE;
    return fixedWindowUsed(this.state[s]!, this.state[s + 1]!, now) === 0;
  }

  /**
   * Units the slot took in its window: breaks ties at the bound, where keys of one window
   * share its end, so a client limited hard goes after those that used less.
   */
  protected override usage(slot: number): number {
    return this.state[slot * STRIDE]!;
  }

  /** Milliseconds until the slot's window ends: its `resetAfterMs` (it has a count). */
  protected override untilIdle(slot: number, now: number): number {
    return this.state[slot * STRIDE + 1]! - now;
  }
}
