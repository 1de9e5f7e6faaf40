import type { IncomingMessage, ServerResponse } from "node:http";
import type { Decision } from "../core/limiter.js";
import {
  AfterResponse,
  type AfterResponseOptions,
  type RequestCharges,
  requestCharges,
} from "./after-response.js";
import {
  type CommonRateLimitOptions,
  checkAdapterOptions,
  HOOK_OPTIONS,
  isThenable,
  report,
} from "./core.js";
import { writeHeaders } from "./headers.js";
import {
  answerBody,
  type ClientSource,
  INTERNAL_ERROR_BODY,
  Outcome,
  Pipeline,
  PROBLEM_JSON,
} from "./pipeline.js";

/** A connect-style `next`: call it to pass the request on. */
export type NextFunction = (error?: unknown) => void;

/** A connect-style middleware, usable with node:http, Express, connect and Polka. */
export type RateLimitMiddleware<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> = (req: Req, res: Res, next: NextFunction) => void;

/** Options of {@link rateLimit}: the shared ones plus request hooks for node requests. */
export interface RateLimitOptions<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> extends CommonRateLimitOptions,
    AfterResponseOptions<Req> {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (see `trustProxy`), IPv6 grouped by `ipv6Prefix`, or `"unknown"` when there is none.
   * @default (req, clientKey) => clientKey
   */
  readonly key?: ((req: Req, clientKey: string) => string) | undefined;
  /**
   * Units this request costs (a finite number >= 0). Any other result (`NaN`, `-1`, `"5"`) is
   * a programming error: a 500 and `onError` told (`kind: 'programming'`), never a pass.
   * @default 1
   */
  readonly cost?: ((req: Req) => number) | undefined;
  /** Return true to let a request through unchecked (no cost, no headers). */
  readonly skip?: ((req: Req) => boolean) | undefined;
  /**
   * Answers a limited request instead of the default 429. The rate-limit headers (and
   * `Retry-After`) are already set on `res`; call `next()` to let it through anyway. If it
   * throws, or returns a promise that rejects, that is a programming error: the request gets
   * 500 (or is cut off, when the response was already started) and `onError` is told.
   */
  readonly onLimited?:
    | ((req: Req, res: Res, next: NextFunction, decision: Decision) => void)
    | undefined;
  /**
   * Called for each admitted request near its limit (see `nearLimitShare`), before it goes on:
   * for logging, alerts or a tracing span (`decisionAttributes`). A throw is a programming error
   * (500, `onError` told); a returned promise is not waited for (a rejection goes to `onError`).
   */
  readonly onNearLimit?: ((req: Req, decision: Decision, key: string) => unknown) | undefined;
}

const WHERE = "rateLimit";

/**
 * A connect-style middleware `(req, res, next)` for node:http and Express: counts each
 * request against `limiter` under its key, then calls `next()` with the rate-limit headers
 * set, or answers 429 with `Retry-After` and a problem+json body (`quota-exceeded`; 413 or
 * 403 without `Retry-After` for a request that can never pass: `refusalStatus`).
 *
 * Watch out: a limiter that throws or rejects is an outage, decided by `failure`; a
 * programming error (a bad `key` or `cost`, a hook that throws) is a 500 whatever `failure`
 * says; errors thrown by `next` are not caught (docs/http.md#when-something-fails-outage-or-programming-error).
 * @example
 * const limit = rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })) })
 * http.createServer((req, res) => limit(req, res, () => res.end("ok")))
 * @throws {TypeError} For a missing `limiter`, a hook that is not a function, an unknown option.
 * @throws {RangeError} For a bad value (e.g. a trust-everything `trustProxy`): docs/http.md#options.
 */
export function rateLimit<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
>(options: RateLimitOptions<Req, Res>): RateLimitMiddleware<Req, Res> & RequestCharges<Req> {
  const { config, hooks, onLimited, refundIf, refundAborted } = checkAdapterOptions(
    WHERE,
    options,
    HOOK_OPTIONS,
  );
  const pipeline = new Pipeline<Req>(WHERE, config, hooks, NODE_SOURCE);
  const after = new AfterResponse<Req>(WHERE, config, refundIf, refundAborted);
  const run = (outcome: Outcome, req: Req, res: Res, next: NextFunction) => {
    if (outcome.kind === "pass" && !res.headersSent) after.open(req, outcome, res);
    render(pipeline, outcome, req, res, next, onLimited);
  };
  const middleware: RateLimitMiddleware<Req, Res> = (req, res, next) => {
    const result = pipeline.run(req, undefined);
    if (result instanceof Outcome) run(result, req, res, next);
    else result.then((outcome) => run(outcome, req, res, next));
  };
  return Object.assign(middleware, requestCharges(WHERE, after));
}

