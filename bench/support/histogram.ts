/**
 * A latency histogram in ns for runs too long to keep every sample: 1 ns bins below
 * 10 µs (exact for in-process checks), 1% wide bins above (Redis round trips), so a
 * quantile is within 1 ns or 1% of the sample's value. Memory is fixed (about 11 000 bins).
 * @module
 */

const LINEAR = 10_000;
const STEP = Math.log(1.01);
const BINS = LINEAR + Math.ceil(Math.log(1e12 / LINEAR) / STEP) + 1;

/** Counts of latencies in ns; {@link Histogram.quantile} reads them back. */
export class Histogram {
  private readonly bins = new Float64Array(BINS);
  /** Samples added. */
  count = 0;

  /** Adds one latency in ns (negative reads as 0; above 1000 s, the last bin). */
  add(ns: number): void {
    const v = ns > 0 ? ns : 0;
    const i =
      v < LINEAR
        ? Math.floor(v)
        : Math.min(BINS - 1, LINEAR + Math.floor(Math.log(v / LINEAR) / STEP));
    this.bins[i] = (this.bins[i] ?? 0) + 1;
    this.count++;
  }

  /** The nearest-rank quantile `q` (0..1) in ns: the lower edge of its bin; NaN when empty. */
  quantile(q: number): number {
    if (this.count === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < BINS; i++) {
      seen += this.bins[i] ?? 0;
      if (seen >= rank) return i < LINEAR ? i : LINEAR * Math.exp((i - LINEAR) * STEP);
    }
    return Number.NaN;
  }
}
