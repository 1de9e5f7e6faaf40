import { TokenBucket } from "../algorithms/token-bucket.js";
import { checkOptions, describe } from "../errors.js";
import type { Decision } from "../limiter.js";
import {
  type ClientKeyConfig,
  checkClientKeyOptions,
  type ProxyHeader,
  type TrustProxy,
} from "./client-key.js";
import {
  checkPolicyName,
  checkWindowSeconds,
  type DecisionNumbers,
  HeaderText,
  headersOf,
  QuotaExceededJson,
  readDecision,
  sfString,
} from "./headers.js";

/**
 * Anything that decides per key: a `KeyedLimiter`, a Redis limiter, or your own object.
 * `consume` may answer synchronously or with a promise; it may throw or reject (a store
 * outage), which the middleware handles according to `failure`. A `Decision` that
 * `rateLimitHeaders` rejects (NaN fields, a denial with a negative `retryAfterMs`) is a
 * programming error instead: answered 500.
 */
export interface KeyedConsumer {
  consume(key: string, cost?: number): Decision | PromiseLike<Decision>;
}

/** Which rate-limit headers to send: the draft-10 fields, the `X-RateLimit-*` ones, both, or none. */
export type HeaderMode = "draft-10" | "legacy" | "both" | "none";

/**
 * What to do with a request when the limiter throws or rejects: `'open'` lets it through
 * (without rate-limit headers), `'closed'` answers 503. Never a 429: an outage is not the
 * client's fault. A programming error (see {@link FailureKind}) is not an outage: it is
 * answered 500 in both modes.
 */
export type FailureMode = "open" | "closed";

/**
 * The two kinds of failure the middleware tells `onError` about:
 * - `'outage'`: the limiter threw or rejected (a store that is down, a timeout). Not the
 *   client's fault and maybe not yours: `failure` decides (`'open'` passes, `'closed'`
 *   answers 503).
 * - `'programming'`: your code broke the contract, so the request cannot be checked: a
 *   hook (`key`, `cost`, `skip`, `remoteAddress`, `onLimited`) threw, `key` returned a
 *   non-string or `cost` something other than a finite number >= 0, or the limiter
 *   returned an invalid `Decision`. Always answered `500` (problem+json), whatever
 *   `failure` says: passing it would switch rate limiting off for exactly the requests
 *   that trigger the bug (a `cost` of `NaN`, a `key` hook that throws on a missing body).
 */
export type FailureKind = "outage" | "programming";

/** What `onError` is told about a failure. */
export interface FailureInfo {
  /** Which kind of failure (see {@link FailureKind}). */
  readonly kind: FailureKind;
  /**
   * The configured failure mode. For an `'outage'` it is what happened to the request: let
   * through (`'open'`) or refused with 503 (`'closed'`); a `'programming'` error is always
   * answered 500.
   */
  readonly failure: FailureMode;
  /** The key being checked, when it was computed before the failure. */
  readonly key: string | undefined;
}

/** Options shared by {@link rateLimit} (node:http, Express) and `withRateLimit` (fetch). */
export interface CommonRateLimitOptions {
  /** Decides per key; see {@link KeyedConsumer}. Required. */
  readonly limiter: KeyedConsumer;
  /**
   * Policy name in the headers and the 429 body (printable ASCII).
   * @default "default"
   */
  readonly policy?: string | undefined;
  /** The policy's window in whole seconds, sent as `w=`; omitted when undefined. */
  readonly windowSeconds?: number | undefined;
  /**
   * Which rate-limit headers to send on every checked response. `Retry-After` is sent on
   * a 429 in every mode (it is part of the 429, RFC 6585 section 4).
   * @default "draft-10"
   */
  readonly headers?: HeaderMode | undefined;
  /**
   * What to do when the limiter throws or rejects (see {@link FailureMode}); a
   * programming error is answered 500 whatever this says.
   * @default "open"
   */
  readonly failure?: FailureMode | undefined;
  /**
   * Told of every failure: a limiter outage, or a programming error (see
   * {@link FailureKind}; `info.kind` says which). Errors it throws are ignored. The default
   * writes one `console.error` line per kind at most every 10 seconds, so an outage cannot
   * flood the log (nor hide a programming error).
   */
  readonly onError?: ((error: unknown, info: FailureInfo) => void) | undefined;
  /**
   * Which proxies may name the client in a forwarding header; see {@link TrustProxy}.
   * @default 0 (none: the socket's peer address is the client)
   */
  readonly trustProxy?: TrustProxy;
  /**
   * The forwarding header read when `trustProxy` is set. Only this one is read, so a
   * client cannot smuggle an address through the other.
   * @default "x-forwarded-for"
   */
  readonly proxyHeader?: ProxyHeader | undefined;
  /**
   * IPv6 clients are keyed by this many leading bits (1-128).
   * @default 64
   */
  readonly ipv6Prefix?: number | undefined;
}

/** {@link CommonRateLimitOptions} after validation. */
export interface CommonConfig {
  readonly limiter: KeyedConsumer;
  readonly policy: string;
  readonly quotedPolicy: string;
  readonly windowSeconds: number | undefined;
  readonly draft: boolean;
  readonly legacy: boolean;
  readonly failure: FailureMode;
  readonly onError: (error: unknown, info: FailureInfo) => void;
  readonly client: ClientKeyConfig;
  /** The header text with its constant parts precomputed (see {@link HeaderText}). */
  readonly text: HeaderText;
  /** The 429 body text around the retry seconds (see {@link QuotaExceededJson}). */
  readonly quotaJson: QuotaExceededJson;
}

