/**
 * Requests and denials over time for the replay chart, in memory bounded by a constant whatever the
 * span of the log: at most {@link MAX_SERIES_BUCKETS} buckets, which grow coarser (1 minute, 5, 15,
 * 1 h, 6 h, 1 day, 1 week, then doubling) when a log has more minutes with requests than that.
 */

/** A minute, in ms. */
export const MINUTE_MS = 60_000;

/**
 * The most buckets a {@link SeriesBuilder} holds by default: 4096, about 2.8 days of
 * minutes that all have requests. The chart draws at most a few hundred bars, so this
 * keeps one bar per minute for any log it can show minute by minute.
 */
export const MAX_SERIES_BUCKETS = 4096;

/** Bucket sizes in minutes, each a multiple of the one before; past the last, doubling. */
const BUCKET_MINUTES = [1, 5, 15, 60, 360, 1440, 10_080];

/**
 * Requests and denials per minute, sorted by time, only buckets with requests. Each entry is a
 * bucket of `bucketMinutes` minutes (1 unless the log had more than {@link MAX_SERIES_BUCKETS}
 * minutes with requests) and holds per-minute values: the most requests of any one minute in it,
 * and so on, so the values read as "per minute" at any bucket size.
 */
export interface MinuteSeries {
  /** Start of each bucket, epoch ms. */
  readonly minuteMs: readonly number[];
  /** Minutes per bucket: 1, 5, 15, 60, 360, 1440, 10080, then doublings of 10080. @default 1 */
  readonly bucketMinutes?: number | undefined;
  /** Requests of all clients in the busiest minute of the bucket. */
  readonly requests: readonly number[];
  /** Most requests of one client in one minute of the bucket (of the clients the tally holds). */
  readonly busiestClient: readonly number[];
  /** Most denials of each policy in one minute of the bucket, one array per policy. */
  readonly denied: readonly (readonly number[])[];
}

/** `minutes` for people: `5 min`, `1 h`, `6 h`, `1 d`, `7 d`, `14 d`. */
export function bucketText(minutes: number): string {
  if (minutes % 1440 === 0) return `${minutes / 1440} d`;
  if (minutes % 60 === 0) return `${minutes / 60} h`;
  return `${minutes} min`;
}

/**
 * Collects the {@link MinuteSeries} of a replay. Minutes must come in non-decreasing
 * order (the replay's clock never goes back): the current minute is counted exactly, and
 * folded into its bucket (by maximum) when the next minute starts.
 */
export class SeriesBuilder {
  /** Minutes per bucket now. */
  minutesPerBucket = 1;
  /** Bucket index (minute / minutesPerBucket) → [requests, busiest client, denials…]. */
  private buckets = new Map<number, Float64Array>();
  private minute = Number.NaN;
  private readonly current: Float64Array;

  /**
   * @param policies Policies per request (one denial column each).
   * @param maxBuckets Buckets held at most (an integer >= 2: minutes before and after
   *   1970 never share a bucket).
   * @throws {RangeError} When `maxBuckets` is not an integer >= 2.
   */
  constructor(
    private readonly policies: number,
    readonly maxBuckets = MAX_SERIES_BUCKETS,
  ) {
    if (!Number.isInteger(maxBuckets) || maxBuckets < 2) {
      throw new RangeError(`SeriesBuilder: maxBuckets must be an integer >= 2, got ${maxBuckets}`);
    }
    this.current = new Float64Array(2 + policies);
  }

  /** Buckets held now (at most `maxBuckets`; the minute being counted is one more array). */
  get size(): number {
    return this.buckets.size;
  }

  /**
   * Counts one request in calendar minute `minute` (epoch ms / 60,000, floored); `clientInMinute`
   * is its client's requests in that minute so far, `denied[i]` is 1 when policy `i` denied it.
   */
  add(minute: number, clientInMinute: number, denied: Uint8Array): void {
    const c = this.current;
    if (minute !== this.minute) {
      this.fold();
      this.minute = minute;
      c.fill(0);
    }
    c[0]!++;
    if (clientInMinute > c[1]!) c[1] = clientInMinute;
    for (let i = 0; i < this.policies; i++) c[2 + i]! += denied[i]!;
  }

  /** The series so far, sorted by time. */
  finish(): MinuteSeries {
    this.fold();
    this.minute = Number.NaN;
    const indexes = [...this.buckets.keys()].sort((a, b) => a - b);
    const column = (i: number) => indexes.map((b) => this.buckets.get(b)![i]!);
    return {
      minuteMs: indexes.map((b) => b * this.minutesPerBucket * MINUTE_MS),
      bucketMinutes: this.minutesPerBucket,
      requests: column(0),
      busiestClient: column(1),
      denied: Array.from({ length: this.policies }, (_, i) => column(2 + i)),
    };
  }

  /** Moves the current minute into its bucket, coarsening first when none is free. */
  private fold(): void {
    if (Number.isNaN(this.minute)) return;
    let index = Math.floor(this.minute / this.minutesPerBucket);
    while (!this.buckets.has(index) && this.buckets.size >= this.maxBuckets) {
      this.coarsen();
      index = Math.floor(this.minute / this.minutesPerBucket);
    }
    let bucket = this.buckets.get(index);
    if (bucket === undefined) {
      this.buckets.set(index, (bucket = new Float64Array(2 + this.policies)));
    }
    maxInto(bucket, this.current);
  }

  /** The next bucket size; each bucket goes into the coarser one that holds it. */
  private coarsen(): void {
    const from = this.minutesPerBucket;
    const at = BUCKET_MINUTES.indexOf(from);
    const to = at >= 0 && at < BUCKET_MINUTES.length - 1 ? BUCKET_MINUTES[at + 1]! : from * 2;
    const coarser = new Map<number, Float64Array>();
    for (const [index, values] of this.buckets) {
      const into = Math.floor((index * from) / to);
      const bucket = coarser.get(into);
      if (bucket === undefined) coarser.set(into, values);
      else maxInto(bucket, values);
    }
    this.buckets = coarser;
    this.minutesPerBucket = to;
  }
}

/** `into[i] = max(into[i], values[i])` for every column. */
function maxInto(into: Float64Array, values: Float64Array): void {
  for (let i = 0; i < into.length; i++) if (values[i]! > into[i]!) into[i] = values[i]!;
}
