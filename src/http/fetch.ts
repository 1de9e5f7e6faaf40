import { describe } from "../errors.js";
import type { Decision } from "../limiter.js";
import { clientKey } from "./client-key.js";
import {
  type CommonConfig,
  type CommonRateLimitOptions,
  checkCommonOptions,
  checkFunction,
  checkHookCost,
  checkHookKey,
  headersFor,
  LIST_FIELDS,
  report,
} from "./core.js";
import { INTERNAL_ERROR_PROBLEM, quotaExceededProblem, UNAVAILABLE_PROBLEM } from "./headers.js";

/**
 * A fetch-style handler: `Bun.serve({ fetch })`, `Deno.serve(handler)`, Hono's `app.fetch`,
 * a Workers `fetch`. Extra arguments (Deno's `info`, Bun's `server`, Hono's `env`) pass
 * through unchanged. It may return `undefined` (Bun, after `server.upgrade`).
 */
export type FetchHandler<
  Args extends unknown[] = unknown[],
  Result extends Response | undefined = Response | undefined,
> = (request: Request, ...args: Args) => Result | Promise<Result>;

/** Options of {@link withRateLimit}: the shared ones plus request hooks for `Request`s. */
export interface FetchRateLimitOptions<Args extends unknown[] = unknown[]>
  extends CommonRateLimitOptions {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (see `trustProxy` and `remoteAddress`), IPv6 grouped by `ipv6Prefix`, or `"unknown"`.
   * @default (request, clientKey) => clientKey
   */
  readonly key?: ((request: Request, clientKey: string) => string) | undefined;
  /**
   * Units this request costs (a finite number >= 0). Any other result (`NaN`, `-1`, `"5"`)
   * is a programming error: the request gets 500 and `onError` is told (`kind:
   * 'programming'`), never a pass.
   * @default 1
   */
  readonly cost?: ((request: Request) => number) | undefined;
  /** Return true to pass a request to the handler unchecked (no cost, no headers). */
  readonly skip?: ((request: Request) => boolean) | undefined;
  /**
   * Answers a limited request instead of the default 429. The rate-limit headers (and
   * `Retry-After`) are added to the response it returns. If it throws or rejects, that is
   * a programming error: 500, and `onError` is told with `kind: 'programming'`.
   */
  readonly onLimited?:
    | ((request: Request, decision: Decision) => Response | Promise<Response>)
    | undefined;
  /**
   * The peer address of the connection. The default asks the runtime through the extra
   * handler arguments: Deno's `info.remoteAddr.hostname`, Bun's `server.requestIP(request)`,
   * `@hono/node-server`'s `env.incoming.socket.remoteAddress`; `undefined` when none of
   * these is there (then the key is `"unknown"` unless `trustProxy` finds one). On Workers
   * pass e.g. `(request) => request.headers.get("cf-connecting-ip") ?? undefined`.
   */
  readonly remoteAddress?: ((request: Request, ...args: Args) => string | undefined) | undefined;
}

const WHERE = "withRateLimit";

/** The peer address as Deno, Bun or @hono/node-server hands it to a fetch handler. */
function runtimeAddress(request: Request, args: readonly unknown[]): string | undefined {
  const context = args[0] as
    | {
        remoteAddr?: { hostname?: unknown };
        requestIP?: (request: Request) => { address?: unknown } | null;
        incoming?: { socket?: { remoteAddress?: unknown } };
      }
    | undefined;
  if (typeof context !== "object" || context === null) return undefined;
  const deno = context.remoteAddr?.hostname;
  if (typeof deno === "string") return deno;
  if (typeof context.requestIP === "function") {
    const bun = context.requestIP(request)?.address;
    if (typeof bun === "string") return bun;
  }
  const node = context.incoming?.socket?.remoteAddress;
  return typeof node === "string" ? node : undefined;
}

/**
 * Wraps a fetch-style handler so that each request is counted against `limiter` under its
 * key first. An allowed request goes to `handler` and its response gets the rate-limit
 * headers; a limited one gets `429 Too Many Requests` with `Retry-After` and an
 * `application/problem+json` body (draft-10 `quota-exceeded`), and `handler` is not called.
 *
 * When the limiter throws or rejects, `failure` decides: `'open'` calls `handler` (no
 * rate-limit headers), `'closed'` answers 503; `onError` is told either way. A
 * programming error (a hook that throws, a `key` that is not a string, a `cost` that is not
 * a finite number >= 0, a `Decision` that `rateLimitHeaders` rejects) is answered 500
 * whatever `failure` says, and reported with
 * `kind: 'programming'`. Errors thrown by `handler` itself propagate unchanged. A response with immutable headers
 * (`Response.redirect`, a proxied `fetch` response) is copied to add the headers.
 *
 * @throws {TypeError} If `handler` is not a function, or an option has the wrong type.
 * @throws {RangeError} If an option is out of range (as for {@link rateLimit}).
 * @example
 * const limiter = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))
 * Deno.serve(withRateLimit((request) => new Response("ok"), { limiter }))
 */
