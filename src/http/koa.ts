/**
 * `koaRateLimit`: the Koa adapter. It renders the pipeline's outcome on a Koa context; no
 * runtime dependency on Koa (the type below is the few members it uses).
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Decision } from "../core/limiter.js";
import { AfterResponse, type RequestCharges, requestCharges } from "./after-response.js";
import { type CommonRateLimitOptions, checkAdapterOptions, HOOK_OPTIONS } from "./core.js";
import { writeHeaders } from "./headers.js";
import { NODE_SOURCE, setNodeHeader } from "./node.js";
import {
  answerBody,
  type ClientSource,
  INTERNAL_ERROR_BODY,
  Outcome,
  Pipeline,
  PROBLEM_JSON,
} from "./pipeline.js";

/** The members of a Koa context that the middleware uses (Koa 2 and 3). */
export interface KoaContextLike {
  /** The node request: its socket's `remoteAddress` is the peer. */
  readonly req: IncomingMessage;
  /** The node response: the rate-limit headers are set on it. */
  readonly res: ServerResponse;
  status: number;
  body: unknown;
  type: string;
}

/**
 * Options of {@link koaRateLimit}: the shared ones plus request hooks on Koa's context.
 * The hooks are methods so that they may be annotated with Koa's own `Context` type.
 */
export interface KoaRateLimitOptions<Ctx extends KoaContextLike = KoaContextLike>
  extends CommonRateLimitOptions {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (the socket's peer; see `trustProxy`: Koa's `app.proxy` is not consulted), IPv6
   * grouped by `ipv6Prefix`, or `"unknown"`.
   * @default (ctx, clientKey) => clientKey
   */
  key?(ctx: Ctx, clientKey: string): string;
  /** Units this request costs (a finite number >= 0); anything else is a 500. @default 1 */
  cost?(ctx: Ctx): number;
  /** Return true to let a request through unchecked (no cost, no headers). */
  skip?(ctx: Ctx): boolean;
  /**
   * Answers a limited request instead of the default body: `ctx.status` is already 429 (or
   * 403/413 when it can never pass) and the headers are set; set `ctx.body` (and maybe
   * `ctx.status`). A throw or rejection is a programming error: 500, and `onError` is told.
   */
  onLimited?(ctx: Ctx, decision: Decision): unknown;
  /**
   * Called for each admitted request near its limit (see `nearLimitShare`), before it goes on:
   * for logging, alerts or a tracing span (`decisionAttributes`). A throw is a programming error
   * (500, `onError` told); a returned promise is not waited for (a rejection goes to `onError`).
   */
  onNearLimit?(ctx: Ctx, decision: Decision, key: string): unknown;
  /**
   * Called once the response status is known, for each request the limiter charged: true
   * gives back what the request took (see docs/http.md#refunds-and-charges-after-the-response).
   * `status` is the response's. A request whose client went away first is not asked about:
   * it stays charged, unless `refundAborted` (then with status 499).
   * @example
   * refundIf: (status) => status < 400 // count only failed logins
   */
  refundIf?(status: number, ctx: Ctx): boolean;
  /**
   * Also ask `refundIf` about a request whose client went away before its response was
   * complete (status 499). Off by default: such a request stays charged
   * (docs/http.md#refunds-and-charges-after-the-response).
   * @default false
   */
  readonly refundAborted?: boolean | undefined;
}

const WHERE = "koaRateLimit";

/** The client's address on Koa: the node request's, as for `rateLimit`. */
export const KOA_SOURCE: ClientSource<KoaContextLike, undefined> = {
  peer: (ctx) => NODE_SOURCE.peer(ctx.req, undefined),
  header: (ctx, name) => NODE_SOURCE.header(ctx.req, name, undefined),
  untrusted: (ctx, _extra, _peer, warning) =>
    warning.checkNode(ctx.req, (ctx as { readonly app?: unknown }).app),
};

/**
 * A Koa middleware: `app.use(koaRateLimit(options))`, with the options, headers, 429
 * body, failure modes and client keys of `rateLimit`. An allowed request goes on to
 * `next()` with the rate-limit headers set; a limited one is answered 429 and `next` is
 * not called. Errors thrown downstream are not caught.
 * @throws {TypeError} If an option has the wrong type or an unknown name.
 * @throws {RangeError} If an option is out of range (as for `rateLimit`).
 * @example
 * app.use(koaRateLimit({ limiter: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })) }))
 */
export function koaRateLimit<Ctx extends KoaContextLike = KoaContextLike>(
  options: KoaRateLimitOptions<Ctx>,
): ((ctx: Ctx, next: () => Promise<unknown>) => Promise<void>) & RequestCharges<Ctx> {
  const { config, hooks, onLimited, refundIf, refundAborted } = checkAdapterOptions(
    WHERE,
    options,
    HOOK_OPTIONS,
  );
  const pipeline = new Pipeline<Ctx>(WHERE, config, hooks, KOA_SOURCE);
  const after = new AfterResponse<Ctx>(WHERE, config, refundIf, refundAborted);
  const middleware = async (ctx: Ctx, next: () => Promise<unknown>): Promise<void> => {
    const result = pipeline.run(ctx, undefined);
    const outcome = result instanceof Outcome ? result : await result;
    switch (outcome.kind) {
      case "skip":
        await next();
        return;
      case "pass":
        if (outcome.decision !== undefined) writeHeaders(config, outcome, ctx.res, setNodeHeader);
        after.open(ctx, outcome, ctx.res);
        await next();
        return;
      default: // answered here: "limited", "unavailable", "error"
        if (outcome.decision !== undefined) writeHeaders(config, outcome, ctx.res, setNodeHeader);
        if (outcome.kind !== "limited" || onLimited === undefined) {
          problem(ctx, outcome.status, answerBody(config, outcome));
          return;
        }
        ctx.status = outcome.status;
        try {
          await onLimited(ctx, outcome.decision!);
        } catch (error) {
          pipeline.refuse(error, outcome.key); // onLimited is a hook: its failure is a bug
          problem(ctx, 500, INTERNAL_ERROR_BODY);
        }
    }
  };
  return Object.assign(middleware, requestCharges(WHERE, after));
}

/** Answers with an `application/problem+json` body (JSON text). */
export function problem(ctx: KoaContextLike, status: number, body: string): void {
  ctx.status = status;
  ctx.body = body;
  ctx.type = PROBLEM_JSON;
}