/** Validates an optional function option. */
export function checkFunction<T>(where: string, name: string, value: unknown): T | undefined {
  if (value === undefined || typeof value === "function") return value as T | undefined;
  throw new TypeError(`${where}: ${name} must be a function, got ${describe(value)}`);
}

/** Validates a string option against its allowed values. */
function checkChoice<T extends string>(
  where: string,
  name: string,
  value: unknown,
  choices: readonly T[],
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if ((choices as readonly unknown[]).includes(value)) return value as T;
  const list = choices.map((c) => JSON.stringify(c)).join(", ");
  const error = typeof value === "string" ? RangeError : TypeError;
  throw new error(`${where}: ${name} must be one of ${list}, got ${describe(value)}`);
}

/**
 * Validates the shared options, in the order they are documented.
 * @throws {TypeError} for a missing limiter or a wrong type; {RangeError} for a bad value.
 */
export function checkCommonOptions(where: string, options: unknown): CommonConfig {
  const o = checkOptions<CommonRateLimitOptions>(where, options);
  const limiter = o.limiter as unknown;
  if (
    typeof limiter !== "object" ||
    limiter === null ||
    typeof (limiter as { consume?: unknown }).consume !== "function"
  ) {
    throw new TypeError(
      `${where}: limiter must be an object with a consume(key, cost) method, got ${describe(limiter)}`,
    );
  }
  const policy = o.policy === undefined ? "default" : checkPolicyName(where, o.policy);
  const windowSeconds = checkWindowSeconds(where, o.windowSeconds);
  const headers = checkChoice<HeaderMode>(
    where,
    "headers",
    o.headers,
    ["draft-10", "legacy", "both", "none"],
    "draft-10",
  );
  const failure = checkChoice<FailureMode>(where, "failure", o.failure, ["open", "closed"], "open");
  const onError = checkFunction<CommonConfig["onError"]>(where, "onError", o.onError);
  const client = checkClientKeyOptions(where, o.trustProxy, o.proxyHeader, o.ipv6Prefix);
  const quotedPolicy = sfString(policy);
  return {
    limiter: limiter as KeyedConsumer,
    policy,
    quotedPolicy,
    windowSeconds,
    draft: headers === "draft-10" || headers === "both",
    legacy: headers === "legacy" || headers === "both",
    failure,
    onError: onError ?? defaultOnError(where),
    client,
    text: new HeaderText(quotedPolicy, windowSeconds),
    quotaJson: new QuotaExceededJson(policy),
  };
}

/**
 * A logger that writes at most one line per 10 s for each kind (a token bucket of 1,
 * refilled at 0.1/s, per kind).
 */
function defaultOnError(where: string): CommonConfig["onError"] {
  const logs = {
    outage: { bucket: new TokenBucket({ capacity: 1, refillPerSecond: 0.1 }), suppressed: 0 },
    programming: { bucket: new TokenBucket({ capacity: 1, refillPerSecond: 0.1 }), suppressed: 0 },
  };
  return (error, info) => {
    const log = logs[info.kind];
    if (!log.bucket.allow()) {
      log.suppressed++;
      return;
    }
    const more = log.suppressed > 0 ? ` (${log.suppressed} more since the last report)` : "";
    log.suppressed = 0;
    if (info.kind === "programming") {
      console.error(`${where}: programming error, answered 500${more}:`, error);
    } else {
      const outcome = info.failure === "open" ? "let the request through" : "answered 503";
      console.error(`${where}: the limiter failed, ${outcome}${more}:`, error);
    }
  };
}

/** Tells `onError` about a failure; an `onError` that throws is ignored. */
export function report(
  config: CommonConfig,
  error: unknown,
  key: string | undefined,
  kind: FailureKind,
): void {
  try {
    config.onError(error, { kind, failure: config.failure, key });
  } catch {
    // The hook is for logging; it must not turn an outage into a crash.
  }
}

/**
 * Checks what a `key` hook returned: a string.
 * @throws {TypeError} `rateLimit: key() must return a string, got 42`.
 */
export function checkHookKey(where: string, key: unknown): string {
  if (typeof key === "string") return key;
  throw new TypeError(`${where}: key() must return a string, got ${describe(key)}`);
}

/**
 * Checks what a `cost` hook returned: a finite number >= 0.
 * @throws {TypeError} for a non-number (`"5"`, undefined); {RangeError} for NaN, a negative
 *   or an infinite number: `rateLimit: cost() must return a finite number >= 0, got NaN`.
 */
export function checkHookCost(where: string, cost: unknown): number {
  const range = "a finite number >= 0";
  if (typeof cost !== "number") {
    throw new TypeError(`${where}: cost() must return ${range}, got ${describe(cost)}`);
  }
  if (!(cost >= 0) || cost === Number.POSITIVE_INFINITY) {
    throw new RangeError(`${where}: cost() must return ${range}, got ${describe(cost)}`);
  }
  return cost;
}

/** True for a promise or any thenable. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

/**
 * The headers to send for a decision under `config` (`Retry-After` included on denial,
 * whatever the mode). Throws like `rateLimitHeaders` for a malformed decision.
 */
export function headersFor(config: CommonConfig, decision: Decision): Record<string, string> {
  const n: DecisionNumbers = { limit: 0, remaining: 0, retryAfter: -1, reset: -1 };
  readDecision(decision, n);
  return headersOf(n, config.text, config.draft, config.legacy);
}

/** The names of the List fields, which are appended to rather than replaced (RFC 9651 3.1). */
export const LIST_FIELDS: ReadonlySet<string> = new Set(["RateLimit-Policy", "RateLimit"]);
