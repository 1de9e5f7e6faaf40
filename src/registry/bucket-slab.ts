import { bucketDecision, tokensAfter, tokensAt } from "../algorithms/bucket-math.js";
import { badClock } from "../errors.js";
import type { Clock, Decision } from "../limiter.js";
import { fits } from "../numeric.js";
import type { KeyStore, KeyStoreStats } from "./store.js";
import { EVICT_SCAN, SWEEP_CHUNK, SWEEP_EVERY } from "./store.js";

const FIRST_SLOTS = 16;
/** Index in `params` of the latest clock reading seen (the store-wide high-water mark). */
const SEEN = 0;
/** Indexes in `params` of the (first) bucket's capacity and rate. */
const CAPACITY = 1;
const RATE = 2;
/** Number of state doubles per slot and bucket: tokens, then anchorMs. */
const STRIDE = 2;

/** A slot-to-key array of `slots` free slots (`undefined`), allocated at its final size. */
function emptyKeys(slots: number): (string | undefined)[] {
  return new Array<string | undefined>(slots).fill(undefined);
}

/** One bucket of a slab: its capacity and its refill (or leak) rate per second. */
export interface SlabBucket {
  readonly capacity: number;
  readonly ratePerSecond: number;
}

/**
 * The fast path of {@link KeyedLimiter} for a `TokenBucket` or `LeakyBucket` policy (as a
 * meter a leaky bucket's free room is a token bucket's tokens): no object per key.
 *
 * A `Map<string, number>` maps each key to a slot; a slot's state is two doubles in one
 * `Float64Array` slab (`tokens`, `anchorMs`, the fields of `TokenBucket`), decided by the
 * same free functions (`bucket-math.ts`), so every decision is bit for bit the one a
 * `TokenBucket` of its own would give. The slab grows by doubling up to `maxKeys` slots
 * and never shrinks; dropped slots go to a free list threaded through the slab itself
 * (a free slot's `tokens` double holds the next free slot), so reuse costs no memory.
 * Memory per key beyond the key string: one Map entry (about 28 bytes), 16 bytes of slab
 * and 8 bytes of the slot-to-key array (to delete a dropped key from the Map).
 *
 * The clock is read once per call, and its high-water mark is kept for the whole store,
 * not per key: a reading behind the latest one any key has seen counts as the latest.
 * With a monotonic clock (the default) that equals one high-water per key.
 * @internal
 */
export class BucketSlab implements KeyStore {
  protected readonly clock: Clock;
  private readonly maxKeys: number;
  /**
   * `[seenMs, capacity, ratePerSecond, ...]` as raw doubles (one capacity and rate per
   * bucket): read from here, V8 keeps the refill arithmetic unboxed (read from object
   * fields, it boxed one HeapNumber per call). `seenMs` is the latest clock reading seen
   * by any key.
   */
  protected readonly params: Float64Array;
  /** Doubles per slot: `[tokens, anchorMs]` per bucket. */
  protected readonly stride: number;
  protected readonly index = new Map<string, number>();
  /** Slot to key; `undefined` marks a free slot. */
  protected keys: (string | undefined)[];
  /** `[tokens, anchorMs]` per bucket and slot; a free slot's first double is the next free slot. */
  protected state: Float64Array;
  private slots: number;
  /** Slots ever handed out: slots at or above it were never used. */
  private highWater = 0;
  /** Head of the free list, -1 when empty. */
  private free = -1;
  private count = 0;
  /** Next slot the incremental sweep looks at. */
  private cursor = 0;
  protected countdown = SWEEP_EVERY;
  /** One-entry cache of the last key used, for a hot key's repeated calls. */
  protected lastKey: string | undefined;
  protected lastSlot = 0;
  /**
   * Keys kept outside the slab because they have pending waiters (see `detach`): they count
   * toward `maxKeys`, so the slab makes room for a new key when `count + external` reaches it.
   */
  private external = 0;
  private created = 0;
  private evictedIdle = 0;
  private evictedLossy = 0;

  /**
   * @param buckets Each key's buckets: `capacity` and `ratePerSecond` (`refillPerSecond` of
   *   a `TokenBucket`, `leakPerSecond` of a `LeakyBucket`, whose free room is a token
   *   bucket's tokens). This class decides with the first; a subclass decides with all.
   */
  constructor(
    buckets: readonly SlabBucket[],
    clock: Clock,
    maxKeys: number,
    /** Doubles per slot, for a subclass with another state (a window slab); default 2 per bucket. */
    doublesPerSlot = STRIDE * buckets.length,
  ) {
    this.clock = clock;
    this.maxKeys = maxKeys;
    const params = [Number.NEGATIVE_INFINITY];
    for (const b of buckets) params.push(b.capacity, b.ratePerSecond);
    this.params = new Float64Array(params);
    this.stride = doublesPerSlot;
    this.slots = Math.min(FIRST_SLOTS, maxKeys);
    this.state = new Float64Array(this.slots * this.stride);
    this.keys = emptyKeys(this.slots);
  }

