import type { IncomingMessage, ServerResponse } from "node:http";
import type { Decision } from "../limiter.js";
import { clientKey, PeerKeyCache } from "./client-key.js";
import {
  type CommonConfig,
  type CommonRateLimitOptions,
  checkCommonOptions,
  checkFunction,
  checkHookCost,
  checkHookKey,
  isThenable,
  report,
} from "./core.js";
import {
  type DecisionNumbers,
  INTERNAL_ERROR_PROBLEM,
  quotaExceededProblem,
  readDecision,
  UNAVAILABLE_PROBLEM,
  wholeText,
} from "./headers.js";

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
> extends CommonRateLimitOptions {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (see `trustProxy`), IPv6 grouped by `ipv6Prefix`, or `"unknown"` when there is none.
   * @default (req, clientKey) => clientKey
   */
  readonly key?: ((req: Req, clientKey: string) => string) | undefined;
  /**
   * Units this request costs (a finite number >= 0). Any other result (`NaN`, `-1`, `"5"`)
   * is a programming error: the request gets 500 and `onError` is told (`kind:
   * 'programming'`), never a pass.
   * @default 1
   */
  readonly cost?: ((req: Req) => number) | undefined;
  /** Return true to let a request through unchecked (no cost, no headers). */
  readonly skip?: ((req: Req) => boolean) | undefined;
  /**
   * Answers a limited request instead of the default 429. The rate-limit headers
   * (and `Retry-After`) are already set on `res`; call `next()` to let it through anyway.
   * If it throws, or returns a promise that rejects, that is a programming error: the
   * request gets 500 (or is cut off, when the response was already started) and
   * `onError` is told with `kind: 'programming'`.
   */
  readonly onLimited?:
    | ((req: Req, res: Res, next: NextFunction, decision: Decision) => void)
    | undefined;
}

const WHERE = "rateLimit";

/**
 * A connect-style middleware `(req, res, next)` for node:http and Express that counts each
 * request against `limiter` under its key and either passes it on with the rate-limit
 * headers set, or answers `429 Too Many Requests` with `Retry-After` and an
 * `application/problem+json` body (draft-10 `quota-exceeded`).
 *
 * The limiter may answer synchronously (no promise is created then) or asynchronously.
 * When it throws or rejects, `failure` decides: `'open'` calls `next()` without headers,
 * `'closed'` answers 503; `onError` is told either way and the server never crashes.
 * A programming error (a hook that throws, a `key` that is not a string, a `cost` that is
 * not a finite number >= 0, a `Decision` that `rateLimitHeaders` rejects) is answered 500
 * whatever `failure` says, and reported with `kind: 'programming'` (see `FailureKind`).
 *
 * Every request ends in exactly one of: a response from the middleware, or `next()`,
 * whether the limiter answers synchronously, with a promise, or with any thenable
 * (`Promise.resolve` adopts it, so a `then` that throws is a rejection: an outage).
 * `next` is only ever called without an error. Errors thrown by `next` itself (your
 * handler) are not caught: with a synchronous limiter they reach the caller (Express
 * passes them to its error handler), after an asynchronous one they surface as an
 * unhandled rejection, as a throw in any async code of yours would.
 *
 * With plain node:http, call it in the request listener with your handler as `next`.
 *
 * @throws {TypeError} If `options` or an option has the wrong type (`limiter` missing or
 *   without `consume`, a hook that is not a function).
 * @throws {RangeError} If an option is out of range (`policy` not printable ASCII,
 *   `windowSeconds` not a whole number >= 1, an unknown `headers`/`failure`/`proxyHeader`
 *   value, a bad `trustProxy` entry, `ipv6Prefix` outside 1-128).
 * @example
 * const limit = rateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })) })
 * http.createServer((req, res) => limit(req, res, () => res.end("ok")))
 */
export function rateLimit<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
>(options: RateLimitOptions<Req, Res>): RateLimitMiddleware<Req, Res> {
  const config = checkCommonOptions(WHERE, options);
  const keyOf = checkFunction<RateLimitOptions<Req, Res>["key"]>(WHERE, "key", options.key);
  const costOf = checkFunction<RateLimitOptions<Req, Res>["cost"]>(WHERE, "cost", options.cost);
  const skip = checkFunction<RateLimitOptions<Req, Res>["skip"]>(WHERE, "skip", options.skip);
  const onLimited = checkFunction<RateLimitOptions<Req, Res>["onLimited"]>(
    WHERE,
    "onLimited",
    options.onLimited,
  );
  const forwardedName = config.client.header;
  const trusting = config.client.hops !== 0;
  const peerKeys = new PeerKeyCache(config.client);

  return (req, res, next) => {
    let key: string | undefined;
    let cost = 1;
    let skipped = false;
    try {
      skipped = skip !== undefined && skip(req) === true;
      if (!skipped) {
        const client = trusting
          ? clientKey(
              req.socket?.remoteAddress,
              headerText(req.headers[forwardedName]),
              config.client,
            )
          : peerKeys.key(req.socket?.remoteAddress);
        key = keyOf === undefined ? client : checkHookKey(WHERE, keyOf(req, client));
        if (costOf !== undefined) cost = checkHookCost(WHERE, costOf(req));
      }
    } catch (error) {
      refuse(config, error, key, res); // a hook broke its contract: never fail open on it
      return;
    }
    if (skipped) {
      next();
      return;
    }
    let result: Decision | PromiseLike<Decision>;
    let async: boolean;
    try {
      result = config.limiter.consume(key!, cost);
      async = isThenable(result);
    } catch (error) {
      fail(config, error, key, res, next);
      return;
    }
    if (async) {
      const k = key!;
      // Promise.resolve adopts any thenable: one whose then() throws, or calls back twice,
      // becomes a plain rejection or a single settlement (a native promise is reused as is).
      Promise.resolve(result).then(
        (decision) => decide(config, decision, k, cost, req, res, next, onLimited),
        (error: unknown) => fail(config, error, k, res, next),
      );
    } else {
      decide(config, result as Decision, key!, cost, req, res, next, onLimited);
    }
  };
}

