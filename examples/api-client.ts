// An outgoing API client that must stay under a third-party API's rate limit: instead of
// getting 429s back, it waits for its turn before each call. A LeakyBucket shapes the calls
// to a constant pace (no burst); each wait has a deadline through an AbortSignal, and
// maxWaitMs refuses at once a call that could not start in time.
//
// The rate is fast here (20 calls per second) so that the example ends in about a second;
// a real "5 requests per second" API would use leakPerSecond: 5.
import { LeakyBucket, RateLimitError } from "tollgate";

const shaper = new LeakyBucket({ capacity: 20, leakPerSecond: 20 });

/** Stands for `fetch("https://api.example.com/items/" + id)`. */
async function callApi(id: number): Promise<string> {
  console.log(`${Math.round(performance.now())} ms  called for item ${id}`);
  return `item ${id}`;
}

/** One call: wait for a slot (at most 2 s, and never past the caller's signal), then call. */
async function getItem(id: number, signal: AbortSignal): Promise<string> {
  await shaper.wait(1, { signal, maxWaitMs: 2000 });
  return callApi(id);
}

/** Milliseconds since the process started, as callApi prints them. */
const elapsed = () => `${Math.round(performance.now())}`;

// 12 calls issued at once leave 50 ms apart, in order, each with a deadline of its own.
const bodies = await Promise.all(
  Array.from({ length: 12 }, (_, i) => getItem(i, AbortSignal.timeout(5000))),
);
console.log(`${elapsed()} ms  ${bodies.length} calls done, none refused by the API`);

// A caller that gives up: its slot is given back and the next call moves up.
const controller = new AbortController();
const late = getItem(100, controller.signal).catch((error: unknown) => {
  console.log(`${elapsed()} ms  call 100 gave up: ${(error as Error).message}`);
});
const next = getItem(101, AbortSignal.timeout(5000));
controller.abort(new Error("the user left"));
await Promise.all([late, next]);

// A burst larger than the queue (20), once the queue has drained: the extra calls are
// refused at once with a RateLimitError, not queued.
while (!shaper.isIdle()) await new Promise((resolve) => setTimeout(resolve, 50));
const results = await Promise.allSettled(
  Array.from({ length: 25 }, (_, i) => getItem(200 + i, AbortSignal.timeout(5000))),
);
const refused = results.filter(
  (r) => r.status === "rejected" && r.reason instanceof RateLimitError,
).length;
console.log(
  `${elapsed()} ms  burst of 25: ${25 - refused} called, ${refused} refused (queue full)`,
);