  get size(): number {
    return this.count;
  }

  get stats(): KeyStoreStats {
    return {
      created: this.created,
      evictedIdle: this.evictedIdle,
      evictedLossy: this.evictedLossy,
      slots: this.slots,
      bytes: 0,
      refused: 0,
      restored: 0,
    };
  }

  /** The smallest capacity among the buckets: no cost above it can ever be allowed. */
  smallestCapacity(): number {
    let least = Number.POSITIVE_INFINITY;
    for (let i = 1; i < this.params.length; i += STRIDE) {
      if (this.params[i]! < least) least = this.params[i]!;
    }
    return least;
  }

  /**
   * Takes `key` out of the slab for waiting (its waiters need a bucket object of their own):
   * returns its state doubles (`[tokens, anchorMs]` per bucket) and the store's clock
   * high-water mark, or `undefined` state for a key without state (a fresh bucket). The key
   * counts as external until {@link attach} (it is never swept or evicted meanwhile).
   */
  detach(key: string): { state: number[] | undefined; seenMs: number } {
    this.external++;
    const seenMs = this.params[SEEN]!;
    const slot = this.index.get(key);
    if (slot === undefined) return { state: undefined, seenMs };
    const s = slot * this.stride;
    const state = Array.from(this.state.subarray(s, s + this.stride));
    this.drop(slot);
    return { state, seenMs };
  }

  /**
   * Brings a detached key back once its waiters are done: stores `state` (as returned by
   * {@link detach}, updated), or nothing when `idle` (a fresh bucket keeps no state), and
   * raises the clock high-water mark to `seenMs`.
   */
  attach(key: string, state: readonly number[], idle: boolean, seenMs: number): void {
    this.external--;
    const p = this.params;
    if (seenMs > p[SEEN]!) p[SEEN] = seenMs;
    if (idle) return;
    const s = this.insert(key, p[SEEN]!) * this.stride;
    this.created--; // the key comes back; it was not created
    for (let i = 0; i < this.stride; i++) this.state[s + i] = state[i]!;
  }

  /** Reads the clock once; a reading behind the latest one counts as the latest. */
  protected now(): number {
    const t = this.clock();
    if (typeof t !== "number" || t - t !== 0) throw badClock("KeyedLimiter", t);
    const p = this.params;
    if (t > p[SEEN]!) p[SEEN] = t;
    return p[SEEN]!;
  }

  allow(key: string, cost: number): boolean {
    const now = this.now();
    if (--this.countdown === 0) this.step();
    let slot = this.lastSlot;
    if (key !== this.lastKey) {
      const found = this.index.get(key);
      if (found === undefined) return this.allowNew(key, cost, now);
      slot = found;
      this.lastKey = key;
      this.lastSlot = slot;
    }
    const st = this.state;
    const s = slot * STRIDE;
    const p = this.params;
    const tokens = tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
    if (!fits(cost, tokens)) return cost === 0; // a free probe is allowed even in an overdraft
    if (cost > 0) {
      st[s] = tokensAfter(tokens, cost);
      st[s + 1] = now;
    }
    return true;
  }

  /** `allow` for a key without state: a fresh, full bucket. */
  private allowNew(key: string, cost: number, now: number): boolean {
    const capacity = this.params[CAPACITY]!;
    if (!fits(cost, capacity)) return false;
    if (cost > 0) this.store(this.insert(key, now), tokensAfter(capacity, cost), now);
    return true;
  }

  consume(key: string, cost: number): Decision {
    return this.decide(key, cost, true);
  }

  peek(key: string, cost: number): Decision {
    return this.decide(key, cost, false);
  }

  private decide(key: string, cost: number, take: boolean): Decision {
    const now = this.now();
    if (--this.countdown === 0) this.step();
    const slot = key === this.lastKey ? this.lastSlot : this.index.get(key);
    const p = this.params;
    const st = this.state;
    const s = slot === undefined ? -1 : slot * STRIDE;
    const capacity = p[CAPACITY]!;
    const rate = p[RATE]!;
    const tokens = s < 0 ? capacity : tokensAt(st[s]!, st[s + 1]!, now, capacity, rate);
    const decision = bucketDecision(cost, tokens, capacity, rate);
    if (take && decision.allowed && cost > 0) {
      if (slot === undefined) this.store(this.insert(key, now), tokensAfter(tokens, cost), now);
      else {
        st[s] = tokensAfter(tokens, cost);
        st[s + 1] = now;
        this.lastKey = key;
        this.lastSlot = slot;
      }
    }
    return decision;
  }

  reset(key: string): void {
    const slot = this.index.get(key);
    if (slot !== undefined) this.drop(slot);
  }

  clear(): void {
    this.index.clear();
    this.keys = emptyKeys(Math.min(FIRST_SLOTS, this.maxKeys));
    this.slots = Math.min(FIRST_SLOTS, this.maxKeys);
    this.state = new Float64Array(this.slots * this.stride);
    this.highWater = 0;
    this.free = -1;
    this.count = 0;
    this.cursor = 0;
    this.lastKey = undefined;
  }

