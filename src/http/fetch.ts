import { describe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import {
  ABORTED_STATUS,
  AfterResponse,
  type AfterResponseOptions,
  type RequestCharges,
  requestCharges,
} from "./after-response.js";
import { type CommonRateLimitOptions, checkAdapterOptions, FETCH_HOOK_OPTIONS } from "./core.js";
import {
  answerBody,
  type ClientSource,
  headerRecord,
  INTERNAL_ERROR_BODY,
  LIST_FIELDS,
  Outcome,
  Pipeline,
  PROBLEM_JSON,
} from "./pipeline.js";

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
  extends CommonRateLimitOptions,
    AfterResponseOptions<Request> {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (see `trustProxy` and `remoteAddress`), IPv6 grouped by `ipv6Prefix`, or `"unknown"`.
   * @default (request, clientKey) => clientKey
   */
  readonly key?: ((request: Request, clientKey: string) => string) | undefined;
  /**
   * Units this request costs (a finite number >= 0). Any other result (`NaN`, `-1`, `"5"`) is
   * a programming error: a 500 and `onError` told (`kind: 'programming'`), never a pass.
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
   * Called for each admitted request near its limit (see `nearLimitShare`), before it goes on:
   * for logging, alerts or a tracing span (`decisionAttributes`). A throw is a programming error
   * (500, `onError` told); a returned promise is not waited for (a rejection goes to `onError`).
   */
  readonly onNearLimit?:
    | ((request: Request, decision: Decision, key: string) => unknown)
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

/**
 * The peer address as Deno, Bun or @hono/node-server hands it to a fetch handler in its first
 * extra argument (`context`), as the `remoteAddress` option lists; `undefined` when none is.
 */
export function runtimeAddress(request: Request, context: unknown): string | undefined {
  const c = context as
    | {
        remoteAddr?: { hostname?: unknown };
        requestIP?: (request: Request) => { address?: unknown } | null;
        incoming?: { socket?: { remoteAddress?: unknown } };
      }
    | undefined;
  if (typeof c !== "object" || c === null) return undefined;
  const deno = c.remoteAddr?.hostname;
  if (typeof deno === "string") return deno;
  if (typeof c.requestIP === "function") {
    const bun = c.requestIP(request)?.address;
    if (typeof bun === "string") return bun;
  }
  const node = c.incoming?.socket?.remoteAddress;
  return typeof node === "string" ? node : undefined;
}

/**
 * The client's address of a fetch `Request`: `remoteAddress` when given, else the
 * runtime's ({@link runtimeAddress}), and the forwarding header from `request.headers`.
 */
export function fetchSource<Args extends unknown[]>(
  remoteAddress: ((request: Request, ...args: Args) => string | undefined) | undefined,
): ClientSource<Request, Args> {
  return {
    peer:
      remoteAddress === undefined
        ? (request, args) => runtimeAddress(request, args[0])
        : (request, args) => remoteAddress(request, ...args),
    header: (request, name) => request.headers.get(name),
    untrusted: (request, _args, peer, warning) => warning.checkFetch(request.headers, peer),
  };
}

/**
 * Wraps a fetch-style handler so that each request is counted against `limiter` under its
 * key first: an allowed request goes to `handler` and its response gets the rate-limit
 * headers (copied first when immutable, as `Response.redirect`'s); a limited one gets 429
 * with `Retry-After` and a problem+json body, and `handler` is not called.
 *
 * Watch out: `failure` and programming errors as for {@link rateLimit}
 * (docs/http.md#when-something-fails-outage-or-programming-error); errors thrown by
 * `handler` propagate unchanged.
 * @example
 * const limiter = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))
 * Deno.serve(withRateLimit((request) => new Response("ok"), { limiter }))
 * @throws {TypeError} If `handler` is not a function, or an option has the wrong type.
 * @throws {RangeError} If an option is out of range (as for {@link rateLimit}).
 */
export function withRateLimit<
  Args extends unknown[],
  Result extends Response | undefined = Response,
>(
  handler: FetchHandler<Args, Result>,
  options: FetchRateLimitOptions<Args>,
): ((request: Request, ...args: Args) => Promise<Result | Response>) & RequestCharges<Request> {
  if (typeof handler !== "function") {
    throw new TypeError(`${WHERE}: handler must be a function, got ${describe(handler)}`);
  }
  const { config, hooks, onLimited, remoteAddress, refundIf, refundAborted } = checkAdapterOptions(
    WHERE,
    options,
    FETCH_HOOK_OPTIONS,
  );
  const after = new AfterResponse<Request>(WHERE, config, refundIf, refundAborted);
  const pipeline = new Pipeline(WHERE, config, hooks, fetchSource(remoteAddress));
  const limited = async (request: Request, ...args: Args): Promise<Result | Response> => {
    const result = pipeline.run(request, args);
    const outcome = result instanceof Outcome ? result : await result;
    switch (outcome.kind) {
      case "skip":
        return handler(request, ...args);
      case "pass": {
        if (outcome.decision === undefined) return handler(request, ...args); // failed open
        const headers = headerRecord(config, outcome);
        if (!after.open(request, outcome))
          return withHeaders(await handler(request, ...args), headers);
        const run = () => handler(request, ...args);
        return withHeaders(await settled(after, request, request, run, (r) => r), headers);
      }
      default: // answered here: "limited", "unavailable", "error"
        return answer(pipeline, outcome, onLimited, request);
    }
  };
  return Object.assign(limited, requestCharges(WHERE, after));
}

/**
 * Runs the handler (`run`) of `request` (its handle `handle`) and tells `after` how its answer
 * ended: 500 when it throws (what the runtime answers; the error propagates), else the status
 * of the response `responseOf` finds, or aborted when `request.signal` aborted first or there
 * is no response (the client went away).
 */
export async function settled<Handle extends object, R>(
  after: AfterResponse<Handle>,
  handle: Handle,
  request: Request,
  run: () => R | Promise<R>,
  responseOf: (result: R) => Response | undefined,
): Promise<R> {
  let result: R;
  try {
    result = await run();
  } catch (error) {
    after.settle(handle, 500);
    throw error;
  }
  const response = responseOf(result);
  const aborted = request.signal?.aborted === true || response === undefined || response === null;
  after.settle(handle, aborted ? ABORTED_STATUS : response.status, aborted);
  return result;
}

/**
 * The response, with the rate-limit headers, to an outcome the middleware answers itself: the
 * problem body, or for `'limited'` what `onLimited(handle, decision)` returns, when given.
 */
export function answer<Handle>(
  pipeline: Pick<Pipeline<never, never>, "refuse" | "config">,
  outcome: Outcome,
  onLimited: ((handle: Handle, decision: Decision) => Response | Promise<Response>) | undefined,
  handle: Handle,
): Response | Promise<Response> {
  const headers = headerRecord(pipeline.config, outcome);
  if (outcome.kind !== "limited" || onLimited === undefined) {
    return problem(outcome.status, answerBody(pipeline.config, outcome), headers);
  }
  return limitedAnswer(pipeline, outcome, headers, onLimited, handle);
}

/**
 * The response `onLimited` gives, with the rate-limit `headers` added. A throw or rejection is
 * a programming error (`pipeline.refuse`): answered 500 without the headers.
 */
async function limitedAnswer<Handle>(
  pipeline: Pick<Pipeline<never, never>, "refuse">,
  outcome: Outcome,
  headers: Record<string, string>,
  onLimited: (handle: Handle, decision: Decision) => Response | Promise<Response>,
  handle: Handle,
): Promise<Response> {
  let response: Response;
  try {
    response = await onLimited(handle, outcome.decision!);
  } catch (error) {
    pipeline.refuse(error, outcome.key); // onLimited is a hook: its failure is a bug
    return problem(500, INTERNAL_ERROR_BODY, {});
  }
  return withHeaders(response, headers);
}

/** An `application/problem+json` response with the given JSON text. */
export function problem(status: number, body: string, headers: Record<string, string>): Response {
  return new Response(body, { status, headers: { ...headers, "Content-Type": PROBLEM_JSON } });
}

/**
 * Adds the headers to `response` (List fields appended, others set). When its headers are
 * immutable, a copy with the same status, headers and body stream is returned; when even
 * that is impossible (a 101 upgrade), the response goes out unchanged.
 */
export function withHeaders<Result extends Response | undefined>(
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
