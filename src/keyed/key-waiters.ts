import { HeldBucket } from "../algorithms/bucket-kernel.js";
import { RateLimitError } from "../core/errors.js";
import type { Decision, WaitOptions } from "../core/limiter.js";
import { WaitQueue } from "../core/wait.js";
import type { SlabEngine } from "./engine.js";
import type { BucketWaiting, Slab } from "./layouts/index.js";
import { WHERE } from "./options.js";
import type { PlanTable } from "./plans.js";

/** The part of the registry a waiting key's queue drives. */
interface Registry {
  consume(key: string, cost: number): Decision;
  peek(key: string, cost: number): Decision;
}

/** A key with pending waits: its slot (pinned meanwhile) and what serves them. */
interface Entry {
  readonly key: string;
  readonly slot: number;
  /** A bucket's held units and ledger over the slot; else undefined (set once). */
  bucket: HeldBucket | undefined;
  /** A window's or `allOf`'s queue, which polls the registry for the key; else undefined (set once). */
  queue: WaitQueue | undefined;
  /** `wait` calls not yet settled. */
  inflight: number;
}

/**
 * Waiting on the fast path of {@link KeyedLimiter}: a key's waiters live beside its slot,
 * which stays in the slab, pinned (never swept nor evicted, counted toward the bounds)
 * while any wait is pending; no state moves out. One first-in, first-out list per key:
 * - a `TokenBucket` or `LeakyBucket` policy: the buckets' own {@link HeldBucket} over the
 *   slot (a token bucket goes into debt, a leaky bucket shapes), so the slot decides as a
 *   bucket of its own with those waiters would;
 * - any other policy: a {@link WaitQueue} polling the registry's `peek` for the key.
 * At most `maxWaiters` waits are pending per registry; an aborted or expired wait leaves
 * at once, and the key's entry goes when its last wait settles. @internal
 */
export class KeyWaiters {
  private readonly byKey = new Map<string, Entry>();
  private readonly bySlot = new Map<number, Entry>();
  /** @internal Pending waits, against `maxWaiters`. */
  private pending = 0;
  private bucket: BucketWaiting | undefined;
  /** A plan registry's bucket numbers, by plan id (see {@link usePlans}); else undefined. */
  private planBuckets: (BucketWaiting | undefined)[] | undefined;
  /** @internal The plan id of a slot, for {@link planBuckets}. */
  private planOf: (slot: number) => number = () => 0;
  /** Most keys with waiters: half of `maxKeys`, so evicting always finds a key to push out. */
  private readonly maxPinned: number;

  constructor(
    private readonly engine: SlabEngine,
    private readonly slab: Slab,
    private readonly registry: Registry & { readonly maxWaiters: number; readonly maxKeys: number },
  ) {
    this.bucket = slab.bucket;
    this.maxPinned = Math.max(1, Math.floor(registry.maxKeys / 2));
  }

  /** For a plan registry: a slot's waiters then wait by its plan's bucket numbers. */
  usePlans(plans: PlanTable): void {
    this.planBuckets = plans.slabs.map((s) => s.bucket);
    this.planOf = (slot) => plans.layout.plans[slot]!;
  }

  /** @internal The bucket numbers `slot`'s waiters wait by; `undefined` for a window. */
  private bucketAt(slot: number): BucketWaiting | undefined {
    return this.planBuckets === undefined ? this.bucket : this.planBuckets[this.planOf(slot)];
  }

  /** `wait` for a checked key and cost (at most the layout's limit). Never throws. */
  wait(key: string, cost: number, options: WaitOptions | undefined): Promise<Decision> {
    const max = this.registry.maxWaiters;
    if (this.pending >= max) {
      const why =
        max === 0 ? "maxWaiters is 0: no wait is taken" : `maxWaiters (${max}) waits are pending`;
      return this.refuse(why, key, cost);
    }
    let entry = this.byKey.get(key);
    if (entry === undefined) {
      if (this.engine.waitingSlots >= this.maxPinned) {
        const why = `half of maxKeys (${this.maxPinned} keys) already wait; a new key may not`;
        return this.refuse(why, key, cost);
      }
      const made = this.enter(key);
      if (made === undefined) {
        return this.refuse("the registry is full and cannot keep this key", key, cost);
      }
      entry = made;
    }
    const bytes = WAITER_BYTES + (options?.signal === undefined ? 0 : SIGNAL_BYTES);
    if (!this.engine.reserve(bytes, entry.slot)) {
      if (entry.inflight === 0) this.leave(entry);
      return this.refuse("maxBytes is reached and no other key can make room", key, cost);
    }
    this.engine.addBytes(bytes, entry.slot);
    const promise =
      entry.bucket !== undefined
        ? entry.bucket.ledger.wait(cost, options, `${WHERE}.wait`)
        : entry.queue!.wait(cost, options);
    entry.inflight++;
    this.pending++;
    const e = entry;
    const settled = () => {
      this.pending--;
      this.engine.addBytes(-bytes);
      if (--e.inflight === 0) this.leave(e);
    };
    promise.then(settled, settled);
    return promise;
  }

  /**
   * The decision of a pinned slot whose bucket ledger holds units (as `BucketBase`
   * decides with a ledger), or `undefined` when the slot decides as usual.
   */
  decide(slot: number, cost: number, now: number, take: boolean): Decision | undefined {
    return this.bySlot.get(slot)?.bucket?.decideAt(now, cost, take);
  }

