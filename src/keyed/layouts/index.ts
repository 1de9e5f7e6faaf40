import { CATALOG } from "../../algorithms/catalog.js";
import type { Kernel, KeyedForm } from "../../algorithms/kernel.js";
import { AllOf } from "../../composite/all-of.js";
import type { Clock, Limiter } from "../../core/limiter.js";
import { AllOfLayout } from "./all-of.js";

/** A policy's slab: its layout and how its clock readings are checked. */
export interface Slab {
  readonly layout: Kernel;
  readonly clock: Clock;
  /** Readings must stay within ±this (a window's float-step bound); `Infinity` for buckets. */
  readonly clockBoundMs: number;
  /** The class whose clock error a reading past the bound throws, and its window. */
  readonly clockWhere: string;
  readonly windowMs: number;
  /** A bucket policy's waiting (a ledger over the slot); `undefined`: a first-in, first-out queue. */
  readonly bucket: BucketWaiting | undefined;
}

/** How a bucket policy's keys wait (its ledger's numbers); `undefined` for the windows. */
export interface BucketWaiting {
  readonly capacity: number;
  readonly ratePerSecond: number;
  /** True for the leaky bucket's shaping. */
  readonly shaping: boolean;
}

/**
 * A single algorithm's slab, or `undefined` when `policy` is not exactly a catalog class
 * (a subclass may override anything the slab would skip; the prototype is compared, not
 * `constructor`, which an object may shadow). Each class says how its keys are kept
 * (`keyedForm`, src/algorithms/kernel.ts): a new algorithm adds no row here.
 */
function partSlab(policy: Limiter): Slab | undefined {
  const proto: unknown = Object.getPrototypeOf(policy);
  if (!CATALOG.some((row) => row.Class.prototype === proto)) return undefined;
  const { kernel, ...form } = (policy as unknown as { keyedForm(): KeyedForm }).keyedForm();
  return { ...form, layout: kernel, clock: (policy as unknown as { clock: Clock }).clock };
}

/** The leaves of `policy`: an exact `AllOf`'s parts (nested ones flattened), in order; else itself. */
export function leavesOf(policy: Limiter): Limiter[] {
  if (Object.getPrototypeOf(policy) !== AllOf.prototype) return [policy];
  return (policy as AllOf).parts.flatMap(leavesOf);
}

/**
 * The slab serving `policy` on the fast path: exactly one of the built-in classes (not a
 * subclass, whose overrides the slab would skip), or an exact `allOf` of them sharing one
 * clock (one reading per call serves every part); `undefined` for the generic path.
 */
export function slabOf(policy: unknown): Slab | undefined {
  if (typeof policy !== "object" || policy === null) return undefined;
  if (Object.getPrototypeOf(policy) !== AllOf.prototype) return partSlab(policy as Limiter);
  const slabs: Slab[] = [];
  for (const leaf of leavesOf(policy as Limiter)) {
    const slab = partSlab(leaf);
    if (slab === undefined || (slabs.length > 0 && slab.clock !== slabs[0]!.clock))
      return undefined;
    slabs.push(slab);
  }
  return { ...joinSlabs(new AllOfLayout(slabs.map((s) => s.layout)), slabs), bucket: undefined };
}

/**
 * One slab of `layout` over `slabs` on one clock (an `allOf`'s parts, a registry's plans):
 * the first one's waiting, and the tightest window bound, which checks every reading (a
 * reading within it is within the others).
 */
export function joinSlabs(layout: Kernel, slabs: readonly Slab[]): Slab {
  let tightest = slabs[0]!;
  for (const slab of slabs) if (slab.clockBoundMs < tightest.clockBoundMs) tightest = slab;
  return { ...tightest, layout, bucket: slabs[0]!.bucket };
}
