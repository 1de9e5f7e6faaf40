import { FixedWindow } from "../algorithms/fixed-window.js";
import type { LeakyBucket } from "../algorithms/leaky-bucket.js";
import { SlidingWindowCounter } from "../algorithms/sliding-window-counter.js";
import type { TokenBucket } from "../algorithms/token-bucket.js";
import { AllOf } from "../composite.js";
import type { Decision, Limiter, WaitOptions } from "../limiter.js";
import type { BucketSlab } from "./bucket-slab.js";

type Bucket = TokenBucket | LeakyBucket;
/** A limiter whose state is a slot of a slab: doubles it exports and imports. */
type SlabPart = Bucket | FixedWindow | SlidingWindowCounter;

/** A key taken out of the slab while it has waiters. */
interface Entry {
  /** A copy of the policy holding the key's state: its own `wait` serves the key. */
  readonly limiter: SlabPart | AllOf;
  /** The limiter's buckets (or its window), in slab order. */
  readonly buckets: readonly SlabPart[];
  /** `wait` calls not yet settled. */
  inflight: number;
}

/**
 * Waiting on the fast path of {@link KeyedLimiter} (a slab of buckets, or of fixed windows:
 * no object per key).
 *
 * Waiters need a place to queue and, in a bucket, units held in debt: state the slab does
 * not have. So a key's first `wait` takes the key out of the slab into a bucket object of
 * its own (a `clone()` of the policy, loaded with the key's two doubles per bucket and the
 * store's clock high-water mark), whose own `wait` serves it: a token bucket goes into
 * debt, a leaky bucket shapes, an `allOf`, a `FixedWindow` or a `SlidingWindowCounter` waits
 * first-in, first-out (a window's slot, `[count, endMs]` or `[prev, curr, index]`, loads the
 * same way). While the key is out,
 * every call for it goes to that object (the same arithmetic, so the same decisions), it
 * is never swept or evicted, and it still counts toward `maxKeys`. When its last `wait`
 * settles, its state goes back into the slab (or nowhere, when fresh again).
 *
 * Keys without waiters are untouched: their calls cost one integer test (`count`) more,
 * and allocate nothing. While some keys wait, every call does one Map lookup more.
 * @internal
 */
export class WaitingKeys {
  /** Keys out of the slab; tested before the Map on every call. */
  count = 0;
  private readonly keys = new Map<string, Entry>();

  constructor(
    private readonly slab: BucketSlab,
    private readonly template: SlabPart | AllOf,
  ) {}

  /** The limiter serving `key` while it has waiters, else `undefined`. */
  get(key: string): Limiter | undefined {
    return this.keys.get(key)?.limiter;
  }

  /** `wait` on the key's own limiter, taking the key out of the slab first if needed. */
  wait(key: string, cost: number, options: WaitOptions | undefined): Promise<Decision> {
    const entry = this.keys.get(key) ?? this.detach(key);
    entry.inflight++;
    const settled = () => {
      if (--entry.inflight === 0) this.attach(key, entry);
    };
    const limiter = entry.limiter;
    const promise =
      limiter instanceof AllOf ||
      limiter instanceof FixedWindow ||
      limiter instanceof SlidingWindowCounter
        ? limiter.wait(cost, options)
        : limiter.waitAs("KeyedLimiter.wait", cost, options);
    promise.then(settled, settled);
    return promise;
  }

  /** Resets the key's limiter if it is out of the slab (its waiters keep waiting). */
  reset(key: string): boolean {
    const entry = this.keys.get(key);
    entry?.limiter.reset();
    return entry !== undefined;
  }

  /** Resets every key out of the slab (their waiters keep waiting). */
  resetAll(): void {
    for (const entry of this.keys.values()) entry.limiter.reset();
  }

  private detach(key: string): Entry {
    const { state, seenMs } = this.slab.detach(key);
    const limiter = this.template.clone() as SlabPart | AllOf;
    const buckets = (limiter instanceof AllOf ? limiter.parts : [limiter]) as readonly SlabPart[];
    if (limiter instanceof SlidingWindowCounter) {
      const [prev, curr, index] = state ?? limiter.exportState();
      limiter.importState(prev!, curr!, index!, seenMs);
    } else {
      (buckets as readonly (Bucket | FixedWindow)[]).forEach((bucket, i) => {
        const [units, anchorMs] =
          state === undefined ? bucket.exportState() : [state[2 * i]!, state[2 * i + 1]!];
        bucket.importState(units, anchorMs, seenMs);
      });
    }
    const entry: Entry = { limiter, buckets, inflight: 0 };
    this.keys.set(key, entry);
    this.count++;
    return entry;
  }

  private attach(key: string, entry: Entry): void {
    if (this.keys.get(key) !== entry) return;
    let idle: boolean;
    try {
      idle = entry.limiter.isIdle();
    } catch {
      return; // a clock that throws: the key stays out; every call for it throws anyway
    }
    const state: number[] = [];
    let seenMs = Number.NEGATIVE_INFINITY;
    for (const bucket of entry.buckets) {
      state.push(...bucket.exportState());
      if (bucket.seenClockMs > seenMs) seenMs = bucket.seenClockMs;
    }
    this.keys.delete(key);
    this.count--;
    this.slab.attach(key, state, idle, seenMs);
  }
}
