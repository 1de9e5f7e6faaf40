/**
 * Section 4 of `npm run bench`: memory per key at 1M keys. Each variant (tollgate per
 * algorithm through `KeyedLimiter`, an `allOf` of two token buckets, the per-key policy
 * function path, the naive map, each peer) is filled in a fresh child process with `--expose-gc` (bench/memory-worker.ts), so
 * no variant's garbage or code is counted for another.
 * @module
 */
import { ALGORITHMS } from "./algorithms.bench.js";
import type { MemoryMeasurement } from "./memory-worker.js";
import { PEERS } from "./peers.js";
import { runChild } from "./support/child.js";

/** One variant of the memory table. */
export interface MemoryVariant {
  readonly id: string;
  readonly name: string;
  readonly kind: "reference" | "tollgate" | "peer";
}

/** Every memory variant, in report order. */
export function memoryVariants(): MemoryVariant[] {
  return [
    { id: "naive", name: "naive Map<string, {tokens, last}> (reference)", kind: "reference" },
    ...ALGORITHMS.map(
      (a): MemoryVariant => ({
        id: `tollgate.${a.name}`,
        name: `tollgate KeyedLimiter(${a.name})`,
        kind: "tollgate",
      }),
    ),
    {
      id: "tollgate.SlidingWindowLog.ten",
      name: "tollgate KeyedLimiter(SlidingWindowLog), ten entries per key",
      kind: "tollgate",
    },
    {
      id: "tollgate.TokenBucket.allOf",
      name: "tollgate KeyedLimiter(allOf(TokenBucket, TokenBucket))",
      kind: "tollgate",
    },
    {
      id: "tollgate.TokenBucket.plans",
      name: "tollgate KeyedLimiter({ plans: { free, pro }, plan })",
      kind: "tollgate",
    },
    {
      id: "tollgate.TokenBucket.fn",
      name: "tollgate KeyedLimiter((key) => new TokenBucket)",
      kind: "tollgate",
    },
    ...PEERS.map(
      (p): MemoryVariant => ({ id: `peer.${p.id}`, name: `${p.name} ${p.version}`, kind: "peer" }),
    ),
  ];
}

/** Result of one variant: its measurement, or why it failed. */
export type MemoryResult = MemoryVariant &
  (
    | { readonly ok: true; readonly measured: MemoryMeasurement }
    | { readonly ok: false; readonly error: string }
  );

/** Keys per variant: 1M, or 100k in quick mode. */
export function memoryKeys(quick: boolean): number {
  return quick ? 100_000 : 1_000_000;
}

/**
 * Measures every variant in turn; `onVariant` is told before each starts. A failing
 * variant is reported with its error; the others still run.
 */
export async function measureMemory(
  quick: boolean,
  onVariant?: (index: number, total: number, variant: MemoryVariant) => void,
): Promise<MemoryResult[]> {
  const keys = memoryKeys(quick);
  const variants = memoryVariants();
  const out: MemoryResult[] = [];
  for (const [index, variant] of variants.entries()) {
    onVariant?.(index, variants.length, variant);
    try {
      const measured = (await runChild("memory-worker.ts", [variant.id, String(keys)], {
        nodeFlags: ["--expose-gc"],
      })) as MemoryMeasurement;
      out.push({ ...variant, ok: true, measured });
    } catch (error) {
      out.push({ ...variant, ok: false, error: (error as Error).message });
    }
  }
  return out;
}
