import type { Kernel } from "../../algorithms/kernel.js";
import { decideAll } from "../../composite/all-of.js";
import type { Decision } from "../../core/limiter.js";
import { KernelGroup, sideBySide } from "./group.js";

/** {@link AllOfLayout}'s slot between calls. */
const NO_SLOT = /* @__PURE__ */ new Float64Array(0);

/**
 * The slot of an `allOf` key: each part's slot side by side (part `i` at offset
 * `offsets[i]`), decided as `AllOf` decides, by the one rule they share (`decideAll`). @internal
 */
export class AllOfLayout extends KernelGroup implements Kernel {
  readonly doubles: number;
  readonly keyExtraBytes: number;
  limit: number;
  /** @internal Where each part's doubles start in the slot. */
  private readonly offsets: readonly number[];
  readonly leafCount: number;
  readonly refundsWithoutReceipt: boolean;
  /** @internal No part is decided apart: all are peeked, then all take in order. */
  readonly final = -1;
  /** @internal Every part, in order. */
  readonly takeOrder: readonly number[];
  /** @internal The slot {@link decideAt} is deciding on, for {@link decidePart}; empty between calls. */
  private st: Float64Array = NO_SLOT;
  /** @internal See {@link st}: its offset, slot and time. */
  private s = 0;
  private slot = 0;
  private now = 0;

  /** @param parts The kernels of the parts, in order (the group's). */
  constructor(parts: readonly Kernel[]) {
    super(parts);
    this.leafCount = parts.length;
    this.takeOrder = parts.map((_, i) => i);
    this.refundsWithoutReceipt = parts.every((part) => part.refundsWithoutReceipt);
    this.offsets = sideBySide(parts, (part) => part.doubles);
    this.doubles = this.offsets[parts.length]!;
    this.keyExtraBytes = sideBySide(parts, (part) => part.keyExtraBytes)[parts.length]!;
    this.limit = Math.min(...parts.map((part) => part.limit));
  }

  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void {
    const parts = this.kernels;
    const nextParts = (next as AllOfLayout).kernels;
    for (let i = 0; i < parts.length; i++) {
      parts[i]!.retuneSlot(nextParts[i]!, st, s + this.offsets[i]!, slot, now);
    }
  }

  override adopt(next: Kernel): void {
    super.adopt(next);
    this.limit = next.limit;
  }

  /** The parts' widths and their lengths summed (see {@link saveSlot}), or 0 when a part's varies (a log). */
  get savedWidth(): number {
    let width = 0;
    for (const part of this.kernels) {
      if (part.savedWidth === 0) return 0;
      width += 1 + part.savedWidth;
    }
    return width;
  }

  /** Each part's saved state, each after its length: `[n0, ...part0, n1, ...part1, ...]`. */
  saveSlot(st: Float64Array, s: number, slot: number): number[] {
    const out: number[] = [];
    this.kernels.forEach((part, i) => {
      const values = part.saveSlot(st, s + this.offsets[i]!, slot);
      out.push(values.length, ...values);
    });
    return out;
  }

  /** Splits a state {@link saveSlot} wrote among the parts (all checked before any is written). */
  loadSlot(st: Float64Array, s: number, slot: number, values: readonly number[]): void {
    const split: number[][] = [];
    let at = 0;
    for (const part of this.kernels) {
      const n = values[at];
      const width = part.savedWidth;
      if (
        n === undefined ||
        !Number.isInteger(n) ||
        n < 0 ||
        at + 1 + n > values.length ||
        (width !== 0 && n !== width)
      ) {
        throw new TypeError(
          `snapshot.state does not split into this allOf's ${this.kernels.length} parts`,
        );
      }
      split.push(values.slice(at + 1, at + 1 + n));
      at += 1 + n;
    }
    if (at !== values.length) {
      throw new TypeError(
        `snapshot.state has ${values.length - at} numbers past this allOf's parts`,
      );
    }
    this.kernels.forEach((part, i) => {
      part.loadSlot(st, s + this.offsets[i]!, slot, split[i]!);
    });
  }