export function withRateLimit<
  Args extends unknown[],
  Result extends Response | undefined = Response,
>(
  handler: FetchHandler<Args, Result>,
  options: FetchRateLimitOptions<Args>,
): (request: Request, ...args: Args) => Promise<Result | Response> {
  if (typeof handler !== "function") {
    throw new TypeError(`${WHERE}: handler must be a function, got ${describe(handler)}`);
  }
  const config = checkCommonOptions(WHERE, options);
  const keyOf = checkFunction<FetchRateLimitOptions<Args>["key"]>(WHERE, "key", options.key);
  const costOf = checkFunction<FetchRateLimitOptions<Args>["cost"]>(WHERE, "cost", options.cost);
  const skip = checkFunction<FetchRateLimitOptions<Args>["skip"]>(WHERE, "skip", options.skip);
  const onLimited = checkFunction<FetchRateLimitOptions<Args>["onLimited"]>(
    WHERE,
    "onLimited",
    options.onLimited,
  );
  const remoteAddress = checkFunction<FetchRateLimitOptions<Args>["remoteAddress"]>(
    WHERE,
    "remoteAddress",
    options.remoteAddress,
  );

  return async (request, ...args) => {
    let key: string | undefined;
    let cost = 1;
    let skipped = false;
    try {
      skipped = skip !== undefined && skip(request) === true;
      if (!skipped) {
        const peer =
          remoteAddress === undefined
            ? runtimeAddress(request, args)
            : remoteAddress(request, ...args);
        const forwarded =
          config.client.hops === 0 ? undefined : request.headers.get(config.client.header);
        const client = clientKey(peer, forwarded, config.client);
        key = keyOf === undefined ? client : checkHookKey(WHERE, keyOf(request, client));
        if (costOf !== undefined) cost = checkHookCost(WHERE, costOf(request));
      }
    } catch (error) {
      return refused(config, error, key); // a hook broke its contract: never fail open on it
    }
    if (skipped) return handler(request, ...args);
    let decision: Decision;
    try {
      decision = await config.limiter.consume(key!, cost);
    } catch (error) {
      return failed(config, error, key, handler, request, args);
    }
    let headers: Record<string, string>;
    try {
      headers = headersFor(config, decision);
    } catch (error) {
      return refused(config, error, key); // invalid limiter output is a bug, not an outage
    }
    if (decision.allowed) return withHeaders(await handler(request, ...args), headers);
    if (onLimited === undefined) {
      return problem(429, quotaExceededProblem(decision, config.policy, cost), headers);
    }
    let answer: Response;
    try {
      answer = await onLimited(request, decision);
    } catch (error) {
      return refused(config, error, key); // onLimited is a hook: its failure is a bug, not a pass
    }
    return withHeaders(answer, headers);
  };
}

/** Reports a limiter outage, then calls the handler (`'open'`) or answers 503 (`'closed'`). */
function failed<Args extends unknown[], Result extends Response | undefined>(
  config: CommonConfig,
  error: unknown,
  key: string | undefined,
  handler: FetchHandler<Args, Result>,
  request: Request,
  args: Args,
): Result | Promise<Result> | Response {
  report(config, error, key, "outage");
  return config.failure === "open"
    ? handler(request, ...args)
    : problem(503, UNAVAILABLE_PROBLEM, {});
}

/** Reports a programming error and answers 500, whatever `failure` says. */
function refused(config: CommonConfig, error: unknown, key: string | undefined): Response {
  report(config, error, key, "programming");
  return problem(500, INTERNAL_ERROR_PROBLEM, {});
}

/** An `application/problem+json` response. */
function problem(status: number, body: object, headers: Record<string, string>): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { ...headers, "Content-Type": "application/problem+json" },
  });
}

/**
 * Adds the headers to `response` (List fields appended, others set). When its headers are
 * immutable, a copy with the same status, headers and body stream is returned; when even
 * that is impossible (a 101 upgrade), the response goes out unchanged.
 */
function withHeaders<Result extends Response | undefined>(
  response: Result,
  headers: Record<string, string>,
): Result | Response {
  if (response === undefined || response === null) return response;
  try {
    apply(response.headers, headers);
    return response;
  } catch {
    try {
      const copy = new Response(response.body, response);
      apply(copy.headers, headers);
      return copy;
    } catch {
      return response;
    }
  }
}

function apply(target: Headers, headers: Record<string, string>): void {
  for (const name in headers) {
    if (LIST_FIELDS.has(name)) target.append(name, headers[name]!);
    else target.set(name, headers[name]!);
  }
}
