// Requires the built package by its own name as CommonJS and checks a decision.
const tollgate = require("tollgate");

const now = 0;
const bucket = new tollgate.TokenBucket({ capacity: 1, refillPerSecond: 2, clock: () => now });
const first = bucket.consume();
const second = bucket.consume();
if (!first.allowed || second.allowed || second.retryAfterMs !== 500) {
  throw new Error(`CJS smoke: unexpected decisions ${JSON.stringify([first, second])}`);
}
console.log(`cjs ok: ${Object.keys(tollgate).length} exports`);
