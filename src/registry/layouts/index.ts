import { FixedWindow } from "../../algorithms/fixed-window.js";
import { LeakyBucket } from "../../algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../../algorithms/sliding-window-counter.js";
import { SlidingWindowLog } from "../../algorithms/sliding-window-log.js";
import { windowClockBoundMs } from "../../algorithms/time.js";
import { TokenBucket } from "../../algorithms/token-bucket.js";
import { AllOf } from "../../composite.js";
import type { Clock, Limiter } from "../../limiter.js";
import type { SlotLayout } from "../layout.js";
import { AllOfLayout } from "./all-of.js";
import { BucketLayout } from "./bucket.js";
import { FixedWindowLayout } from "./fixed-window.js";
import { SlidingWindowCounterLayout } from "./sliding-window-counter.js";
import { SlidingWindowLogLayout } from "./sliding-window-log.js";

/** A policy's slab: its layout and how its clock readings are checked. */
export interface Slab {
  readonly layout: SlotLayout;
  readonly clock: Clock;
  /** Readings must stay within ±this (a window's float-step bound); `Infinity` for buckets. */
  readonly clockBoundMs: number;
  /** The class whose clock error a reading past the bound throws, and its window. */
  readonly clockWhere: string;
  readonly windowMs: number;
  /** Which generated keyed class serves it (see registry.ts). */
  readonly kind: "bucket" | "fixedWindow" | "counter" | "log" | "allOf";
}

/** A single-algorithm slab, or `undefined` when `policy` is not exactly a built-in class. */
function partSlab(policy: Limiter): Slab | undefined {
  const proto: unknown = Object.getPrototypeOf(policy);
  const bucket = (layout: SlotLayout, clock: Clock): Slab => ({
    layout,
    clock,
    clockBoundMs: Number.POSITIVE_INFINITY,
    clockWhere: "KeyedLimiter",
    windowMs: 1,
    kind: "bucket",
  });
  const window = (
    layout: SlotLayout,
    p: { clock: Clock; windowMs: number },
    where: string,
    kind: Slab["kind"],
  ): Slab => ({
    layout,
    clock: p.clock,
    clockBoundMs: windowClockBoundMs(p.windowMs),
    clockWhere: where,
    windowMs: p.windowMs,
    kind,
  });
  if (proto === TokenBucket.prototype) {
    const p = policy as TokenBucket;
    return bucket(new BucketLayout(p.capacity, p.refillPerSecond), p.clock);
  }
  if (proto === LeakyBucket.prototype) {
    const p = policy as LeakyBucket;
    return bucket(new BucketLayout(p.capacity, p.leakPerSecond), p.clock);
  }
  if (proto === FixedWindow.prototype) {
    const p = policy as FixedWindow;
    return window(new FixedWindowLayout(p.limit, p.windowMs), p, "FixedWindow", "fixedWindow");
  }
  if (proto === SlidingWindowCounter.prototype) {
    const p = policy as SlidingWindowCounter;
    return window(
      new SlidingWindowCounterLayout(p.limit, p.windowMs),
      p,
      "SlidingWindowCounter",
      "counter",
    );
  }
  if (proto === SlidingWindowLog.prototype) {
    const p = policy as SlidingWindowLog;
    return window(new SlidingWindowLogLayout(p.limit, p.windowMs), p, "SlidingWindowLog", "log");
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
    kind: "allOf",
  };
}
