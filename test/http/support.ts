import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/limiter.js";
import { KeyedLimiter } from "../../src/registry.js";
import type { ManualClock } from "../support/manual-clock.js";

/**
 * A KeyedLimiter of TokenBuckets on a manual clock that also records the keys and costs it
 * was asked about, so tests can assert which client key the middleware computed.
 */
export class RecordingLimiter {
  readonly keyed: KeyedLimiter;
  readonly calls: Array<[key: string, cost: number | undefined]> = [];

  constructor(capacity: number, refillPerSecond: number, clock: ManualClock) {
    this.keyed = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond, clock }));
  }

  consume(key: string, cost?: number): Decision {
    this.calls.push([key, cost]);
    return this.keyed.consume(key, cost);
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
  response.headers.forEach((value, name) => {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") {
      out[name] = value;
    }
  });
  return out;
}
