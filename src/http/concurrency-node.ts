/**
 * `concurrencyLimit`: the node:http and Express middleware that holds a permit for the
 * duration of each request.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type CommonConcurrencyOptions,
  checkConcurrencyOptions,
  holdUntilHandled,
  permitOf,
} from "./concurrency.js";
import { writeHeaders } from "./headers.js";
import {
  type NextFunction,
  NODE_SOURCE,
  type RateLimitMiddleware,
  send,
  setNodeHeader,
} from "./node.js";
import { answerBody, type Outcome, Pipeline } from "./pipeline.js";

/** Options of {@link concurrencyLimit}. */
export interface ConcurrencyLimitOptions<Req extends IncomingMessage = IncomingMessage>
  extends CommonConcurrencyOptions {
  /** The key of a `KeyedConcurrencyLimiter` (ignored by a `ConcurrencyLimiter`). @default (req, clientKey) => clientKey */
  readonly key?: ((req: Req, clientKey: string) => string) | undefined;
  /** Return true to let a request through without a permit (no headers). */
  readonly skip?: ((req: Req) => boolean) | undefined;
}

const WHERE = "concurrencyLimit";

/**
 * A connect-style middleware for node:http and Express that lets at most `limiter.limit`
 * handlers (per key, for a `KeyedConcurrencyLimiter`) run at once: each request holds a
 * permit until its handler is done with the response (`res.end()`, or the response
 * finishes), not until its client goes away, and at most `maxHoldMs` after its connection
 * closed; one past the limit gets 429 with `RateLimit-Policy:
 * "default";q=N;qu="concurrent-requests"` and `Retry-After`. See docs/http.md#concurrency-limits.
 * @throws {TypeError} For a limiter that is not a concurrency limiter or an unknown option.
 * @example
 * const gate = concurrencyLimit({ limiter: new ConcurrencyLimiter({ limit: 100 }) })
 */
export function concurrencyLimit<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
>(options: ConcurrencyLimitOptions<Req>): RateLimitMiddleware<Req, Res> {
  const { config, hooks, maxHoldMs } = checkConcurrencyOptions(WHERE, options);
  const pipeline = new Pipeline<Req>(WHERE, config, hooks, NODE_SOURCE);
  return (req, res, next) => {
    // The consumer answers synchronously: the outcome is never a promise.
    render(pipeline.run(req, undefined) as Outcome, res, next, pipeline, maxHoldMs);
  };
}

function render<Req extends IncomingMessage>(
  outcome: Outcome,
  res: ServerResponse,
  next: NextFunction,
  pipeline: Pipeline<Req>,
  maxHoldMs: number,
): void {
  const config = pipeline.config;
  switch (outcome.kind) {
    case "skip":
      next();
      return;
    case "pass": {
      const permit = permitOf(outcome.decision);
      if (permit !== undefined) holdUntilHandled(res, permit, maxHoldMs);
      // Headers an earlier middleware already sent take no more; the request still goes on.
      if (outcome.decision !== undefined && !res.headersSent) {
        writeHeaders(config, outcome, res, setNodeHeader);
      }
      next();
      return;
    }
    default: // answered here: "limited", "unavailable", "error"
      if (res.headersSent) {
        // Begun by an earlier middleware, it cannot become a 429: cut off, not let through.
        if (!res.writableEnded) res.destroy();
        return;
      }
      if (outcome.decision !== undefined) writeHeaders(config, outcome, res, setNodeHeader);
      send(res, outcome.status, answerBody(config, outcome));
  }
}
