/**
 * The simulator's one source of randomness: sfc32 seeded from one 32-bit integer (through
 * splitmix32), so a seed replays bit for bit on any machine.
 * @module
 */

/** A seeded generator of numbers in [0, 1) and helpers over it. */
export interface Prng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  /** One element of `items`. */
  pick<T>(items: readonly T[]): T;
  /** A number between lo and hi, spread evenly over the orders of magnitude between them. */
  logUniform(lo: number, hi: number): number;
}

/** splitmix32: spreads a seed over the state words. */
function splitmix(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x9e3779b9) >>> 0;
    let z = a;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
    return (z ^ (z >>> 15)) >>> 0;
  };
}

/** sfc32 seeded with `seed`. */
export function prng(seed: number): Prng {
  const mix = splitmix(seed);
  let a = mix();
  let b = mix();
  let c = mix();
  let d = mix();
  const next = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  const g: Prng = {
    next,
    int: (n) => Math.floor(next() * n),
    range: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)] as (typeof items)[number],
    logUniform: (lo, hi) => Math.exp(Math.log(lo) + next() * (Math.log(hi) - Math.log(lo))),
  };
  return g;
}
