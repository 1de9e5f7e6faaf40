// The example of docs/semantics.md: a token bucket of 3 with 1 token per second,
// on an injected clock so the output is the same on every run.
import { TokenBucket } from "tollgate";

let now = 0;
const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1, clock: () => now });

// 3 pass, the 4th is denied:
console.log(bucket.allow(), bucket.allow(), bucket.allow(), bucket.allow());
//=> true true true false
// Denied: when to retry, and when the bucket is full again.
console.log(bucket.consume());
//=> { allowed: false, limit: 3, remaining: 0, retryAfterMs: 1000, resetAfterMs: 3000 }
now = 1500; // 1.5 s later: 1.5 tokens are back
console.log(bucket.consume(0.5)); // fractional costs are fine
//=> { allowed: true, limit: 3, remaining: 1, retryAfterMs: 0, resetAfterMs: 2000 }
console.log(bucket.peek(2)); // what a cost of 2 would get now, without taking it
//=> { allowed: false, limit: 3, remaining: 1, retryAfterMs: 1000, resetAfterMs: 2000 }
