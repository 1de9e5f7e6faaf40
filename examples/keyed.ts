// The example of docs/keyed.md: one limiter per API key, two limits per key with
// allOf, and per-key plans. A manual clock makes the output the same on every run.
import { allOf, FixedWindow, KeyedLimiter, TokenBucket } from "tollgate";

let now = 0;
const clock = () => now; // omit `clock` to use performance.now()

// One bucket per API key: 10 per second, bursts of 10.
const perKey = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }));
console.log(perKey.allow("key-a")); //=> true
console.log(perKey.consume("key-a", 9));
//=> { allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000 }
console.log(perKey.allow("key-a")); //=> false
// Keys are independent:
console.log(perKey.allow("key-b")); //=> true
console.log(perKey.size); //=> 2
now = 1000; // both buckets are full again: sweep drops them, a new one decides the same
console.log(perKey.sweep()); //=> 2
console.log(perKey.size); //=> 0

// Two limits on every key: 10 per second AND 1000 per hour. A denial charges neither.
const layered = new KeyedLimiter(
  allOf(
    new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }),
    new FixedWindow({ limit: 1000, windowMs: 3_600_000, clock }),
  ),
  { maxKeys: 100_000 },
);
console.log(layered.consume("key-a", 10));
//=> { allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 3599000 }
console.log(layered.consume("key-a"));
//=> { allowed: false, limit: 10, remaining: 0, retryAfterMs: 100, resetAfterMs: 3599000 }

// Per-key plans (tiers): named policies of one algorithm, and each key's plan by name.
const plans = new KeyedLimiter({
  plans: {
    free: new TokenBucket({ capacity: 10, refillPerSecond: 1, clock }),
    pro: new TokenBucket({ capacity: 100, refillPerSecond: 50, clock }),
  },
  plan: (key) => (key.startsWith("pro:") ? "pro" : "free"),
});
console.log(plans.consume("pro:acme").limit); //=> 100
console.log(plans.consume("free:bob").limit); //=> 10
