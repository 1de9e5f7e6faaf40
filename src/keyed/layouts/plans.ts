import type { Kernel } from "../../algorithms/kernel.js";
import type { Decision } from "../../core/limiter.js";
import { KernelGroup } from "./group.js";

/** Accounted bytes of a key's plan id (one byte per slot). */
const PLAN_ID_BYTES = 1;

/**
 * The slot of a key of a plan registry (`new KeyedLimiter({ plans, plan })`): one layout
 * per plan, all of one shape (same class, doubles, trace width and leaves), and a plan id
 * per slot (one byte), so every plan shares one slab, one bound and one trace table.
 * Each call on a slot is its plan's layout's; a key without a slot (a new key decided in
 * the registry's scratch, a trace looked up for it) is the key last {@link select}ed.
 *
 * The trace table keeps one region per plan side by side (as `AllOfLayout` keeps one per
 * part): a key pushed out leaves its trace in its own plan's region, and a new key starts
 * from its own plan's region only, so no plan's numbers are ever read with another's. @internal
 */
export class PlanLayout extends KernelGroup implements Kernel {
  readonly doubles: number;
  readonly keyExtraBytes: number;
  readonly leafCount: number;
  readonly refundsWithoutReceipt: boolean;
  readonly savedWidth: number;
  /** Plan id of each slot. */
  plans: Uint8Array = new Uint8Array(0);
  /** Plan id of the key last selected: what a call without a slot (`slot < 0`) is about. */
  current = 0;
  /** Keys kept per plan id: one more when a key is given a slot, one less when it goes. */
  readonly sizes: Float64Array;
  /** Plan of the slot whose trace {@link traceValue} wrote last (the engine combines it next). */
  private traced = 0;

  /**
   * @param layouts One layout per plan, of one shape (checked by the registry): the group's
   *   kernels, by plan id (`reconfigure` changes one in place, through `adopt`).
   * @param planOfSlot The plan id of the key a slot is being given (the engine has set its
   *   key when it calls `init` or `restore` for it), or -1 for a kept key re-initialised.
   */
  constructor(
    layouts: readonly Kernel[],
    private readonly planOfSlot: (slot: number) => number,
  ) {
    super(layouts);
    const first = layouts[0]!;
    this.doubles = first.doubles;
    this.keyExtraBytes = first.keyExtraBytes + PLAN_ID_BYTES;
    this.leafCount = first.leafCount;
    this.refundsWithoutReceipt = first.refundsWithoutReceipt;
    this.savedWidth = first.savedWidth;
    this.sizes = new Float64Array(layouts.length);
  }

  /** The same plans with plan `id`'s layout replaced by `next` (for `reconfigure`). */
  with(id: number, next: Kernel): PlanLayout {
    const layouts = [...this.kernels];
    layouts[id] = next;
    return new PlanLayout(layouts, this.planOfSlot);
  }

  /** The most units a request of the selected key's plan can take. */
  get limit(): number {
    return this.kernels[this.current]!.limit;
  }

  /** The plan of `slot`, or of the selected key for a slot of none (`slot < 0`). */
  private of(slot: number): Kernel {
    return this.kernels[slot < 0 ? this.current : this.plans[slot]!]!;
  }

  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void {
    const id = this.plans[slot]!;
    const to = (next as unknown as PlanLayout).kernels[id]!;
    if (to !== this.kernels[id]) this.kernels[id]!.retuneSlot(to, st, s, slot, now);
  }

  init(st: Float64Array, s: number, slot: number, now: number): void {
    if (slot >= 0) this.assign(slot);
    this.of(slot).init(st, s, slot, now);
  }

  /**
   * Gives `slot` its key's plan: a new key's (counted), or the one a pinned key keeps when a
   * reset or a clear re-initialises it in place (`planOfSlot` answers -1 for it).
   */
  private assign(slot: number): void {
    const id = this.planOfSlot(slot);
    if (id < 0) return;
    this.plans[slot] = id;
    this.sizes[id]!++;
  }

  /** The slot's state by its plan's layout; its plan is not part of it (the key tells it). */
  saveSlot(st: Float64Array, s: number, slot: number): number[] {
    return this.of(slot).saveSlot(st, s, slot);
  }

  /** A state into the slot by its plan's layout (the slot's key has been given its plan). */
  loadSlot(st: Float64Array, s: number, slot: number, values: readonly number[]): void {
    this.of(slot).loadSlot(st, s, slot, values);
  }

  isIdle(st: Float64Array, s: number, slot: number, now: number): boolean {
    return this.of(slot).isIdle(st, s, slot, now);
  }

  idleAtMs(st: Float64Array, s: number, slot: number, now: number): number {
    return this.of(slot).idleAtMs(st, s, slot, now);
  }

  usage(st: Float64Array, s: number, slot: number, now: number): number {
    return this.of(slot).usage(st, s, slot, now);
  }

  /** Writes the slot's trace into its plan's region only (the engine combines that region). */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    const id = slot < 0 ? this.current : this.plans[slot]!;
    this.traced = id;
    this.kernels[id]!.traceValue(st, s, slot, now, out, o + this.traceOffsets[id]!);
  }

  /** Joins the region {@link traceValue} wrote last into the entry's region of that plan. */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void {
    const id = this.traced;
    const t = this.traceOffsets[id]!;
    this.kernels[id]!.traceCombine(table, o + t, fresh, f + t, now);
  }

  /** True when the selected key's plan's region applies. */
  traceApplies(table: Float64Array, o: number, now: number): boolean {
    const id = this.current;
    return this.kernels[id]!.traceApplies(table, o + this.traceOffsets[id]!, now);
  }

  /** From the key's own plan's region (fresh where it no longer applies). */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    if (slot >= 0) this.assign(slot);
    const id = slot < 0 ? this.current : this.plans[slot]!;
    this.kernels[id]!.restore(st, s, slot, table, o + this.traceOffsets[id]!, now);
  }

  fitsAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    return this.of(slot).fitsAt(st, s, slot, now, cost);
  }

  takeAt(st: Float64Array, s: number, slot: number, now: number, cost: number): void {
    this.of(slot).takeAt(st, s, slot, now, cost);
  }

  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    return this.of(slot).allowAt(st, s, slot, now, cost);
  }

  refundAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number {
    return this.of(slot).refundAt(st, s, slot, now, cost, given, o);
  }

  markReceipt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    o: number,
  ): number {
    return this.of(slot).markReceipt(st, s, slot, now, marks, o);
  }

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
    return this.of(slot).refundMarkedAt(st, s, slot, now, marks, asked, creditSince, given, o);
  }

  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision {
    return this.of(slot).decideAt(st, s, slot, now, cost, take);
  }

  release(slot: number, bytes: { addBytes(delta: number): void }): void {
    const id = this.plans[slot]!;
    this.sizes[id]!--;
    this.kernels[id]!.release(slot, bytes);
  }

  override grow(slots: number): void {
    const plans = new Uint8Array(slots);
    plans.set(this.plans.length <= slots ? this.plans : this.plans.subarray(0, slots));
    this.plans = plans;
    super.grow(slots);
  }
}
