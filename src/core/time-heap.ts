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
