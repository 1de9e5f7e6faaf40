/**
 * What the `tollgate/http` concurrency middlewares share: the options, a `KeyedConsumer`
 * that takes a permit and hands it over inside its `Decision`, and the `RateLimit-Policy`
 * text with the quota unit `concurrent-requests` (draft-ietf-httpapi-ratelimit-headers-10).
 * @module
 */
import type { ServerResponse } from "node:http";
import type { ConcurrencyLimiter } from "../concurrency/concurrency-limiter.js";
import type { KeyedConcurrencyLimiter } from "../concurrency/keyed-concurrency-limiter.js";
import { concurrencyDenial } from "../concurrency/options.js";
import type { Permit } from "../concurrency/permit.js";
import { checkNumber, checkOptions, describe, hasMethods } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { timerDelay } from "../core/wait.js";
import {
  type AdapterHookOptions,
  type CommonRateLimitOptions,
  checkAdapterOptions,
  type KeyedConsumer,
} from "./core.js";

/** The quota unit a concurrency policy states in `RateLimit-Policy` (`qu`). */
export const CONCURRENT_REQUESTS = "concurrent-requests";

/** Default `maxHoldMs` (one minute): see that option of {@link CommonConcurrencyOptions}. */
export const DEFAULT_MAX_HOLD_MS = 60_000;

/** Options every concurrency middleware shares (the rate middlewares' minus `windowSeconds`). */
export interface CommonConcurrencyOptions
  extends Omit<CommonRateLimitOptions, "limiter" | "windowSeconds"> {
  /**
   * Required: a `ConcurrencyLimiter` (one limit for all requests) or a
   * `KeyedConcurrencyLimiter` (per client key). A permit is held from the check until the
   * handler is done with the response (it ends it, or the framework finishes it), not until
   * the client goes away; released once. See docs/http.md#concurrency-limits.
   */
  readonly limiter: ConcurrencyLimiter | KeyedConcurrencyLimiter;
  /**
   * The longest a request keeps its permit once its connection has closed while its
   * handler has not ended the response, in ms (a finite number > 0): then the permit is
   * released whether the handler ends or not, so a handler that never ends cannot hold one
   * for good. Until then the handler counts as running, its client gone or not.
   * @default 60_000
   */
  readonly maxHoldMs?: number | undefined;
}

/**
 * Holds `permit` until the handler is done with `res`: it ends it (`end()`, which a framework
 * calls for the handler too, even once the client has gone), destroys it, or `res` finishes.
 * When the connection closes first, the handler still counts as running: the permit is
 * released when it ends the response, or `maxHoldMs` after the close, whichever comes first.
 * Released exactly once; at once when `res` is already ended. `afterwards` (Koa) holds it also
 * until that promise settles.
 * @internal
 */
export function holdUntilHandled(
  res: ServerResponse,
  permit: Permit,
  maxHoldMs: number,
  afterwards?: Promise<unknown>,
): void {
  let ended = res.writableEnded;
  let settled = afterwards === undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const release = () => {
    if (permit.released) return;
    if (timer !== undefined) clearTimeout(timer);
    permit.release();
  };
  const done = () => {
    ended = true;
    if (settled) release();
  };
  if (ended && settled) {
    release();
    return;
  }
  const end = res.end;
  const destroy = res.destroy;
  // Own properties on this response only: the handler's `end` is the sign it is done.
  res.end = function (this: ServerResponse, ...args: unknown[]) {
    done();
    return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse["end"];
  res.destroy = function (this: ServerResponse, error?: Error) {
    done();
    return destroy.call(this, error);
  };
  res.once("finish", done);
  res.once("close", () => {
    if (permit.released) return;
    timer = setTimeout(release, timerDelay(maxHoldMs));
    if (typeof timer === "object" && typeof timer.unref === "function") timer.unref();
  });
  if (afterwards !== undefined) {
    const after = () => {
      settled = true;
      if (ended || res.destroyed) release();
    };
    afterwards.then(after, after);
  }
}

/** A granting decision that carries the permit it took, for the adapter to hold. @internal */
export class PermitDecision implements Decision {
  readonly allowed = true;
  readonly retryAfterMs = 0;
  /** Unknown: permits come back when requests end. `Infinity` leaves `t` out of `RateLimit`. */
  readonly resetAfterMs = Number.POSITIVE_INFINITY;

  constructor(
    readonly permit: Permit,
    readonly limit: number,
    readonly remaining: number,
  ) {}
}

/** The permit an outcome's decision holds, when it holds one. @internal */
export function permitOf(decision: Decision | undefined): Permit | undefined {
  return decision instanceof PermitDecision ? decision.permit : undefined;
}

/** The consumer that takes one permit per request. */
function permitConsumer(
  where: string,
  limiter: unknown,
): KeyedConsumer & { readonly maxKeyLength: number | undefined } {
  const l = limiter as Record<string, unknown>;
  if (!hasMethods(limiter, "tryAcquire") || typeof l.limit !== "number") {
    throw new TypeError(
      `${where}: limiter must be a ConcurrencyLimiter or a KeyedConcurrencyLimiter, got ${describe(limiter)}`,
    );
  }
  const denial = concurrencyDenial(
    l.limit,
    typeof l.retryAfterMs === "number" ? l.retryAfterMs : 1000,
  );
  if (typeof l.inUseOf === "function") {
    const keyed = limiter as KeyedConcurrencyLimiter;
    return {
      maxKeyLength: keyed.maxKeyLength,
      consume: (key) => {
        const permit = keyed.tryAcquire(key);
        if (permit === null) return denial;
        return new PermitDecision(permit, keyed.limit, keyed.limit - keyed.inUseOf(key));
      },
    };
  }
  const one = limiter as ConcurrencyLimiter;
  return {
    maxKeyLength: undefined,
    consume: () => {
      const permit = one.tryAcquire();
      return permit === null ? denial : new PermitDecision(permit, one.limit, one.available);
    },
  };
}

/**
 * Validates a concurrency middleware's options: the shared ones (as the rate middlewares check
 * them, `windowSeconds` refused) and the adapter's `own` (default `key`, `skip`, `maxHoldMs`).
 * @throws {TypeError} For a limiter that is not a concurrency limiter, an unknown option
 *   or a hook that is not a function; {RangeError} for a bad value.
 */
export function checkConcurrencyOptions<O extends CommonConcurrencyOptions & AdapterHookOptions>(
  where: string,
  options: O,
  own: readonly string[] = ["key", "skip", "maxHoldMs"],
) {
  const o = checkOptions<O>(where, options);
  const maxHoldMs = checkNumber(where, "maxHoldMs", o.maxHoldMs, 0, false, DEFAULT_MAX_HOLD_MS);
  if ((o as { windowSeconds?: unknown }).windowSeconds !== undefined) {
    throw new TypeError(
      `${where}: windowSeconds is not an option: a concurrency limit has no window (RateLimit-Policy states qu="${CONCURRENT_REQUESTS}" instead)`,
    );
  }
  const consumer = permitConsumer(where, o.limiter);
  const { config, hooks, remoteAddress } = checkAdapterOptions<O>(
    where,
    { ...o, limiter: consumer } as unknown as O,
    own,
    CONCURRENT_REQUESTS,
  );
  // No cost: a request holds one permit.
  return { config, hooks: { key: hooks.key, skip: hooks.skip }, remoteAddress, maxHoldMs };
}
