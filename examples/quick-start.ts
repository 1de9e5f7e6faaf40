// The example of docs/semantics.md: a token bucket of 3 with 1 token per second,
// on an injected clock so the output is the same on every run.
import { TokenBucket } from "tollgate";

let now = 0;
const bucket = new TokenBucket({ capacity: 3, refillPerSecond: 1, clock: () => now });

console.log(bucket.allow(), bucket.allow(), bucket.allow(), bucket.allow()); // 3 pass, the 4th is denied
console.log(bucket.consume()); // denied: when to retry, and when the bucket is full again
now = 1500; // 1.5 s later: 1.5 tokens are back
console.log(bucket.consume(0.5)); // fractional costs are fine
console.log(bucket.peek(2)); // what a cost of 2 would get now, without taking it
