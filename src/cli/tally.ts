import { DistinctEstimate } from "./distinct.js";

/** One client in the top list of a replay. */
export interface KeyReport {
  readonly key: string;
  /** Requests counted (from its first denial on when `approximate`). */
  readonly requests: number;
  /** Most requests in one calendar minute (UTC, by replay time), of those counted. */
  readonly peakPerMinute: number;
  /** Denials per policy, in the order of the replay's `results` (counted ones). */
  readonly denied: readonly number[];
  /**
   * True when the key was first counted after the tally was full (see {@link ClientTally}):
   * its requests and peak count from its first denial then, and its true denials of each
   * policy are at most `denied[i] + deniedErrorMax`.
   */
  readonly approximate: boolean;
  /** How many denials the counts may miss (0 when exact). */
  readonly deniedErrorMax: number;
}

/**
 * Per-client tallies of a replay (requests, peak per minute, denials per policy) in
 * memory bounded by `capacity` keys, whatever the number of distinct clients.
 *
 * Exact while at most `capacity` distinct keys have been seen; beyond, the Space-Saving
 * algorithm (Metwally, Agrawal, El Abbadi, 2005) over denials: a key not held is counted
 * only if some policy denied it, and then takes the slot of the held key with the fewest
 * denials (plus error), inheriting that as its error. So every client with more than
 * (all denials) / capacity is held, with true denials in `[denied, denied + error]`. The
 * distinct count turns into a HyperLogLog estimate ({@link DistinctEstimate}) then.
 *
 * Memory: per held key one Map entry, its string, and 6 + `policies` numbers in typed
 * arrays (grown by doubling up to `capacity`). See docs/replay.md#how-it-works.
 */
export class ClientTally {
  /** Requests not counted per key: allowed requests of keys not held once full. */
  untallied = 0;

  private readonly slots = new Map<string, number>();
  private keys: string[] = [];
  private requests = new Float64Array(0);
  private minute = new Float64Array(0);
  private inMinute = new Float64Array(0);
  private peak = new Float64Array(0);
  private denied = new Float64Array(0);
  private deniedTotal = new Float64Array(0);
  private error = new Float64Array(0);
  private late = new Uint8Array(0);
  /** Min-heap of slots by deniedTotal + error, built when the tally fills. */
  private heap: Int32Array | undefined;
  private heapIndex: Int32Array | undefined;
  private estimate: DistinctEstimate | undefined;

