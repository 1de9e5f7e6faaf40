/**
 * `koaConcurrencyLimit`: the Koa middleware that holds a permit while each request's
 * handlers run.
 * @module
 */
import {
  type CommonConcurrencyOptions,
  checkConcurrencyOptions,
  holdUntilHandled,
  permitOf,
} from "./concurrency.js";
import { writeHeaders } from "./headers.js";
import { KOA_SOURCE, type KoaContextLike, problem } from "./koa.js";
import { setNodeHeader } from "./node.js";
import { answerBody, type Outcome, Pipeline } from "./pipeline.js";

/** Options of {@link koaConcurrencyLimit}. */
export interface KoaConcurrencyOptions<Ctx extends KoaContextLike = KoaContextLike>
  extends CommonConcurrencyOptions {
  /** The key of a `KeyedConcurrencyLimiter`. @default (ctx, clientKey) => clientKey */
  key?(ctx: Ctx, clientKey: string): string;
  /** Return true to let a request through without a permit (no headers). */
  skip?(ctx: Ctx): boolean;
}

const WHERE = "koaConcurrencyLimit";

/**
 * A Koa middleware (`app.use(koaConcurrencyLimit({ limiter }))`) that lets at most
 * `limiter.limit` requests' handlers (per key, for a `KeyedConcurrencyLimiter`) run at
 * once: a request holds its permit until the middleware after it (`next()`) has settled and
 * the response is written, not until its client goes away; at most `maxHoldMs` after its
 * connection closed, so a handler that never settles cannot hold one for good. One past
 * the limit gets 429 with `RateLimit-Policy: "default";q=N;qu="concurrent-requests"`.
 * See docs/http.md#concurrency-limits.
 * @throws {TypeError} For a limiter that is not a concurrency limiter or an unknown option.
 * @throws {RangeError} For an option out of range (`maxHoldMs`).
 * @example
 * app.use(koaConcurrencyLimit({ limiter: new KeyedConcurrencyLimiter({ limit: 4 }) }))
 */
export function koaConcurrencyLimit<Ctx extends KoaContextLike = KoaContextLike>(
  options: KoaConcurrencyOptions<Ctx>,
): (ctx: Ctx, next: () => Promise<unknown>) => Promise<void> {
  const { config, hooks, maxHoldMs } = checkConcurrencyOptions(WHERE, options);
  const pipeline = new Pipeline<Ctx>(WHERE, config, hooks, KOA_SOURCE);
  return async (ctx, next) => {
    const outcome = pipeline.run(ctx, undefined) as Outcome; // the consumer is synchronous
    switch (outcome.kind) {
      case "skip":
        await next();
        return;
      case "pass": {
        if (outcome.decision !== undefined) writeHeaders(config, outcome, ctx.res, setNodeHeader);
        const permit = permitOf(outcome.decision);
        if (permit === undefined) {
          await next();
          return;
        }
        const handled = next();
        holdUntilHandled(ctx.res, permit, maxHoldMs, handled);
        await handled;
        return;
      }
      default: // answered here: "limited", "unavailable", "error"
        if (outcome.decision !== undefined) writeHeaders(config, outcome, ctx.res, setNodeHeader);
        problem(ctx, outcome.status, answerBody(config, outcome));
    }
  };
}
