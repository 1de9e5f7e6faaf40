/**
 * `honoRateLimit`: the Hono adapter. It renders the pipeline's outcome as a Hono
 * middleware; no runtime dependency on Hono (the type below is the few members it uses).
 * @module
 */
import type { Decision } from "../core/limiter.js";
import { AfterResponse, type RequestCharges, requestCharges } from "./after-response.js";
import { type CommonRateLimitOptions, checkAdapterOptions, FETCH_HOOK_OPTIONS } from "./core.js";
import { answer, runtimeAddress, settled, withHeaders } from "./fetch.js";
import { type ClientSource, headerRecord, Outcome, Pipeline } from "./pipeline.js";

/** The members of a Hono `Context` that the middleware uses (Hono 4). */
export interface HonoContextLike {
  /** Hono's request; `raw` is the fetch `Request`. */
  readonly req: { readonly raw: Request };
  /**
   * The runtime's second `fetch` argument: `@hono/node-server`'s `{ incoming, outgoing }`,
   * Bun's `server`, Deno's `info`, a Worker's bindings.
   */
  readonly env: unknown;
  /** The response so far; after `next()`, the handler's. */
  res: Response;
}

/**
 * Options of {@link honoRateLimit}: the shared ones plus request hooks on Hono's context.
 * The hooks are methods so that they may be annotated with Hono's own `Context` type.
 */
export interface HonoRateLimitOptions<Ctx extends HonoContextLike = HonoContextLike>
  extends CommonRateLimitOptions {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (see `remoteAddress` and `trustProxy`), IPv6 grouped by `ipv6Prefix`, or `"unknown"`.
   * @default (c, clientKey) => clientKey
   */
  key?(c: Ctx, clientKey: string): string;
  /**
   * Units this request costs (a finite number >= 0); anything else is a programming
   * error: 500, never a pass.
   * @default 1
   */
  cost?(c: Ctx): number;
  /** Return true to let a request through unchecked (no cost, no headers). */
  skip?(c: Ctx): boolean;
  /**
   * Answers a limited request instead of the default 429; the rate-limit headers (and
   * `Retry-After`) are added to the response it returns. If it throws or rejects, that is
   * a programming error: 500, and `onError` is told with `kind: 'programming'`.
   */
  onLimited?(c: Ctx, decision: Decision): Response | Promise<Response>;
  /**
   * Called for each admitted request near its limit (see `nearLimitShare`), before it goes on:
   * for logging, alerts or a tracing span (`decisionAttributes`). A throw is a programming error
   * (500, `onError` told); a returned promise is not waited for (a rejection goes to `onError`).
   */
  onNearLimit?(c: Ctx, decision: Decision, key: string): unknown;
  /**
   * The peer address of the connection. Hono has no runtime-neutral way to ask (its
   * `getConnInfo` is a different import per runtime), so the default asks the runtime through
   * `c.env`: `@hono/node-server`'s `c.env.incoming.socket.remoteAddress` (or
   * `c.env.server.incoming…`, as its `getConnInfo` reads), Bun's `c.env.requestIP(request)`,
   * Deno's `c.env.remoteAddr.hostname`. When it finds none (a Worker, a test calling
   * `app.request`), the key is `"unknown"`, shared by every such request, so they are limited
   * together, never each on its own, and a warning is logged once. On Workers pass
   * `(c) => c.req.raw.headers.get("cf-connecting-ip") ?? undefined`.
   */
  remoteAddress?(c: Ctx): string | undefined;
  /**
   * Called once the response status is known, for each request the limiter charged: true
   * gives back what the request took (see docs/http.md#refunds-and-charges-after-the-response).
   * `status` is the response's. A request whose client went away first is not asked about:
   * it stays charged, unless `refundAborted` (then with status 499).
   * @example
   * refundIf: (status) => status < 400 // count only failed logins
   */
  refundIf?(status: number, c: Ctx): boolean;
  /**
   * Also ask `refundIf` about a request whose client went away before its response was
   * complete (status 499). Off by default: such a request stays charged
   * (docs/http.md#refunds-and-charges-after-the-response).
   * @default false
   */
  readonly refundAborted?: boolean | undefined;
}

const WHERE = "honoRateLimit";

/**
 * A Hono middleware: `app.use(honoRateLimit(options))`, with the options, headers, 429 body,
 * failure modes and client keys of `rateLimit` (see {@link HonoRateLimitOptions} for how the
 * client's address is found). An allowed request goes on to `next()` and its response gets
 * the rate-limit headers; a limited one is answered 429 and the handler is not called. Errors
 * thrown by later handlers are not caught.
 * @throws {TypeError} If an option has the wrong type or an unknown name.
 * @throws {RangeError} If an option is out of range (as for `rateLimit`).
 * @example
 * const limiter = new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 }))
 * app.use(honoRateLimit({ limiter }))
 */
export function honoRateLimit<Ctx extends HonoContextLike = HonoContextLike>(
  options: HonoRateLimitOptions<Ctx>,
): ((c: Ctx, next: () => Promise<void>) => Promise<Response | undefined>) & RequestCharges<Ctx> {
  const { config, hooks, onLimited, remoteAddress, refundIf, refundAborted } = checkAdapterOptions(
    WHERE,
    options,
    FETCH_HOOK_OPTIONS,
  );
  const after = new AfterResponse<Ctx>(WHERE, config, refundIf, refundAborted);
  let warned = false;
  const source: ClientSource<Ctx, undefined> = {
    peer:
      remoteAddress === undefined
        ? (c) => {
            const env = c.env as { server?: unknown } | undefined;
            const address =
              runtimeAddress(c.req.raw, env) ??
              // @hono/node-server's bindings, when an app nests them as env.server
              (typeof env === "object" && env !== null
                ? runtimeAddress(c.req.raw, env.server)
                : undefined);
            if (address === undefined && !warned) {
              warned = true;
              console.warn(
                `${WHERE}: no client address in c.env (not @hono/node-server, Bun or Deno?): such requests share the key "unknown"; pass remoteAddress`,
              );
            }
            return address;
          }
        : (c) => remoteAddress(c),
    header: (c, name) => c.req.raw.headers.get(name),
    untrusted: (c, _extra, peer, warning) => warning.checkFetch(c.req.raw.headers, peer),
  };
  const pipeline = new Pipeline<Ctx>(WHERE, config, hooks, source);
  const middleware = async (c: Ctx, next: () => Promise<void>): Promise<Response | undefined> => {
    const result = pipeline.run(c, undefined);
    const outcome = result instanceof Outcome ? result : await result;
    switch (outcome.kind) {
      case "skip":
        await next();
        return undefined;
      case "pass": {
        if (after.open(c, outcome)) await settled(after, c, c.req.raw, next, () => c.res);
        else await next();
        if (outcome.decision !== undefined) {
          const response = withHeaders(c.res, headerRecord(config, outcome));
          if (response !== c.res) c.res = response; // the handler's headers were immutable
        }
        return undefined;
      }
      default: // answered here: "limited", "unavailable", "error"
        return answer(pipeline, outcome, onLimited, c);
    }
  };
  return Object.assign(middleware, requestCharges(WHERE, after));
}