/** A header value as one string (node gives string[] for repeated `set-cookie`-like fields). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(",") : value;
}

/**
 * Sets a List field (`RateLimit-Policy`, `RateLimit`), appending to a value already there
 * (RFC 9651 3.1: a List may be split over several field lines).
 */
function setList(res: ServerResponse, name: string, value: string): void {
  const previous = res.getHeader(name);
  if (previous === undefined) res.setHeader(name, value);
  else res.setHeader(name, [...(Array.isArray(previous) ? previous : [String(previous)]), value]);
}

/**
 * Sends the headers and either passes the request on or answers 429. The header values are
 * written straight onto `res` from the checked numbers (no header object per request), in
 * the order of `rateLimitHeaders`: `RateLimit-Policy`, `RateLimit`, `X-RateLimit-*`,
 * `Retry-After`.
 */
function decide<Req extends IncomingMessage, Res extends ServerResponse>(
  config: CommonConfig,
  decision: Decision,
  key: string,
  cost: number,
  req: Req,
  res: Res,
  next: NextFunction,
  onLimited: RateLimitOptions<Req, Res>["onLimited"],
): void {
  // A fresh object, not a shared scratch one: an async limiter may interleave requests.
  // It does not escape, so V8 keeps it off the heap.
  const n: DecisionNumbers = { limit: 0, remaining: 0, retryAfter: -1, reset: -1 };
  try {
    readDecision(decision, n); // throws for a malformed decision
  } catch (error) {
    refuse(config, error, key, res); // invalid limiter output is a bug, not an outage
    return;
  }
  if (res.headersSent) return; // the request was answered meanwhile (an async limiter)
  if (config.draft) {
    setList(res, "RateLimit-Policy", config.text.policy(n.limit));
    setList(res, "RateLimit", config.text.rate(n.remaining, n.reset));
  }
  if (config.legacy) {
    res.setHeader("X-RateLimit-Limit", wholeText(n.limit));
    res.setHeader("X-RateLimit-Remaining", wholeText(n.remaining));
    if (n.reset >= 0) res.setHeader("X-RateLimit-Reset", wholeText(n.reset));
  }
  if (n.retryAfter >= 0) res.setHeader("Retry-After", wholeText(n.retryAfter));
  if (decision.allowed) {
    next();
  } else if (onLimited === undefined) {
    send(
      res,
      429,
      n.retryAfter >= 0
        ? config.quotaJson.text(n.retryAfter)
        : JSON.stringify(quotaExceededProblem(decision, config.policy, cost)),
    );
  } else {
    limited(config, decision, key, req, res, next, onLimited);
  }
}

/**
 * Calls `onLimited`. If it throws (or returns a promise that rejects), that is a
 * programming error: answered 500, unless it had already passed the request on with
 * `next` (then only reported), so the request ends in exactly one answer either way and a
 * throw never escapes into a promise chain (an unhandled rejection exits the process).
 */
function limited<Req extends IncomingMessage, Res extends ServerResponse>(
  config: CommonConfig,
  decision: Decision,
  key: string,
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
    if (passed) report(config, error, key, "programming");
    else refuse(config, error, key, res);
  };
  let returned: unknown;
  try {
    returned = onLimited(req, res, pass, decision);
  } catch (error) {
    broken(error);
    return;
  }
  if (isThenable(returned)) Promise.resolve(returned).then(undefined, broken);
}

/**
 * Reports a limiter outage, then lets the request through (`'open'`) or answers 503
 * (`'closed'`).
 */
function fail(
  config: CommonConfig,
  error: unknown,
  key: string | undefined,
  res: ServerResponse,
  next: NextFunction,
): void {
  report(config, error, key, "outage");
  if (res.headersSent) return; // answered meanwhile (an async limiter): nothing left to do
  if (config.failure === "open") next();
  else send(res, 503, UNAVAILABLE_PROBLEM);
}

/**
 * Reports a programming error and answers 500, whatever `failure` says. When a response
 * was already started (by `onLimited`), it is cut off instead, so the request cannot hang.
 */
function refuse(
  config: CommonConfig,
  error: unknown,
  key: string | undefined,
  res: ServerResponse,
): void {
  report(config, error, key, "programming");
  if (!res.headersSent) send(res, 500, INTERNAL_ERROR_PROBLEM);
  else if (!res.writableEnded) res.destroy();
}

/** Ends `res` with an `application/problem+json` body (an object, or its JSON text). */
function send(res: ServerResponse, status: number, problem: object | string): void {
  const body = typeof problem === "string" ? problem : JSON.stringify(problem);
  res.statusCode = status;
  res.setHeader("Content-Type", "application/problem+json");
  // The body is ASCII (the policy name is checked to be), so its length is its byte count;
  // no Buffer, so the same code runs under Bun's and Deno's node:http.
  res.setHeader("Content-Length", body.length);
  res.end(body);
}