  /**
   * @param capacity Keys held at most (an integer >= 1).
   * @param policies Policies per request (denial counts per key).
   * @throws {RangeError} When `capacity` is not an integer >= 1.
   */
  constructor(
    readonly capacity: number,
    private readonly policies: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`ClientTally: capacity must be an integer >= 1, got ${capacity}`);
    }
  }

  /** Keys held now (at most `capacity`). */
  get size(): number {
    return this.slots.size;
  }

  /** Distinct keys seen: exact while {@link distinctExact}, else an estimate. */
  get distinct(): number {
    return this.estimate === undefined ? this.slots.size : this.estimate.estimate();
  }

  /** False once a key was seen that the tally could not hold. */
  get distinctExact(): boolean {
    return this.estimate === undefined;
  }

  /**
   * Counts one request of `key` in calendar minute `minute`; `denied[i]` is 1 when policy
   * `i` denied it. Returns the key's requests in this minute so far (0 when not counted).
   */
  count(key: string, minute: number, denied: Uint8Array): number {
    let slot = this.slots.get(key);
    this.estimate?.add(key);
    if (slot === undefined) {
      let any = 0;
      for (let i = 0; i < this.policies; i++) any |= denied[i]!;
      slot = this.admit(key, any === 1);
      if (slot === -1) {
        this.untallied++;
        return 0;
      }
    }
    this.requests[slot]!++;
    if (this.minute[slot] !== minute) {
      this.minute[slot] = minute;
      this.inMinute[slot] = 0;
    }
    const inMinute = ++this.inMinute[slot]!;
    if (inMinute > this.peak[slot]!) this.peak[slot] = inMinute;
    let deniedNow = 0;
    const base = slot * this.policies;
    for (let i = 0; i < this.policies; i++) {
      const d = denied[i]!;
      this.denied[base + i]! += d;
      deniedNow += d;
    }
    if (deniedNow > 0) {
      this.deniedTotal[slot]! += deniedNow;
      if (this.heap !== undefined) this.siftDown(this.heapIndex![slot]!);
    }
    return inMinute;
  }

  /** The `n` held keys with the most denials (first policy, then all, then requests, then name). */
  top(n: number): KeyReport[] {
    if (n <= 0) return [];
    const held: number[] = [];
    for (const slot of this.slots.values()) if (this.deniedTotal[slot]! > 0) held.push(slot);
    const p = this.policies;
    held.sort(
      (a, b) =>
        this.denied[b * p]! - this.denied[a * p]! ||
        this.deniedTotal[b]! - this.deniedTotal[a]! ||
        this.requests[b]! - this.requests[a]! ||
        (this.keys[a]! < this.keys[b]! ? -1 : this.keys[a]! > this.keys[b]! ? 1 : 0),
    );
    return held.slice(0, n).map((slot) => ({
      key: this.keys[slot]!,
      requests: this.requests[slot]!,
      peakPerMinute: this.peak[slot]!,
      denied: Array.from(this.denied.subarray(slot * p, slot * p + p)),
      approximate: this.late[slot] === 1,
      deniedErrorMax: this.error[slot]!,
    }));
  }

  /** A slot for a key not held: a new one, the least-denied one's (when `denied`), or -1. */
  private admit(key: string, denied: boolean): number {
    const size = this.slots.size;
    if (size < this.capacity) {
      if (size === this.requests.length) this.grow();
      this.keys.push(key);
      this.slots.set(key, size);
      return size;
    }
    if (this.estimate === undefined) {
      // The first key not held: from now on the count of distinct keys is estimated.
      this.estimate = new DistinctEstimate();
      for (const k of this.keys) this.estimate.add(k);
      this.estimate.add(key);
      this.buildHeap();
    }
    if (!denied) return -1;
    const heap = this.heap!;
    const slot = heap[0]!;
    this.slots.delete(this.keys[slot]!);
    this.keys[slot] = key;
    this.slots.set(key, slot);
    this.error[slot] = this.deniedTotal[slot]! + this.error[slot]!;
    this.deniedTotal[slot] = 0;
    this.requests[slot] = 0;
    this.minute[slot] = Number.NaN;
    this.inMinute[slot] = 0;
    this.peak[slot] = 0;
    this.denied.fill(0, slot * this.policies, (slot + 1) * this.policies);
    this.late[slot] = 1;
    return slot;
  }

  private grow(): void {
    const n = Math.min(this.capacity, Math.max(1024, this.requests.length * 2));
    const more = <T extends Float64Array | Uint8Array>(old: T, factor = 1): T => {
      const next = new (old.constructor as new (n: number) => T)(n * factor);
      next.set(old);
      return next;
    };
    this.requests = more(this.requests);
    this.minute = more(this.minute);
    this.inMinute = more(this.inMinute);
    this.peak = more(this.peak);
    this.denied = more(this.denied, this.policies);
    this.deniedTotal = more(this.deniedTotal);
    this.error = more(this.error);
    this.late = more(this.late);
    // `keys` grows by push; its length is the slots in use.
  }

  private weight(slot: number): number {
    return this.deniedTotal[slot]! + this.error[slot]!;
  }

  private buildHeap(): void {
    const n = this.keys.length;
    this.heap = new Int32Array(n);
    this.heapIndex = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      this.heap[i] = i;
      this.heapIndex[i] = i;
    }
    for (let i = (n >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  /** Restores the heap below position `at`, whose weight grew. */
  private siftDown(at: number): void {
    const heap = this.heap!;
    const index = this.heapIndex!;
    const n = heap.length;
    const slot = heap[at]!;
    const w = this.weight(slot);
    let i = at;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && this.weight(heap[child + 1]!) < this.weight(heap[child]!)) child++;
      if (this.weight(heap[child]!) >= w) break;
      heap[i] = heap[child]!;
      index[heap[i]!] = i;
      i = child;
    }
    heap[i] = slot;
    index[slot] = i;
  }
}
