/**
 * `blockDurationMs` at decision time, in the pipeline before any response is written
 * (docs/http.md#blocking-a-client-after-abuse); the option is checked in core.ts.
 * @module
 */
import { blockedDenial } from "../core/blocks.js";
import type { Decision } from "../core/limiter.js";
import { type CommonConfig, isThenable, type KeyedConsumer, report } from "./core.js";

/**
 * The `source`s of a denial that does not say the client went over its limit, so
 * `blockDurationMs` does not block for it: a lease on its way (`'pending'`), a full lease
 * table (`'full'`), a closed limiter (`'stopped'`), a store that failed closed (`'closed'`).
 */
const NOT_OVER_LIMIT: ReadonlySet<string> = new Set(["pending", "full", "stopped", "closed"]);

/**
 * True when a denial says the client went over its limit (what `blockDurationMs` blocks for):
 * its `source` is none of {@link NOT_OVER_LIMIT} (an outage must not block every client that
 * asked during it, for `blockDurationMs` after it ended).
 */
export function overLimit(decision: Decision): boolean {
  const source = (decision as { source?: unknown }).source;
  return typeof source !== "string" || !NOT_OVER_LIMIT.has(source);
}

/**
 * A denial under `blockDurationMs`: a key that is not blocked yet is blocked for that long,
 * and the decision sent says so (`retryAfterMs` and `resetAfterMs` at least the block, so
 * `Retry-After` is the block). A key blocked already keeps its block (it is not extended by
 * the requests it makes meanwhile) and its denial says how long is left.
 *
 * A limiter whose blocks live in a shared store (the Redis limiters' and
 * `LeasedTokenBucket`'s `blockOnce`) does both in one call, which answers how long the
 * block in place has left; synchronously when it answers a number (a leased limiter), else
 * once it resolves. A store that rejects is reported as an outage; the request is denied
 * all the same.
 */
export function blockOnLimit(
  config: CommonConfig,
  decision: Decision,
  key: string,
  durationMs: number,
): Decision | Promise<Decision> {
  const limiter = config.limiter as KeyedConsumer;
  let result: unknown;
  try {
    if (typeof limiter.blockOnce === "function") result = limiter.blockOnce(key, durationMs);
    else if ((limiter.blockedMs?.(key) ?? 0) > 0) return decision;
    else limiter.block!(key, durationMs);
  } catch (error) {
    // The request is denied all the same: a block that fails is reported, never a pass.
    report(config, error, key, "programming");
    return decision;
  }
  // A limiter that answers at once (LeasedTokenBucket) keeps the request synchronous.
  if (!isThenable(result)) return blockedFor(decision, result, durationMs);
  return Promise.resolve(result).then(
    (left) => blockedFor(decision, left, durationMs),
    (error: unknown) => {
      report(config, error, key, "outage");
      return decision;
    },
  );
}

/**
 * `decision` denied for at least `left` ms (the block's time left, when a number > 0), else
 * `durationMs`: `retryAfterMs` and `resetAfterMs` at least it.
 */
function blockedFor(decision: Decision, left: unknown, durationMs: number): Decision {
  const ms = typeof left === "number" && left > 0 ? left : durationMs;
  return blockedDenial(decision.limit, decision.retryAfterMs, decision.resetAfterMs, ms);
}
