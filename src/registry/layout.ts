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
 * The trace methods (`traceValue`, `traceCombine`, `traceExpiresMs`, `restore`) are what
 * lets the engine drop a key in use without ever granting it anything: docs/keyed.md#bounds.
 * @internal
 */
export interface SlotLayout {
  /** Doubles per slot. */
  readonly doubles: number;
  /** Accounted bytes per key beyond its slot doubles (a log's fixed part). */
  readonly keyExtraBytes: number;
  /** The most bytes one key's state can grow by beyond that (a full log's entries); 0 if none. */
  readonly maxGrowthBytes: number;
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
   * How used the slot is, as a share of its limit (0 fresh, 1 used up): of keys idle equally
   * soon, the least used is pushed out, so its trace costs a colliding key the least.
   */
  usage(st: Float64Array, s: number, slot: number, now: number): number;
  /**
   * Numbers per trace-table entry: 1 for a bucket or a window, 2 for a log (units and
   * time), the sum of the parts' for an `allOf` (each part keeps its own).
   */
  readonly traceWidth: number;
  /**
   * What the trace table keeps for a key in use that is dropped, written to
   * `out[o .. o + traceWidth)`: numbers that only grow as the state is more used (see
   * each layout), `-Infinity` first for none.
   */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void;
  /**
   * Joins the trace at `fresh[f ..]` into the entry at `table[o ..]` (which may no longer
   * apply at `now`): the entry then bounds every key that wrote it.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void;
  /** True when the entry at `table[o ..]` applies at `now`: the state it holds is not fresh yet. */
  traceApplies(table: Float64Array, o: number, now: number): boolean;
  /**
   * A clock reading from which the entry at `table[o ..]` no longer applies, or later
   * (`-Infinity`: none): the engine skips the table once every entry's has passed.
   */
  traceExpiresMs(table: Float64Array, o: number): number;
  /**
   * Writes the most-used state the entry at `table[o ..]` bounds (a fresh state where it no
   * longer applies at `now`): a state that allows no request a state that wrote it would deny.
   */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void;
  /** True when `cost` fits the slot now (as `allowAt` would answer), changing nothing. */
  fitsAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean;
  /** Takes `cost` (> 0) from the slot now, unchecked (`allOf` checked every part first). */
  takeAt(st: Float64Array, s: number, slot: number, now: number, cost: number): void;
  /** `allow(cost)` of the slot: takes `cost` when it fits. */
  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean;
  /**
   * Gives back `cost` (> 0) units taken earlier, by the algorithm's refund rule without a
   * receipt (docs/semantics.md#refunds): never past the fresh state. Writes what leaf `i`
   * gave back into `given[o + i]`; returns the most a bucket leaf gave back (what the key's
   * receipts must count as refill), 0 for none.
   */
  refundAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number;
  /** False when a refund without a receipt is refused (a fixed window, or an `allOf` with one). */
  readonly refundsWithoutReceipt: boolean;
  /** Leaves a slot decides for: 1, or the number of an `allOf`'s parts. */
  readonly leafCount: number;
  /**
   * Right after an allowed charge at `now`: each leaf's receipt mark (a bucket's full time,
   * a fixed window's end, a counter's window index, a log entry's leave time) into
   * `marks[o ..]`. Returns the latest clock reading at which any of them can give back.
   */
  markReceipt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    o: number,
  ): number;
  /**
   * A refund through a receipt at `now` (docs/semantics.md#refunds): leaf `i` gives back up
   * to `asked[o + i]` by its mark `marks[o + i]`, a bucket leaf at most its refill not yet
   * repaid less `creditSince` (the units the key's refunds credited since the charge), and
   * writes what it gave back into `given[o + i]`. Returns the most a bucket leaf gave back.
   */
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
  ): number;
  /** `consume` (`take`) or `peek` of the slot. */
  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision;
  /**
   * `reconfigure`: rewrites the state of a kept key at `st[s ..]` from this layout's
   * numbers to those of `next` (a layout of the same class, made from the reconfigured
   * policy), as the algorithm's own `reconfigure` carries its state over
   * (docs/semantics.md#changing-limits-live); a fresh state stays fresh. Before {@link adopt}.
   */
  retuneSlot(next: SlotLayout, st: Float64Array, s: number, slot: number, now: number): void;
  /**
   * `reconfigure`: rewrites the trace entry at `table[o ..]` so that, read with the numbers
   * of `next`, it bounds what the keys that wrote it would hold had they been kept (each
   * carried over as {@link retuneSlot} does; the carry-over is monotone, so the entry still
   * bounds every one of them: never fresher); an entry that no longer applies is cleared.
   * Before {@link adopt}.
   */
  retuneTrace(next: SlotLayout, table: Float64Array, o: number, now: number): void;
  /** `reconfigure`: takes the numbers of `next` (same class); every state was retuned first. */
  adopt(next: SlotLayout): void;
  /** The engine whose bytes a layout that keeps more per key (a log) accounts; called once by it. */
  bind(sink: { addBytes(delta: number, slot?: number): void }): void;
  /** Frees what the layout keeps for `slot` beyond its doubles (a log), through `bytes`. */
  release(slot: number, bytes: { addBytes(delta: number): void }): void;
  /** The engine grew to `slots` slots. */
  grow(slots: number): void;
}