/**
 * The client's address on node:http: the socket's peer, and the forwarding header; with no
 * proxy trusted, the request is shown to the warning (which reads Express's `trust proxy`).
 */
export const NODE_SOURCE: ClientSource<IncomingMessage, unknown> = {
  peer: (req) => req.socket?.remoteAddress,
  header: (req, name) => headerText(req.headers[name]),
  untrusted: (req, _extra, _peer, warning) => warning.checkNode(req),
};

/** A header value as one string (node gives string[] for repeated `set-cookie`-like fields). */
export function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(",") : value;
}

/**
 * Sets a header on a node response; a List field (`RateLimit-Policy`, `RateLimit`) is
 * appended to a value already there (RFC 9651 3.1: a List may be split over several field
 * lines), so two stacked policies send both.
 */
export function setNodeHeader(
  res: ServerResponse,
  name: string,
  value: string,
  list: boolean,
): void {
  const previous = list ? res.getHeader(name) : undefined;
  if (previous === undefined) res.setHeader(name, value);
  else res.setHeader(name, [...(Array.isArray(previous) ? previous : [String(previous)]), value]);
}

/**
 * Renders an outcome on a node response: headers written straight onto `res` from the
 * checked numbers (no header object per request), then `next()` or an answer.
 */
function render<Req extends IncomingMessage, Res extends ServerResponse>(
  pipeline: Pipeline<Req>,
  outcome: Outcome,
  req: Req,
  res: Res,
  next: NextFunction,
  onLimited: RateLimitOptions<Req, Res>["onLimited"],
): void {
  const config = pipeline.config;
  switch (outcome.kind) {
    case "skip":
      next();
      return;
    case "pass":
      if (res.headersSent) return; // answered meanwhile (an async limiter): nothing left to do
      if (outcome.decision !== undefined) writeHeaders(config, outcome, res, setNodeHeader);
      next();
      return;
    case "error":
      refuse(res);
      return;
    default: // answered here: "limited", "unavailable"
      if (res.headersSent) return;
      if (outcome.decision !== undefined) writeHeaders(config, outcome, res, setNodeHeader);
      if (outcome.kind === "limited" && onLimited !== undefined) {
        limited(pipeline, outcome, req, res, next, onLimited);
      } else send(res, outcome.status, answerBody(config, outcome));
  }
}

/**
 * Calls `onLimited`. A throw or rejection is a programming error: answered 500, unless it had
 * already passed the request on with `next` (then only reported), so the request ends in
 * exactly one answer and a throw never escapes into a promise chain (an unhandled rejection
 * exits the process).
 */
function limited<Req extends IncomingMessage, Res extends ServerResponse>(
  pipeline: Pipeline<Req>,
  outcome: Outcome,
  req: Req,
  res: Res,
  next: NextFunction,
  onLimited: NonNullable<RateLimitOptions<Req, Res>["onLimited"]>,
): void {
  let passed = false;
  const pass: NextFunction = (error) => {
    passed = true;
    next(error);
  };
  const broken = (error: unknown) => {
    if (passed) report(pipeline.config, error, outcome.key, "programming");
    else {
      pipeline.refuse(error, outcome.key);
      refuse(res);
    }
  };
  let returned: unknown;
  try {
    returned = onLimited(req, res, pass, outcome.decision!);
  } catch (error) {
    broken(error);
    return;
  }
  if (isThenable(returned)) Promise.resolve(returned).then(undefined, broken);
}

/**
 * Answers a programming error (already reported) with 500. When a response was already
 * started (by `onLimited`), it is cut off instead, so the request cannot hang.
 */
function refuse(res: ServerResponse): void {
  if (!res.headersSent) send(res, 500, INTERNAL_ERROR_BODY);
  else if (!res.writableEnded) res.destroy();
}

/** Ends `res` with an `application/problem+json` body (JSON text), unless it has begun. */
export function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) return;
  res.statusCode = status;
  res.setHeader("Content-Type", PROBLEM_JSON);
  // The body is ASCII (the policy name is checked to be), so its length is its byte count;
  // no Buffer, so the same code runs under Bun's and Deno's node:http.
  res.setHeader("Content-Length", body.length);
  res.end(body);
}
