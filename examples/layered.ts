// Layered limits: every client may send 10 requests per second (bursts of 10) AND 1000 per
// hour. allOf allows a request only when every part allows it, and a denial charges no part.
// A manual clock makes the output the same on every run; omit `clock` in a service.
import { allOf, FixedWindow, KeyedLimiter, TokenBucket } from "tollgate";

let now = 0;
const clock = () => now; // a manual clock for the demo: leave `clock` out in a service

const limiter = new KeyedLimiter(
  allOf(
    new TokenBucket({ capacity: 10, refillPerSecond: 10, clock }),
    new FixedWindow({ limit: 1000, windowMs: 60 * 60 * 1000, clock }),
  ),
);

// 11 requests in the same instant: the per-second bucket refuses the 11th.
let allowed = 0;
for (let i = 0; i < 11; i++) if (limiter.allow("client-1")) allowed++;
console.log(`same instant: ${allowed} of 11 allowed`); // 10 of 11
console.log(limiter.consume("client-1")); // retryAfterMs 100: one token is back in 0.1 s

// 10 per second for 100 seconds spends the hourly 1000; after that the hour refuses.
for (let s = 1; s <= 100; s++) {
  now = s * 1000;
  for (let i = 0; i < 10; i++) limiter.allow("client-1");
}
now = 101_000;
const denied = limiter.consume("client-1");
console.log(`after 100 s: allowed=${denied.allowed}, retry in ${denied.retryAfterMs / 1000} s`);
