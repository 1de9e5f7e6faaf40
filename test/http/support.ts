import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/limiter.js";
import type { ManualClock } from "../support/manual-clock.js";

/**
 * A stand-in for KeyedLimiter while it is being written: one TokenBucket per key on a
 * shared manual clock, plus a log of the keys and costs it was asked about.
 */
export class BucketPerKey {
  readonly buckets = new Map<string, TokenBucket>();
  readonly calls: Array<[key: string, cost: number]> = [];

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    private readonly clock: ManualClock,
  ) {}

  consume(key: string, cost = 1): Decision {
    this.calls.push([key, cost]);
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = new TokenBucket({
        capacity: this.capacity,
        refillPerSecond: this.refillPerSecond,
        clock: this.clock,
      });
      this.buckets.set(key, bucket);
    }
    return bucket.consume(cost);
  }
}

/** Starts `server` on an ephemeral port of `host` and returns its base URL. */
export async function listen(server: Server, host = "127.0.0.1"): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** Closes `server`, dropping idle keep-alive connections so the test does not wait. */
export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** The rate-limit headers of a response, by lower-case name, for compact assertions. */
export function limitHeaders(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") {
      out[name] = value;
    }
  }
  return out;
}
