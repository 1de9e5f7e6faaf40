import { checkNumber } from "../core/errors.js";
import { TimeHeap } from "../core/time-heap.js";

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
