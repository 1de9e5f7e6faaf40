import type { Kernel } from "../../algorithms/kernel.js";

/**
 * What a layout over several kernels shares (`AllOfLayout`: one per part, `PlanLayout`: one per
 * plan): each kernel keeps its own region of a trace entry, side by side, and `reconfigure` retunes
 * and adopts kernel by kernel, skipping those `next` keeps as they are. @internal
 */
export abstract class KernelGroup {
  /** Where each kernel's trace numbers start in an entry (and, last, where they end). */
  protected readonly traceOffsets: readonly number[];
  /** The kernels' trace widths summed. */
  readonly traceWidth: number;

  constructor(protected readonly kernels: readonly Kernel[]) {
    this.traceOffsets = sideBySide(kernels, (kernel) => kernel.traceWidth);
    this.traceWidth = this.traceOffsets[kernels.length]!;
  }

  /** Each kernel's region, retuned to the one in its place in `next` (a group of one shape). */
  retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    const to = (next as unknown as KernelGroup).kernels;
    const kernels = this.kernels;
    for (let i = 0; i < kernels.length; i++) {
      if (to[i] !== kernels[i])
        kernels[i]!.retuneTrace(to[i]!, table, o + this.traceOffsets[i]!, now);
    }
  }

  /** Each kernel takes the numbers of the one in its place in `next`. */
  adopt(next: Kernel): void {
    const to = (next as unknown as KernelGroup).kernels;
    const kernels = this.kernels;
    for (let i = 0; i < kernels.length; i++) if (to[i] !== kernels[i]) kernels[i]!.adopt(to[i]!);
  }

  /** The entry applies while any kernel's region does. */
  traceExpiresMs(table: Float64Array, o: number): number {
    let at = Number.NEGATIVE_INFINITY;
    const kernels = this.kernels;
    for (let i = 0; i < kernels.length; i++) {
      const t = kernels[i]!.traceExpiresMs(table, o + this.traceOffsets[i]!);
      if (t > at) at = t;
    }
    return at;
  }

  bind(sink: { addBytes(delta: number, slot?: number): void }): void {
    for (const kernel of this.kernels) kernel.bind(sink);
  }

  grow(slots: number): void {
    for (const kernel of this.kernels) kernel.grow(slots);
  }
}

/**
 * Where each kernel's region starts when each takes `width(kernel)` numbers side by side,
 * and, one past the last, their sum. @internal
 */
export function sideBySide(
  kernels: readonly Kernel[],
  width: (kernel: Kernel) => number,
): number[] {
  const at = [0];
  for (const kernel of kernels) at.push(at[at.length - 1]! + width(kernel));
  return at;
}
