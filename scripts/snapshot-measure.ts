/**
 * Measures whole-registry snapshots of 1M keys per policy: snapshotAll, JSON.stringify,
 * JSON.parse and restoreAll times, the JSON's bytes, and checks that every key of the
 * restored registry decides as the original (peekAt of each key, compared field by field).
 * Run: npx tsx scripts/snapshot-measure.ts [keys]
 */
import {
  FixedWindow,
  KeyedLimiter,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";

const KEYS = Number(process.argv[2] ?? 1_000_000);
const policies = {
  "token-bucket": () => new TokenBucket({ capacity: 10, refillPerSecond: 0.01, clock: () => 0 }),
  "fixed-window": () => new FixedWindow({ limit: 10, windowMs: 60_000, clock: () => 0 }),
  "sliding-window-counter": () =>
    new SlidingWindowCounter({ limit: 10, windowMs: 60_000, clock: () => 0 }),
  "sliding-window-log": () => new SlidingWindowLog({ limit: 10, windowMs: 60_000, clock: () => 0 }),
};
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
for (const [name, make] of Object.entries(policies)) {
  const a = new KeyedLimiter(make(), { maxKeys: KEYS });
  const keys = Array.from({ length: KEYS }, (_, i) => `client-${i}`);
  for (let i = 0; i < KEYS; i++) a.allowAt(keys[i]!, 1_700_000_000_000 + i / 100, 1 + (i % 3));
  let t = process.hrtime.bigint();
  const snapshot = a.snapshotAll();
  const snapMs = ms(t);
  t = process.hrtime.bigint();
  const json = JSON.stringify(snapshot);
  const stringifyMs = ms(t);
  t = process.hrtime.bigint();
  const parsed = JSON.parse(json);
  const parseMs = ms(t);
  const b = new KeyedLimiter(make(), { maxKeys: KEYS });
  t = process.hrtime.bigint();
  b.restoreAll(parsed);
  const restoreMs = ms(t);
  const at = 1_700_000_000_000 + KEYS / 100 + 5;
  let differ = 0;
  for (const key of keys) {
    const x = a.peekAt(key, at, 2);
    const y = b.peekAt(key, at, 2);
    if (
      x.allowed !== y.allowed ||
      x.remaining !== y.remaining ||
      x.retryAfterMs !== y.retryAfterMs ||
      x.resetAfterMs !== y.resetAfterMs
    )
      differ++;
  }
  console.log(
    JSON.stringify({
      policy: name,
      keys: b.size,
      snapshotAllMs: Math.round(snapMs),
      stringifyMs: Math.round(stringifyMs),
      jsonBytes: Buffer.byteLength(json),
      bytesPerKey: +(Buffer.byteLength(json) / KEYS).toFixed(1),
      parseMs: Math.round(parseMs),
      restoreAllMs: Math.round(restoreMs),
      keysDecidingDifferently: differ,
    }),
  );
}
