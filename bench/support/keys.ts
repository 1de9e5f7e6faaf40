/**
 * Pre-generated keys and access sequences, so no benchmark loop builds a string or draws a
 * random number while it is timed. Keys look like IPv4 client addresses (`10.a.b.c`, 8 to 11
 * characters), the most common rate-limit key. The random order is a seeded xorshift32
 * stream, so every run (and every child process) sees the same sequence.
 * @module
 */

/** Length of every access sequence: a power of two so the cursor wraps with a mask. */
export const SEQUENCE_LENGTH = 1 << 20;

/** The key for index `i` (0 <= i < 2^24): `10.a.b.c`. */
export function keyOf(i: number): string {
  return `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
}

/** `count` distinct keys, index order. */
function makeKeys(count: number): string[] {
  const keys: string[] = [];
  for (let i = 0; i < count; i++) keys.push(keyOf(i));
  return keys;
}

/** A xorshift32 generator returning integers in [0, bound). Deterministic for a seed. */
function randomIndices(seed: number): (bound: number) => number {
  let x = seed >>> 0 || 0x9e3779b9;
  return (bound) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % bound;
  };
}

/** A key access pattern: its label and the number of distinct keys (1 = one hot key). */
export interface KeyPattern {
  readonly id: string;
  readonly label: string;
  readonly keys: number;
}

/** The three patterns of the report: one hot key, 100k and 1M keys in random order. */
export function keyPatterns(quick: boolean): KeyPattern[] {
  // Quick mode (the CI smoke test) keeps the shapes but shrinks the key spaces.
  const large = quick ? 100_000 : 1_000_000;
  const medium = quick ? 10_000 : 100_000;
  return [
    { id: "hot", label: "1 hot key", keys: 1 },
    { id: "medium", label: `${count(medium)} keys, random`, keys: medium },
    { id: "large", label: `${count(large)} keys, random`, keys: large },
  ];
}

/** `maxKeys` of the new-key-at-the-bound rows: 100k, or 10k in quick mode. */
export function newKeyBound(quick: boolean): number {
  return quick ? 10_000 : 100_000;
}

/** `100000` -> `100k`, `1000000` -> `1M`. */
export function count(n: number): string {
  if (n >= 1_000_000 && n % 1_000_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 1000 && n % 1000 === 0) return `${n / 1000}k`;
  return String(n);
}

/**
 * The keys of a pattern and the sequence a benchmark walks: `SEQUENCE_LENGTH` references to
 * those same string objects (so a lookup hashes an existing string, as a server does with a
 * header it parsed once), uniformly random with replacement; for one key, that key repeated.
 */
export function accessSequence(pattern: KeyPattern, seed = 42): { keys: string[]; seq: string[] } {
  // The last one is kept: a reference row and its subject, timed one after the other,
  // walk the same key strings in the same order (and the second pays no setup).
  if (last !== undefined && last.keyCount === pattern.keys && last.seed === seed) return last.value;
  const value = buildSequence(pattern, seed);
  last = { keyCount: pattern.keys, seed, value };
  return value;
}

let last: { keyCount: number; seed: number; value: { keys: string[]; seq: string[] } } | undefined;

function buildSequence(pattern: KeyPattern, seed: number): { keys: string[]; seq: string[] } {
  const keys = makeKeys(pattern.keys);
  const next = randomIndices(seed);
  const seq: string[] = [];
  for (let i = 0; i < SEQUENCE_LENGTH; i++) seq.push(keys[next(keys.length)]!);
  return { keys, seq };
}
