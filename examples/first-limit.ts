// The README's first example: one token bucket per client, bursts of 10, then 5 per second.
// Run it with `npx tsx examples/first-limit.ts`.
import { KeyedLimiter, TokenBucket } from "tollgate";

const limiter = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 5 }));

function handle(clientId: string): string {
  const decision = limiter.consume(clientId); // tens of nanoseconds, in process
  if (!decision.allowed) return `429: retry in ${Math.ceil(decision.retryAfterMs / 1000)} s`;
  return `200: ${decision.remaining} left`;
}

for (let i = 1; i <= 11; i++) console.log(`request ${i}: ${handle("client-1")}`); // the 11th is a 429
console.log(`another client: ${handle("client-2")}`); // keys are independent
