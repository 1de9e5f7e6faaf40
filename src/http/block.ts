/**
 * `blockDurationMs` at decision time: a client that hits its limit is blocked for that
 * long, and the denial sent says so. It runs in the pipeline, before any response is
 * written (docs/http.md#blocking-a-client-after-abuse); the option is checked with the
 * others, in core.ts.
 * @module
 */
import type { Decision } from "../limiter.js";
import { type CommonConfig, type KeyedConsumer, report } from "./core.js";

/**
 * A denial under `blockDurationMs`: a key that is not blocked yet is blocked for that long,
 * and the decision sent says so (`retryAfterMs` and `resetAfterMs` at least the block, so
 * `Retry-After` is the block). A key blocked already keeps its block (it is not extended by
 * the requests it makes meanwhile) and its denial says how long is left.
 */
export function blockOnLimit(
  config: CommonConfig,
  decision: Decision,
  key: string,
  durationMs: number,
): Decision | Promise<Decision> {
  const limiter = config.limiter as KeyedConsumer;
  if (typeof limiter.blockOnce === "function")
    return blockInStore(config, decision, key, durationMs);
  try {
    const left = limiter.blockedMs?.(key) ?? 0;
    if (left > 0) return decision;
    limiter.block!(key, durationMs);
  } catch (error) {
    // The request is denied all the same: a block that fails is reported, never a pass.
    report(config, error, key, "programming");
    return decision;
  }
  return blockedFor(decision, durationMs);
}

/**
 * {@link blockOnLimit} for a limiter whose blocks live in a shared store (the Redis
 * limiters' `blockOnce`): one call blocks the key unless it is blocked already, and answers
 * how long the block in place has left, which the decision sent says. A store that fails is
 * reported as an outage; the request is denied all the same.
 */
function blockInStore(
  config: CommonConfig,
  decision: Decision,
  key: string,
  durationMs: number,
): Decision | Promise<Decision> {
  let result: unknown;
  try {
    result = (config.limiter as KeyedConsumer).blockOnce!(key, durationMs);
  } catch (error) {
    report(config, error, key, "programming");
    return decision;
  }
  return Promise.resolve(result).then(
    (left) => blockedFor(decision, typeof left === "number" && left > 0 ? left : durationMs),
    (error: unknown) => {
      report(config, error, key, "outage");
      return decision;
    },
  );
}

/** `decision` denied for at least `ms`: `retryAfterMs` and `resetAfterMs` at least it. */
function blockedFor(decision: Decision, ms: number): Decision {
  return {
    allowed: false,
    limit: decision.limit,
    remaining: 0,
    retryAfterMs: decision.retryAfterMs > ms ? decision.retryAfterMs : ms,
    resetAfterMs: decision.resetAfterMs > ms ? decision.resetAfterMs : ms,
  };
}
