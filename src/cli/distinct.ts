/**
 * An estimate of how many distinct strings were added, in constant memory: HyperLogLog (Flajolet,
 * Fusy, Gandouet, Meunier, "HyperLogLog: the analysis of a near-optimal cardinality estimation
 * algorithm", 2007) with 2^14 one-byte registers (16 KiB) and a 64-bit hash, so the standard error
 * is 1.04 / sqrt(16384) ≈ 0.8% at any count; small counts use linear counting, as in the paper.
 */
export class DistinctEstimate {
  private static readonly BITS = 14;
  private readonly registers = new Uint8Array(1 << DistinctEstimate.BITS);

  /** Adds one string (its UTF-16 code units are hashed). */
  add(text: string): void {
    // Two independent 32-bit FNV-1a style mixes of the code units (cyrb53's scheme).
    let h1 = 0xdeadbeef;
    let h2 = 0x41c6ce57;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 2_654_435_761);
      h2 = Math.imul(h2 ^ c, 1_597_334_677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2_246_822_507) ^ Math.imul(h2 ^ (h2 >>> 13), 3_266_489_909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2_246_822_507) ^ Math.imul(h1 ^ (h1 >>> 13), 3_266_489_909);
    const index = h1 >>> (32 - DistinctEstimate.BITS);
    // Rank: position of the first 1 bit in the remaining 18 + 32 bits.
    const rest = (h1 << DistinctEstimate.BITS) >>> 0;
    const rank =
      rest !== 0 ? Math.clz32(rest) + 1 : 32 - DistinctEstimate.BITS + Math.clz32(h2 >>> 0) + 1;
    if (rank > this.registers[index]!) this.registers[index] = rank;
  }

  /** The estimated number of distinct strings added (0 before the first). */
  estimate(): number {
    const m = this.registers.length;
    let sum = 0;
    let zeros = 0;
    for (const r of this.registers) {
      sum += 2 ** -r;
      if (r === 0) zeros++;
    }
    const raw = ((0.7213 / (1 + 1.079 / m)) * m * m) / sum;
    if (raw <= 2.5 * m && zeros > 0) return Math.round(m * Math.log(m / zeros));
    return Math.round(raw);
  }
}
