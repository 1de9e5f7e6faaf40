import type { Decision } from "../limiter.js";

/**
 * What a slot of the {@link SlabEngine} holds and how it decides: one implementation per
 * algorithm (`registry/layouts/`), written with that algorithm's own free functions
 * (`bucket-math.ts`, `window-math.ts`, `log-ring.ts`), so a key in the slab decides bit for
 * bit as a limiter of its own would. A slot is `doubles` consecutive doubles of the
 * engine's `state` from offset `s` (= `slot * doubles`); a layout that keeps more per key
 * (a log) keeps it by `slot` and accounts its bytes through the engine.
 *
 * Every `now` is the engine's reading for this call (at least every earlier one).
 * The conservative methods (`idleAtMs`, `restore`, `chargeDenied`) are what lets the
 * engine drop a key in use without ever granting it anything: see docs/keyed.md#bounds.
 * @internal
 */
export interface SlotLayout {
  /** Doubles per slot. */
  readonly doubles: number;
  /** Accounted bytes per key beyond its slot doubles (a log's fixed part). */
  readonly keyExtraBytes: number;
  /** The most units one request can ever take (the smallest limit of the parts). */
  readonly limit: number;
  /** Writes the state of a key that was never used. */
  init(st: Float64Array, s: number, slot: number, now: number): void;
  /** True when the slot's state is fresh again: dropping it changes no decision. */
  isIdle(st: Float64Array, s: number, slot: number, now: number): boolean;
  /**
   * The clock reading by which the slot is fresh again without further traffic (its
   * `now + resetAfterMs`), rounded up; `Infinity` when never (a rate of 0).
   */
  idleAtMs(st: Float64Array, s: number, slot: number, now: number): number;
  /**
   * Writes the most-used state that is fresh again by `busyUntilMs` (> now): a state that
   * allows no request the state of the key that left (fresh by then) would deny.
   */
  restore(st: Float64Array, s: number, slot: number, busyUntilMs: number, now: number): void;
  /**
   * After this (uncertain) state denied `cost` at `now`: updates it so it stays an upper
   * bound on the usage of every state it bounded, had that one allowed the request.
   */
  chargeDenied(st: Float64Array, s: number, slot: number, now: number, cost: number): void;
  /** `allow(cost)` of the slot: takes `cost` when it fits. */
  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean;
  /** `consume` (`take`) or `peek` of the slot. */
  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision;
  /** Frees what the layout keeps for `slot` beyond its doubles (a log), through `bytes`. */
  release(slot: number, bytes: { addBytes(delta: number): void }): void;
  /** The engine grew to `slots` slots. */
  grow(slots: number): void;
}
