/**
 * What the `tollgate/http` concurrency middlewares share: the options, a `KeyedConsumer`
 * that takes a permit and hands it over inside its `Decision`, and the `RateLimit-Policy`
 * text with the quota unit `concurrent-requests` (draft-ietf-httpapi-ratelimit-headers-10).
 * @module
 */
import type { ConcurrencyLimiter } from "../concurrency/concurrency-limiter.js";
import type { KeyedConcurrencyLimiter } from "../concurrency/keyed-concurrency-limiter.js";
import { concurrencyDenial } from "../concurrency/options.js";
import type { Permit } from "../concurrency/permit.js";
import { checkOptions, describe } from "../errors.js";
import type { Decision } from "../limiter.js";
import {
  type AdapterHookOptions,
  type CommonConfig,
  type CommonRateLimitOptions,
  checkAdapterOptions,
  type KeyedConsumer,
} from "./core.js";
import { HeaderText } from "./headers.js";

/** The quota unit a concurrency policy states in `RateLimit-Policy` (`qu`). */
export const CONCURRENT_REQUESTS = "concurrent-requests";

/** Options every concurrency middleware shares (the rate middlewares' minus `windowSeconds`). */
export interface CommonConcurrencyOptions
  extends Omit<CommonRateLimitOptions, "limiter" | "windowSeconds"> {
  /**
   * Required: a `ConcurrencyLimiter` (one limit for all requests) or a
   * `KeyedConcurrencyLimiter` (per client key). A permit is held from the check until the
   * response finishes or its connection closes, whichever comes first; released once.
   */
  readonly limiter: ConcurrencyLimiter | KeyedConcurrencyLimiter;
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

/** `RateLimit-Policy` with `;qu="concurrent-requests"` after the quota. @internal */
class ConcurrencyHeaderText extends HeaderText {
  /** @internal */
  private unitLimit = -1;
  /** @internal */
  private unitPolicy = "";

  override policy(limit: number, windowSeconds?: number): string {
    if (limit !== this.unitLimit) {
      this.unitPolicy = `${super.policy(limit, windowSeconds)};qu="${CONCURRENT_REQUESTS}"`;
      this.unitLimit = limit;
    }
    return this.unitPolicy;
  }
}

/** The consumer that takes one permit per request. */
function permitConsumer(
  where: string,
  limiter: unknown,
): KeyedConsumer & { readonly maxKeyLength: number | undefined } {
  const l = limiter as {
    tryAcquire?: unknown;
    limit?: unknown;
    retryAfterMs?: unknown;
    inUseOf?: unknown;
  } | null;
  if (
    typeof l !== "object" ||
    l === null ||
    typeof l.tryAcquire !== "function" ||
    typeof l.limit !== "number"
  ) {
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
 * Validates a concurrency middleware's options: the shared ones (as the rate middlewares
 * check them, `windowSeconds` refused) and the adapter's `own` hooks.
 * @throws {TypeError} For a limiter that is not a concurrency limiter, an unknown option
 *   or a hook that is not a function; {RangeError} for a bad value.
 */
export function checkConcurrencyOptions<O extends CommonConcurrencyOptions & AdapterHookOptions>(
  where: string,
  options: O,
  own: readonly string[],
) {
  const o = checkOptions<O>(where, options);
  if ((o as { windowSeconds?: unknown }).windowSeconds !== undefined) {
    throw new TypeError(
      `${where}: windowSeconds is not an option: a concurrency limit has no window (RateLimit-Policy states qu="${CONCURRENT_REQUESTS}" instead)`,
    );
  }
  const consumer = permitConsumer(where, o.limiter);
  const checked = checkAdapterOptions<O>(where, { ...o, limiter: consumer } as unknown as O, own);
  const base: CommonConfig = checked.config;
  const config: CommonConfig = {
    ...base,
    windowSeconds: undefined,
    text: new ConcurrencyHeaderText(base.quotedPolicy, Date.now),
  };
  // No cost: a request holds one permit.
  const hooks = { key: checked.hooks.key, skip: checked.hooks.skip };
  return { config, hooks, remoteAddress: checked.remoteAddress };
}
