import { checkNumber } from "../core/errors.js";

/**
 * A binary min-heap of items by time, then by arrival (items of one time come out in the
 * order they went in), in parallel arrays: no object per item.
 */
export class TimeHeap<T> {
  private readonly times: number[] = [];
  private readonly seqs: number[] = [];
  private readonly items: T[] = [];
  private seq = 0;

  /** Items held. */
  get size(): number {
    return this.times.length;
  }

  /** The first item's time; +Infinity when empty. */
  get firstMs(): number {
    return this.times.length > 0 ? this.times[0]! : Number.POSITIVE_INFINITY;
  }

  /** Adds `item` at `timeMs`. */
  push(timeMs: number, item: T): void {
    const seq = this.seq++;
    let i = this.times.length;
    this.times.push(timeMs);
    this.seqs.push(seq);
    this.items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(timeMs, seq, this.times[parent]!, this.seqs[parent]!)) break;
      this.move(parent, i);
      i = parent;
    }
    this.set(i, timeMs, seq, item);
  }

  /** Removes and returns the first item; the heap must not be empty. */
  pop(): T {
    const first = this.items[0]!;
    const t = this.times.pop()!;
    const s = this.seqs.pop()!;
    const item = this.items.pop()!;
    const n = this.times.length;
    if (n === 0) return first;
    // Places the last item from the root down.
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      const right = child + 1;
      if (
        right < n &&
        before(this.times[right]!, this.seqs[right]!, this.times[child]!, this.seqs[child]!)
      ) {
        child = right;
      }
      if (!before(this.times[child]!, this.seqs[child]!, t, s)) break;
      this.move(child, i);
      i = child;
    }
    this.set(i, t, s, item);
    return first;
  }

  /** Drops every item. */
  clear(): void {
    this.times.length = this.seqs.length = this.items.length = 0;
  }

  private move(from: number, to: number): void {
    this.set(to, this.times[from]!, this.seqs[from]!, this.items[from]!);
  }

  private set(i: number, t: number, s: number, item: T): void {
    this.times[i] = t;
    this.seqs[i] = s;
    this.items[i] = item;
  }
}

function before(t1: number, s1: number, t2: number, s2: number): boolean {
  return t1 < t2 || (t1 === t2 && s1 < s2);
}

/**
 * A bounded reorder buffer: puts items that arrive roughly in time order back in time
 * order, holding each for at most `windowMs` of log time.
 *
 * Access logs are written when a request ends, so timestamps step back by up to the
 * longest request. The buffer keeps a min-heap by `(timeMs, arrival)` and releases every
 * item `windowMs` behind the latest time pushed. Memory: the items of one window.
 *
 * An item older than the last released one is "too late": released at once at the last
 * released time, as a clock going backwards stands still
 * (docs/semantics.md#clocks-going-backwards). Counts: `reordered` (put in order) and
 * `late`. A window of 0 releases everything at once (every step back is late).
 */
export class ReorderBuffer<T> extends TimeHeap<T> {
  /** How far behind the latest time an item may arrive and still be ordered, in ms (>= 0). */
  readonly windowMs: number;
  /** Items that arrived behind an earlier item's time and were put in order. */
  reordered = 0;
  /** Items that arrived behind the last released time and were released at that time. */
  late = 0;
  /** Most items held at once. */
  peakSize = 0;
  /** The time of the last released item (-Infinity before the first). */
  lastReleasedMs = Number.NEGATIVE_INFINITY;

  private latestMs = Number.NEGATIVE_INFINITY;

  /**
   * @param windowMs How long (log time, ms) an item may trail the latest one and still be
   *   put in order; a finite number >= 0.
   * @param emit Called with each item in time order, with the time to process it at.
   * @throws {TypeError} If `windowMs` is not a number.
   * @throws {RangeError} If `windowMs` is not a finite number >= 0.
   */
  constructor(
    windowMs: number,
    private readonly emit: (timeMs: number, item: T) => void,
  ) {
    super();
    this.windowMs = checkNumber("ReorderBuffer", "windowMs", windowMs, 0, true);
  }

  /** Adds an item with its time (ms); releases every item that is now `windowMs` behind. */
  override push(timeMs: number, item: T): void {
    if (timeMs < this.lastReleasedMs) {
      this.late++;
      this.emit(this.lastReleasedMs, item);
      return;
    }
    if (timeMs < this.latestMs) this.reordered++;
    else this.latestMs = timeMs;
    super.push(timeMs, item);
    if (this.size > this.peakSize) this.peakSize = this.size;
    const releaseTo = this.latestMs - this.windowMs;
    while (this.size > 0 && this.firstMs <= releaseTo) this.release();
  }

  /** Releases every held item, in order (at the end of the input). */
  flush(): void {
    while (this.size > 0) this.release();
  }

  private release(): void {
    const timeMs = this.firstMs;
    const item = this.pop();
    this.lastReleasedMs = timeMs;
    this.emit(timeMs, item);
  }
}