  /**
   * Gives back `cost` (> 0) to a waiting key at `now`, as the policy's own `refund` does with
   * waiters: a bucket's units rise, never above capacity plus what its ledger holds, and the ledger
   * serves who is due, in order; a window's slot gives back by its rule and its queue re-checks the
   * head. Writes what each leaf gave back into `given`; returns what the key is credited (a
   * bucket's units given back), or -1 when the slot has no waiters (the slot decides).
   */
  refund(slot: number, cost: number, now: number, given: Float64Array): number {
    const entry = this.bySlot.get(slot);
    if (entry === undefined) return -1;
    if (entry.bucket !== undefined) {
      given[0] = entry.bucket.refundAt(now, cost);
      return given[0];
    }
    const e = this.engine;
    const credit = e.layout.refundAt(e.state, slot * e.stride, slot, now, cost, given, 0);
    entry.queue!.wake();
    return credit;
  }

  /**
   * True when the slot's waiters are served by a bucket ledger: its refunds go through
   * {@link refund}, and {@link retune} carries its state over.
   */
  hasLedger(slot: number): boolean {
    return this.bySlot.get(slot)?.bucket !== undefined;
  }

  /** Re-checks the head waiter of a waiting window or `allOf` key (after a refund). */
  wake(slot: number): void {
    this.bySlot.get(slot)?.queue?.wake();
  }

  /** Resets a waiting bucket key as `BucketBase` resets (waiters keep their place); false if none. */
  reset(key: string): boolean {
    const entry = this.byKey.get(key);
    if (entry?.bucket === undefined) return false;
    this.resetBucket(entry.bucket);
    return true;
  }

  /** Resets every waiting bucket key (after the engine re-initialised the pinned slots). */
  resetAll(): void {
    for (const entry of this.byKey.values())
      if (entry.bucket !== undefined) this.resetBucket(entry.bucket);
  }

  /** @internal Full again: fresh, or with units held from now, its waiters keeping their place. */
  private resetBucket(bucket: HeldBucket): void {
    const now = bucket.held !== 0 ? this.engine.now() : Number.NEGATIVE_INFINITY;
    bucket.resetTo(bucket.capacity, now);
  }

  /** @internal Gives `key` a pinned slot and its waiting list; `undefined` when the registry is full. */
  private enter(key: string): Entry | undefined {
    const e = this.engine;
    const now = e.now();
    let slot = e.lookup(key);
    if (slot < 0) slot = e.insert(key, now);
    if (slot < 0) return undefined;
    e.pin(slot);
    const registry = this.registry;
    const entry: Entry = { key, slot, bucket: undefined, queue: undefined, inflight: 0 };
    const b = this.bucketAt(slot);
    if (b !== undefined) entry.bucket = this.heldBucket(slot, b.shaping);
    else {
      entry.queue = new WaitQueue(
        WHERE,
        { peek: (c = 1) => registry.peek(key, c), consume: (c = 1) => registry.consume(key, c) },
        this.slab.clock,
      );
    }
    this.byKey.set(key, entry);
    this.bySlot.set(slot, entry);
    return entry;
  }

  /** @internal The held units and ledger of a waiting bucket key, over its slot's doubles. */
  private heldBucket(slot: number, shaping: boolean): HeldBucket {
    const waiters = this;
    const e = this.engine;
    return new (class extends HeldBucket {
      // Read live: reconfigure() replaces the policy's numbers, a growing engine its doubles.
      get capacity() {
        return waiters.bucketAt(slot)!.capacity;
      }
      get ratePerSecond() {
        return waiters.bucketAt(slot)!.ratePerSecond;
      }
      get st() {
        return e.state;
      }
      readonly s = slot * e.stride;
      now() {
        return e.now();
      }
    })(shaping ? "LeakyBucket" : "TokenBucket", shaping, "limit");
  }

  /**
   * `reconfigure` of a bucket policy: carries the state of every key with waiters over to
   * `next` at `now` (its units without the held ones, as `BucketBase.planBucket` does), and
   * takes the new numbers; of a plan registry, those of plan id `plan` only. Then {@link replan}, once the engine has its new numbers too.
   */
  retune(next: BucketWaiting | undefined, now: number, plan = -1): void {
    if (next === undefined) return;
    for (const { bucket, slot } of this.byKey.values()) {
      if (bucket === undefined || (plan >= 0 && this.planOf(slot) !== plan)) continue;
      if (bucket.held !== 0) bucket.ledger.settle(now);
      bucket.retune(now, next.capacity);
    }
    if (plan >= 0) this.planBuckets![plan] = next;
    else this.bucket = next;
  }

  /** Re-plans every key's waiters under the new numbers (see `BucketLedger.replan`, `WaitQueue.replan`). */
  replan(): void {
    for (const entry of [...this.byKey.values()]) {
      if (entry.bucket !== undefined) entry.bucket.ledger.replan();
      else entry.queue?.replan();
    }
  }

  /** @internal The key's last wait settled: its list goes, and its slot is unpinned (dropped if idle). */
  private leave(entry: Entry): void {
    if (this.byKey.get(entry.key) !== entry) return;
    this.byKey.delete(entry.key);
    this.bySlot.delete(entry.slot);
    try {
      this.engine.unpin(entry.slot);
    } catch {
      // A clock that throws: the slot stays unpinned and is swept later; every call throws anyway.
    }
  }

  /** @internal A wait refused at once: a `RateLimitError` with the key's decision as denied. */
  private refuse(message: string, key: string, cost: number): Promise<never> {
    const decision = this.registry.peek(key, cost);
    return Promise.reject(
      new RateLimitError(`${WHERE}.wait: ${message}`, { ...decision, allowed: false }),
    );
  }
}

/**
 * Accounted bytes of one pending wait (its promise, waiter and closures, measured at about
 * 0.9 KB), and more with an `AbortSignal` (its listener: about 2.3 KB in all).
 */
export const WAITER_BYTES = 1024;
/** See {@link WAITER_BYTES}. */
export const SIGNAL_BYTES = 1536;
