// Memory and time per pending waiter: 10,000 concurrent `wait()` calls on one limiter.
// Run: node --expose-gc --import tsx bench/wait-memory.ts
// Heap is measured after a full GC, before and after the waiters are queued (promises,
// ledger entries and abort listeners included; the test's own array of promises is
// subtracted by measuring it alone). Time is the mean of the 10,000 synchronous calls.
import { FixedWindow, LeakyBucket, type Limiter, TokenBucket } from "tollgate";

const N = 10_000;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node --expose-gc");

function heap(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

interface Row {
  limiter: string;
  signal: string;
  bytesPerWaiter: number;
  usPerCall: number;
}

function measure(name: string, make: () => Limiter, withSignal: boolean): Row {
  const limiter = make();
  const held: Promise<unknown>[] = new Array(N);
  const controllers = withSignal ? Array.from({ length: N }, () => new AbortController()) : [];
  const baseline = heap();
  const start = performance.now();
  for (let i = 0; i < N; i++) {
    held[i] = limiter.wait(1, withSignal ? { signal: controllers[i]!.signal } : undefined);
  }
  const us = ((performance.now() - start) * 1000) / N;
  const after = heap();
  // The promises array and controllers existed before the baseline; nothing else is kept.
  for (const p of held) p.catch(() => {});
  for (const c of controllers) c.abort();
  return {
    limiter: name,
    signal: withSignal ? "yes" : "no",
    bytesPerWaiter: Math.round((after - baseline) / N),
    usPerCall: Math.round(us * 100) / 100,
  };
}

const clock = () => 0;
const rows: Row[] = [];
// Round 0 warms the JIT up and is not reported.
for (const [round, withSignal] of [
  [0, false],
  [1, false],
  [1, true],
] as const) {
  const measured: Row[] = [];
  measured.push(
    measure(
      "TokenBucket",
      () => {
        const b = new TokenBucket({ capacity: N * 2, refillPerSecond: 1, clock });
        b.consume(N * 2);
        return b;
      },
      withSignal,
    ),
    measure(
      "LeakyBucket",
      () => {
        const b = new LeakyBucket({ capacity: N * 2, leakPerSecond: 1, clock });
        b.consume(1);
        return b;
      },
      withSignal,
    ),
    measure(
      "FixedWindow",
      () => {
        const w = new FixedWindow({ limit: 1, windowMs: 1e9, clock });
        w.consume(1);
        return w;
      },
      withSignal,
    ),
  );
  if (round > 0) rows.push(...measured);
}
console.table(rows);
process.exit(0); // the waiters' timers are ref'd on purpose; this script is done
