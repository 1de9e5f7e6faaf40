import { BucketKernel } from "../../algorithms/bucket-kernel.js";
import { type AlgorithmId, CATALOG } from "../../algorithms/catalog.js";
import type { FixedWindow } from "../../algorithms/fixed-window.js";
import { FixedWindowKernel } from "../../algorithms/fixed-window-kernel.js";
import type { LeakyBucket } from "../../algorithms/leaky-bucket.js";
import type { SlidingWindowCounter } from "../../algorithms/sliding-window-counter.js";
import { SlidingWindowCounterKernel } from "../../algorithms/sliding-window-counter-kernel.js";
import type { SlidingWindowLog } from "../../algorithms/sliding-window-log.js";
import { SlidingWindowLogKernel } from "../../algorithms/sliding-window-log-kernel.js";
import { windowClockBoundMs } from "../../algorithms/time.js";
import type { TokenBucket } from "../../algorithms/token-bucket.js";
import { AllOf } from "../../composite/all-of.js";
import type { Clock, Limiter } from "../../core/limiter.js";
import type { SlotLayout } from "../layout.js";
import { AllOfLayout } from "./all-of.js";

/** A policy's slab: its layout and how its clock readings are checked. */
export interface Slab {
  readonly layout: SlotLayout;
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
 * A bucket's slab: its layout, no window bound on the clock, and how its keys wait.
 * `initialUnits`: a new key's tokens (a leaky bucket's free room).
 */
function bucketSlab(
  capacity: number,
  ratePerSecond: number,
  shaping: boolean,
  clock: Clock,
  initialUnits: number,
): Slab {
  return {
    layout: new BucketKernel(capacity, ratePerSecond, shaping, initialUnits),
    clock,
    clockBoundMs: Number.POSITIVE_INFINITY,
    clockWhere: "KeyedLimiter",
    windowMs: 1,
    bucket: { capacity, ratePerSecond, shaping },
  };
}

/** A window's slab: its layout, and readings bound by its window's float step. */
function windowSlab(
  layout: SlotLayout,
  p: { clock: Clock; windowMs: number },
  where: string,
): Slab {
  return {
    layout,
    clock: p.clock,
    clockBoundMs: windowClockBoundMs(p.windowMs),
    clockWhere: where,
    windowMs: p.windowMs,
    bucket: undefined,
  };
}

/**
 * The slab of each algorithm of the catalog (src/algorithms/catalog.ts), by its id: a row missing
 * here, or one for an id the catalog lacks, is a type error. A sixth algorithm adds its
 * layout file beside the others and one row here (CONTRIBUTING.md, "Adding an algorithm").
 */
const SLABS = {
  "token-bucket": (p: TokenBucket) =>
    bucketSlab(p.capacity, p.refillPerSecond, false, p.clock, p.initialTokens),
  "leaky-bucket": (p: LeakyBucket) =>
    bucketSlab(p.capacity, p.leakPerSecond, true, p.clock, p.capacity - p.initialLevel),
  "fixed-window": (p: FixedWindow) =>
    windowSlab(new FixedWindowKernel(p.limit, p.windowMs), p, "FixedWindow"),
  "sliding-window-log": (p: SlidingWindowLog) =>
    windowSlab(new SlidingWindowLogKernel(p.limit, p.windowMs), p, "SlidingWindowLog"),
  "sliding-window-counter": (p: SlidingWindowCounter) =>
    windowSlab(new SlidingWindowCounterKernel(p.limit, p.windowMs), p, "SlidingWindowCounter"),
} as const satisfies Readonly<Record<AlgorithmId, (policy: never) => Slab>>;

/**
 * A single algorithm's slab, or `undefined` when `policy` is not exactly a catalog class
 * (a subclass may override anything the slab would skip; the prototype is compared, not
 * `constructor`, which an object may shadow).
 */
function partSlab(policy: Limiter): Slab | undefined {
  const proto: unknown = Object.getPrototypeOf(policy);
  for (const row of CATALOG) {
    if (row.Class.prototype === proto) {
      return (SLABS[row.id] as (p: Limiter) => Slab)(policy);
    }
  }
  return undefined;
}

/** The leaves of an exact `AllOf` (nested exact `AllOf` parts flattened), in order. */
function leavesOf(policy: AllOf): Limiter[] {
  const leaves: Limiter[] = [];
  for (const part of policy.parts) {
    if (Object.getPrototypeOf(part) === AllOf.prototype) leaves.push(...leavesOf(part as AllOf));
    else leaves.push(part);
  }
  return leaves;
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
  for (const leaf of leavesOf(policy as AllOf)) {
    const slab = partSlab(leaf);
    if (slab === undefined || (slabs.length > 0 && slab.clock !== slabs[0]!.clock))
      return undefined;
    slabs.push(slab);
  }
  // The tightest window bound checks every reading (a reading within it is within the others).
  let tightest = slabs[0]!;
  for (const slab of slabs) if (slab.clockBoundMs < tightest.clockBoundMs) tightest = slab;
  return {
    layout: new AllOfLayout(slabs.map((s) => s.layout)),
    clock: slabs[0]!.clock,
    clockBoundMs: tightest.clockBoundMs,
    clockWhere: tightest.clockWhere,
    windowMs: tightest.windowMs,
    bucket: undefined,
  };
}