  sweep(): number {
    const now = this.now();
    let dropped = 0;
    for (let slot = 0; slot < this.highWater; slot++) {
      if (this.keys[slot] !== undefined && this.isIdle(slot, now)) {
        this.drop(slot);
        dropped++;
      }
    }
    this.evictedIdle += dropped;
    return dropped;
  }

  /** True when the slot's bucket is full again (keys with waiters are not in the slab). */
  protected isIdle(slot: number, now: number): boolean {
    const s = slot * STRIDE;
    const st = this.state;
    const p = this.params;
    return tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!) >= p[CAPACITY]!;
  }

  /**
   * How far the slot is from idle, comparable across slots of this store: here the missing
   * tokens (every key shares one rate, so fewer missing is a smaller `resetAfterMs`).
   */
  protected untilIdle(slot: number, now: number): number {
    const s = slot * STRIDE;
    const st = this.state;
    const p = this.params;
    return p[CAPACITY]! - tokensAt(st[s]!, st[s + 1]!, now, p[CAPACITY]!, p[RATE]!);
  }

  /**
   * Breaks ties of {@link untilIdle} when making room: among slots equally far from idle,
   * the one with the least usage goes. Buckets have no tie to break (0); a window slab's
   * keys share their window's end, so there it is the count.
   */
  protected usage(_slot: number): number {
    return 0;
  }

  /** The incremental sweep, for subclasses' deciding methods. */
  protected stepNow(): void {
    this.step();
  }

  /** The incremental sweep: looks at the next few slots and drops the idle ones. */
  private step(): void {
    // The latest reading (this call's, read just before); no double crosses a call.
    const now = this.params[SEEN]!;
    this.countdown = SWEEP_EVERY;
    const n = this.highWater < SWEEP_CHUNK ? this.highWater : SWEEP_CHUNK;
    for (let i = 0; i < n; i++) {
      const slot = this.cursor;
      this.cursor = slot + 1 < this.highWater ? slot + 1 : 0;
      if (this.keys[slot] !== undefined && this.isIdle(slot, now)) {
        this.drop(slot);
        this.evictedIdle++;
      }
    }
  }

  protected store(slot: number, tokens: number, now: number): void {
    const s = slot * STRIDE;
    this.state[s] = tokens;
    this.state[s + 1] = now;
  }

  /** Takes a slot for a new key, making room first when the store is full. */
  protected insert(key: string, now: number): number {
    if (this.count + this.external >= this.maxKeys) this.makeRoom(now);
    let slot = this.free;
    if (slot >= 0) {
      this.free = this.state[slot * this.stride]!;
      this.keys[slot] = key;
    } else {
      if (this.highWater === this.slots) this.grow();
      slot = this.highWater++;
      this.keys[slot] = key;
    }
    this.index.set(key, slot);
    this.count++;
    this.created++;
    return slot;
  }

  /**
   * Frees at least one slot: drops every idle key among the next `EVICT_SCAN` used slots
   * from the sweep cursor; when none of them is idle, drops the one closest to idle
   * (smallest `untilIdle`, that is smallest `resetAfterMs`; ties: least `usage`).
   */
  private makeRoom(now: number): void {
    let victim = -1;
    let victimMissing = Number.POSITIVE_INFINITY;
    let freed = 0;
    let seen = 0;
    for (let visited = 0; visited < this.highWater && seen < EVICT_SCAN; visited++) {
      const slot = this.cursor;
      this.cursor = slot + 1 < this.highWater ? slot + 1 : 0;
      if (this.keys[slot] === undefined) continue;
      seen++;
      if (this.isIdle(slot, now)) {
        this.drop(slot);
        freed++;
        continue;
      }
      const missing = this.untilIdle(slot, now);
      if (
        victim < 0 ||
        missing < victimMissing ||
        (missing === victimMissing && this.usage(slot) < this.usage(victim))
      ) {
        victim = slot;
        victimMissing = missing;
      }
    }
    this.evictedIdle += freed;
    if (freed === 0 && victim >= 0) {
      this.drop(victim);
      this.evictedLossy++;
    }
  }

  private drop(slot: number): void {
    const key = this.keys[slot]!;
    this.index.delete(key);
    this.keys[slot] = undefined;
    this.state[slot * this.stride] = this.free;
    this.free = slot;
    this.count--;
    if (this.lastKey === key) this.lastKey = undefined;
  }

  private grow(): void {
    this.slots = Math.min(this.slots * 2, this.maxKeys);
    const state = new Float64Array(this.slots * this.stride);
    state.set(this.state);
    this.state = state;
    // The slot-to-key array grows with the slab, to exactly as many slots.
    const keys = emptyKeys(this.slots);
    for (let i = 0; i < this.highWater; i++) keys[i] = this.keys[i];
    this.keys = keys;
  }
}
