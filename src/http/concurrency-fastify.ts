/**
 * `fastifyConcurrencyLimit`: a Fastify `onRequest` hook that holds a permit for the
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
import { type Route, render } from "./fastify.js";
import { NODE_SOURCE } from "./node.js";
import { type ClientSource, type Outcome, Pipeline } from "./pipeline.js";

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

/** The client's address on Fastify: the node request's (`request.raw`). */
const SOURCE: ClientSource<FastifyConcurrencyRequestLike, undefined> = {
  peer: (request) => NODE_SOURCE.peer(request.raw, undefined),
  header: (request, name) => NODE_SOURCE.header(request.raw, name, undefined),
  untrusted: (request, _extra, _peer, warning) => warning.checkNode(request.raw),
};

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
  const { config, hooks, maxHoldMs } = checkConcurrencyOptions(WHERE, options);
  const pipeline = new Pipeline<Request>(WHERE, config, hooks, SOURCE);
  const route: Route = { pipeline: pipeline as never, onLimited: undefined, after: undefined };
  return (request, reply, done) => {
    const outcome = pipeline.run(request, undefined) as Outcome; // the consumer is synchronous
    const permit = permitOf(outcome.decision); // only a pass holds one
    if (permit !== undefined) holdUntilHandled(reply.raw, permit, maxHoldMs);
    render(route, outcome, request as never, reply as never, done);
  };
}
