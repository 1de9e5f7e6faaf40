/**
 * `fastifyConcurrencyLimit`: a Fastify `onRequest` hook that holds a permit for the
 * duration of each request.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { UntrustedProxyWarning } from "./client-key.js";
import {
  type CommonConcurrencyOptions,
  checkConcurrencyOptions,
  holdUntilHandled,
  permitOf,
} from "./concurrency.js";
import { NODE_SOURCE } from "./node.js";
import {
  INTERNAL_ERROR_BODY,
  limitedBody,
  type Outcome,
  Pipeline,
  PROBLEM_JSON,
  UNAVAILABLE_BODY,
  writeHeaders,
} from "./pipeline.js";

/** The members of a Fastify request the hook uses. */
export interface FastifyConcurrencyRequestLike {
  readonly raw: IncomingMessage;
}

/** The members of a Fastify reply the hook uses. */
export interface FastifyConcurrencyReplyLike {
  readonly raw: ServerResponse;
  code(status: number): FastifyConcurrencyReplyLike;
  header(name: string, value: string | string[]): FastifyConcurrencyReplyLike;
  /** A header already set (by `fastifyRateLimit`, say), so that List fields are appended to. */
  getHeader(name: string): unknown;
  send(body: string): unknown;
}

/** Options of {@link fastifyConcurrencyLimit}. */
export interface FastifyConcurrencyOptions<
  Request extends FastifyConcurrencyRequestLike = FastifyConcurrencyRequestLike,
> extends CommonConcurrencyOptions {
  /** The key of a `KeyedConcurrencyLimiter`. @default (request, clientKey) => clientKey */
  readonly key?: ((request: Request, clientKey: string) => string) | undefined;
  /** Return true to let a request through without a permit (no headers). */
  readonly skip?: ((request: Request) => boolean) | undefined;
}

const WHERE = "fastifyConcurrencyLimit";
const OWN_OPTIONS = ["key", "skip", "maxHoldMs"] as const;

/**
 * A Fastify `onRequest` hook (`app.addHook("onRequest", fastifyConcurrencyLimit({ limiter }))`)
 * that lets at most `limiter.limit` handlers run at once (per key, for a
 * `KeyedConcurrencyLimiter`): the permit is held until the handler is done with the reply
 * (Fastify ends the response when it returns or sends, even once the client has gone), and
 * at most `maxHoldMs` after the connection closed; released once. One past the limit gets
 * 429 with `qu="concurrent-requests"`. See docs/http.md#concurrency-limits.
 * @throws {TypeError} For a bad limiter or an unknown option.
 */
export function fastifyConcurrencyLimit<
  Request extends FastifyConcurrencyRequestLike = FastifyConcurrencyRequestLike,
  Reply extends FastifyConcurrencyReplyLike = FastifyConcurrencyReplyLike,
>(
  options: FastifyConcurrencyOptions<Request>,
): (request: Request, reply: Reply, done: () => void) => void {
  const { config, hooks, maxHoldMs } = checkConcurrencyOptions(WHERE, options, OWN_OPTIONS);
  const source = {
    peer: (request: Request) => NODE_SOURCE.peer(request.raw, undefined),
    header: (request: Request, name: string) => NODE_SOURCE.header(request.raw, name, undefined),
    untrusted: (
      request: Request,
      _extra: undefined,
      _peer: string | undefined,
      warning: UntrustedProxyWarning,
    ) => warning.checkNode(request.raw),
  };
  const pipeline = new Pipeline<Request>(WHERE, config, hooks, source);
  return (request, reply, done) => {
    const outcome = pipeline.run(request, undefined) as Outcome; // the consumer is synchronous
    switch (outcome.kind) {
      case "skip":
        done();
        return;
      case "pass": {
        const permit = permitOf(outcome.decision);
        if (permit !== undefined) holdUntilHandled(reply.raw, permit, maxHoldMs);
        if (outcome.decision !== undefined) writeHeaders(config, outcome, reply, appendHeader);
        done();
        return;
      }
      case "limited":
        if (outcome.decision !== undefined) writeHeaders(config, outcome, reply, appendHeader);
        reply.code(429).header("Content-Type", PROBLEM_JSON).send(limitedBody(config, outcome));
        return;
      case "unavailable":
        reply.code(503).header("Content-Type", PROBLEM_JSON).send(UNAVAILABLE_BODY);
        return;
      case "error":
        reply.code(500).header("Content-Type", PROBLEM_JSON).send(INTERNAL_ERROR_BODY);
    }
  };
}

/**
 * Sets a header on a reply; a List field (`RateLimit`, `RateLimit-Policy`) is appended to a
 * value already there, so that a `fastifyRateLimit` before this hook keeps its own.
 */
function appendHeader(
  reply: FastifyConcurrencyReplyLike,
  name: string,
  value: string,
  list: boolean,
): void {
  const previous = list ? reply.getHeader(name) : undefined;
  if (previous === undefined) reply.header(name, value);
  else
    reply.header(name, [
      ...(Array.isArray(previous) ? previous.map(String) : [String(previous)]),
      value,
    ]);
}