  init(st: Float64Array, s: number, slot: number, now: number): void {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) parts[i]!.init(st, s + this.offsets[i]!, slot, now);
  }

  isIdle(st: Float64Array, s: number, slot: number, now: number): boolean {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      if (!parts[i]!.isIdle(st, s + this.offsets[i]!, slot, now)) return false;
    }
    return true;
  }

  idleAtMs(st: Float64Array, s: number, slot: number, now: number): number {
    let at = now;
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      const t = parts[i]!.idleAtMs(st, s + this.offsets[i]!, slot, now);
      if (t > at) at = t;
    }
    return at;
  }

  /** The most used part's share. */
  usage(st: Float64Array, s: number, slot: number, now: number): number {
    let most = 0;
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      const u = parts[i]!.usage(st, s + this.offsets[i]!, slot, now);
      if (u > most) most = u;
    }
    return most;
  }

  /** Each part keeps its own trace numbers, side by side. */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      parts[i]!.traceValue(st, s + this.offsets[i]!, slot, now, out, o + this.traceOffsets[i]!);
    }
  }

  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      const t = this.traceOffsets[i]!;
      parts[i]!.traceCombine(table, o + t, fresh, f + t, now);
    }
  }

  /** The entry applies while any part's does. */
  traceApplies(table: Float64Array, o: number, now: number): boolean {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      if (parts[i]!.traceApplies(table, o + this.traceOffsets[i]!, now)) return true;
    }
    return false;
  }

  /** Each part from its own numbers (fresh where they no longer apply). */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      parts[i]!.restore(st, s + this.offsets[i]!, slot, table, o + this.traceOffsets[i]!, now);
    }
  }

  fitsAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++) {
      if (!parts[i]!.fitsAt(st, s + this.offsets[i]!, slot, now, cost)) return false;
    }
    return true;
  }

  takeAt(st: Float64Array, s: number, slot: number, now: number, cost: number): void {
    const parts = this.kernels;
    for (let i = 0; i < parts.length; i++)
      parts[i]!.takeAt(st, s + this.offsets[i]!, slot, now, cost);
  }

  /** Every part gives back `cost` by its own rule, as `AllOf.refund`. */
  refundAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number {
    const parts = this.kernels;
    let credit = 0;
    for (let i = 0; i < parts.length; i++) {
      const c = parts[i]!.refundAt(st, s + this.offsets[i]!, slot, now, cost, given, o + i);
      if (c > credit) credit = c;
    }
    return credit;
  }

  /** Each part by its own receipt mark, at `marks[o + i]`. */
  markReceipt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    o: number,
  ): number {
    const parts = this.kernels;
    let until = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < parts.length; i++) {
      const t = parts[i]!.markReceipt(st, s + this.offsets[i]!, slot, now, marks, o + i);
      if (t > until) until = t;
    }
    return until;
  }

  /** Each part by its own receipt rule, as `AllOf.refund(receipt)`. */
  refundMarkedAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    asked: Float64Array,
    credited: number,
    given: Float64Array,
    o: number,
  ): number {
    const parts = this.kernels;
    let credit = 0;
    for (let i = 0; i < parts.length; i++) {
      const at = s + this.offsets[i]!;
      const c = parts[i]!.refundMarkedAt(st, at, slot, now, marks, asked, credited, given, o + i);
      if (c > credit) credit = c;
    }
    return credit;
  }

  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean {
    if (!this.fitsAt(st, s, slot, now, cost)) return false;
    if (cost > 0) this.takeAt(st, s, slot, now, cost);
    return true;
  }

  /** By the rule `AllOf` decides by ({@link decideAll}): every part peeked, then all take. */
  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision {
    this.st = st;
    this.s = s;
    this.slot = slot;
    this.now = now;
    try {
      return decideAll(this, this.kernels.length, cost, take && cost > 0);
    } finally {
      this.st = NO_SLOT; // no slab kept alive past the call, even one that threw
    }
  }

  /** @internal Part `i`'s `decideAt` on its share of the slot {@link decideAt} set. */
  decidePart(i: number, cost: number, take: boolean): Decision {
    const s = this.s + this.offsets[i]!;
    return this.kernels[i]!.decideAt(this.st, s, this.slot, this.now, cost, take);
  }

  release(slot: number, bytes: { addBytes(delta: number): void }): void {
    for (const part of this.kernels) part.release(slot, bytes);
  }
}
