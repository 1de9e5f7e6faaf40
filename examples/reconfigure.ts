// The recipe of docs/semantics.md#changing-limits-live: change limits live, without losing
// any client's state. A manual clock makes the output the same on every run.
import { allOf, FixedWindow, KeyedLimiter, TokenBucket } from "tollgate";

let now = 0;
const clock = () => now; // omit `clock` to use performance.now()

// One bucket: 5 tokens, 1 per second. Spend them all.
const bucket = new TokenBucket({ capacity: 5, refillPerSecond: 1, clock });
console.log(bucket.consume(5).remaining); // 0
now = 2000; // 2 tokens accrued at the old rate
bucket.reconfigure({ refillPerSecond: 10 }); // Go's SetLimit: what accrued is kept
now = 2100; // and 1 more at the new rate
console.log(bucket.peek(0).remaining); // 3

// A bad option throws before anything changes (the constructor's message).
try {
  bucket.reconfigure({ capacity: 10, refillPerSecond: -1 });
} catch (error) {
  console.log((error as Error).message, bucket.capacity); // ... got -1 5
}

// Every key of a registry, and keys made later: a plan upgrade for everyone, live.
const perUser = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 60_000, clock }));
perUser.consume("alice", 3);
console.log(perUser.allow("alice")); // false: 3 of 3 this minute
perUser.reconfigure({ limit: 5 }); // the count carries over, judged against 5
console.log(perUser.consume("alice", 2).remaining, perUser.peek("bob", 0).remaining); // 0 5

// allOf: one entry per part, undefined keeps a part; all or none change.
const layered = allOf(
  new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }),
  new FixedWindow({ limit: 1000, windowMs: 3_600_000, clock }),
);
layered.reconfigure([undefined, { limit: 2000 }]);
console.log(layered.consume(10).allowed, layered.peek(0).limit); // true 10
