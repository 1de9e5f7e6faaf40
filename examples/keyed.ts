// The example of docs/keyed.md: one limiter per API key, two limits per key with
// allOf, and per-key plans. A manual clock makes the output the same on every run.
import { allOf, FixedWindow, KeyedLimiter, TokenBucket } from "tollgate";

let now = 0;
const clock = () => now; // omit `clock` to use performance.now()

// One bucket per API key: 10 per second, bursts of 10.
const perKey = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }));
console.log(perKey.allow("key-a")); // true
console.log(perKey.consume("key-a", 9));
console.log(perKey.allow("key-a"), perKey.allow("key-b"), perKey.size); // false true 2
now = 1000; // both buckets are full again
console.log(perKey.sweep(), perKey.size); // 2 0: dropped, since a new bucket decides the same

// Two limits on every key: 10 per second AND 1000 per hour. A denial charges neither.
const layered = new KeyedLimiter(
  allOf(
    new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }),
    new FixedWindow({ limit: 1000, windowMs: 3_600_000, clock }),
  ),
  { maxKeys: 100_000 },
);
console.log(layered.consume("key-a", 10));
console.log(layered.consume("key-a"));

// Per-key plans (tiers): named policies of one algorithm, and each key's plan by name.
const plans = new KeyedLimiter({
  plans: {
    free: new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }),
    pro: new TokenBucket({ capacity: 100, refillPerSecond: 50, clock }),
  },
  plan: (key) => (key.startsWith("pro:") ? "pro" : "free"),
});
console.log(plans.consume("pro:acme").limit, plans.consume("free:bob").limit); // 100 10
