import { TokenBucket } from "../algorithms/token-bucket.js";
import { checkNumber, checkOptionNames, checkOptions, describe, mustBe } from "../core/errors.js";
import type { Receipt } from "../core/limiter.js";
import { type Decision, isUnkeyedLimiter, type Limiter } from "../core/limiter.js";
import { checkHook } from "../store/options.js";
import {
  type ClientKeyConfig,
  checkClientKeyOptions,
  type ProxyHeader,
  type TrustProxy,
} from "./client-key.js";
import {
  checkBoolean,
  checkPolicyName,
  checkWallClock,
  checkWindowSeconds,
  type HeaderSettings,
  HeaderText,
  policyWindowSeconds,
  QuotaExceededJson,
  sfString,
} from "./headers.js";

/**
 * Anything that decides per key: a `KeyedLimiter`, a Redis limiter, or your own object.
 * `consume` may answer synchronously or with a promise; it may throw or reject (a store
 * outage), which the middleware handles according to `failure`. A `TypeError` or `RangeError`
 * (thrown or as a rejection), or a `Decision` that `rateLimitHeaders` rejects (a missing or NaN
 * field, a negative `limit` or `resetAfterMs`, a denial with a negative `retryAfterMs`), is a
 * programming error instead: answered 500. The whole `Decision` is needed in every `headers`
 * mode, `"none"` included (a denial still sends `Retry-After`, and `onLimited` receives it).
 */
export interface KeyedConsumer {
  consume(key: string, cost?: number): Decision | PromiseLike<Decision>;
  /**
   * `consume` with a receipt (`KeyedLimiter.charge`): when present, the middleware charges
   * through it, and gives back through `refund(receipt, units)`, so units of a window that
   * has ended are never given back to the next one (docs/semantics.md#refunds).
   */
  charge?(key: string, cost?: number): Receipt | PromiseLike<Receipt>;
  /**
   * Gives back `cost` units of `key`, or `units` through a receipt of {@link charge}: needed
   * by `refundIf` and `refund(request)` (`KeyedLimiter.refund`).
   */
  refund?(key: string, cost: number): unknown;
  /** Blocks `key` for `durationMs`: needed by `blockDurationMs` (`KeyedLimiter.block`). */
  block?(key: string, durationMs: number): unknown;
  /** Milliseconds until the block of `key` ends, 0 when none (`KeyedLimiter.blockedMs`). */
  blockedMs?(key: string): number;
  /**
   * Blocks `key` for `durationMs` unless it is blocked already, resolving with the ms the
   * block in place has left (the Redis limiters' `blockOnce`): used by `blockDurationMs`
   * in place of `blockedMs` and `block` when present.
   */
  blockOnce?(key: string, durationMs: number): unknown;
}

/** Which rate-limit headers to send: the draft-10 fields, the `X-RateLimit-*` ones, both, or none. */
export type HeaderMode = "draft-10" | "legacy" | "both" | "none";
const HEADER_MODES: readonly HeaderMode[] = ["draft-10", "legacy", "both", "none"];

/**
 * What to do with a request when the limiter throws or rejects: `'open'` lets it through
 * (without rate-limit headers), `'closed'` answers 503. Never a 429: an outage is not the
 * client's fault. A programming error (see {@link FailureKind}) is not an outage: it is
 * answered 500 in both modes.
 */
export type FailureMode = "open" | "closed";

/**
 * The two kinds of failure the middleware tells `onError` about:
 * - `'outage'`: the limiter threw or rejected with anything but a `TypeError` or a
 *   `RangeError` (a store that is down, a timeout). Not the client's fault and maybe not
 *   yours: `failure` decides (`'open'` passes, `'closed'` answers 503).
 * - `'programming'`: your code broke the contract, so the request cannot be checked: a hook
 *   (`key`, `cost`, `skip`, `remoteAddress`, `onLimited`) threw, `key` returned a non-string or
 *   `cost` something other than a finite number >= 0, the limiter threw or rejected with a
 *   `TypeError` or `RangeError` (a wrong argument: tollgate's limiters throw nothing else for
 *   bad input; one from another realm, a `vm` context or a worker, counts too, by its name), or
 *   it returned an invalid `Decision`. Always answered `500` (problem+json), whatever `failure`
 *   says: passing it would switch rate limiting off for exactly the requests that trigger the
 *   bug (a `cost` of `NaN`, a `key` hook that throws on a missing body, a limiter that cannot
 *   take a key).
 */
export type FailureKind = "outage" | "programming";

/**
 * How the middleware answered a request whose check failed: `'open'` (passed, an outage
 * under `failure: 'open'`), `'closed'` (503, an outage under `failure: 'closed'`) or
 * `'error'` (500, a programming error). `'open'` and `'closed'` are the words of the store
 * limiters' failure policies and their events (`tollgate/redis`).
 */
export type HttpFailureOutcome = "open" | "closed" | "error";

/**
 * What `onError` is told about a failure, as its second argument. Its `error`, `operation`,
 * `key` and `outcome` have the names and words of a store limiter's `StoreFailureEvent`
 * (`tollgate/redis`), so one handler can read both.
 */
export interface FailureInfo {
  /** The failure (the same as `onError`'s first argument). */
  readonly error: unknown;
  /** The call that failed: the limiter's `consume`. */
  readonly operation: "consume";
  /** How the request was answered (see {@link HttpFailureOutcome}). */
  readonly outcome: HttpFailureOutcome;
  /** Which kind of failure (see {@link FailureKind}). */
  readonly kind: FailureKind;
  /**
   * The configured failure mode. For an `'outage'` it is what happened to the request: let
   * through (`'open'`) or refused with 503 (`'closed'`); a `'programming'` error is a 500.
   */
  readonly failure: FailureMode;
  /** The key being checked, when it was computed before the failure. */
  readonly key: string | undefined;
}

/** Options shared by {@link rateLimit} (node:http, Express) and `withRateLimit` (fetch). */
export interface CommonRateLimitOptions {
  /**
   * Decides each request. Required. Either an object with `consume(key, cost)` (see
   * {@link KeyedConsumer}: a `KeyedLimiter` for per-client limits, a Redis limiter), or one
   * unkeyed tollgate limiter (`TokenBucket`, `LeakyBucket`, `FixedWindow`, `SlidingWindowLog`,
   * `SlidingWindowCounter` or an `allOf` of them, made by any copy of tollgate: the CommonJS
   * build's are recognised by the ESM middleware and the other way round), which is then ONE
   * global limit that every request shares, whatever its key.
   */
  readonly limiter: KeyedConsumer | Limiter;
  /**
   * Policy name in the headers and the 429 body (printable ASCII).
   * @default "default"
   */
  readonly policy?: string | undefined;
  /**
   * The policy's window in whole seconds (an integer >= 1), sent as the `w=` of
   * `RateLimit-Policy`. A limiter with a window (`FixedWindow`, `SlidingWindowLog`,
   * `SlidingWindowCounter`, their Redis counterparts, a `KeyedLimiter` of one of them) states
   * its own, and `windowSeconds` given for it must agree (see `windowSecondsOf`). For a
   * limiter without one (a token or leaky bucket, an `allOf`), it is sent as given.
   * @default the limiter's window (see `windowSecondsOf`); `w=` omitted when it has none
   * @throws {RangeError} at creation when it disagrees with the limiter's window, or the
   *   limiter's window is not a whole number of seconds.
   */
  readonly windowSeconds?: number | undefined;
  /**
   * Which rate-limit headers to send on every checked response. `Retry-After` is sent on a 429
   * in every mode (it is part of the 429, RFC 6585 section 4); in every mode but `"none"` a 429
   * also carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`, the only
   * fields GitHub-style clients (Octokit) read (docs/http.md#headers).
   * @default "draft-10"
   */
  readonly headers?: HeaderMode | undefined;
  /**
   * The wall clock `X-RateLimit-Reset` (a Unix time in whole seconds) is counted on:
   * milliseconds since the Unix epoch. Separate from the limiter's clock (monotonic, with any
   * origin); read once per response with legacy headers, never for the draft-10 fields. A
   * reading that is not a finite number >= 0 (NaN) is a programming error: a 500, never a pass.
   * @default Date.now
   */
  readonly wallClock?: (() => number) | undefined;
  /**
   * What to do when the limiter throws or rejects (see {@link FailureMode}); a
   * programming error is answered 500 whatever this says.
   * @default "open"
   */
  readonly failure?: FailureMode | undefined;
  /**
   * Told of every failure: a limiter outage, or a programming error (see {@link FailureKind};
   * `info.kind` says which), once per failed request, so it can count them. Errors it throws
   * are ignored. The default logs each distinct programming error once (by class and message;
   * see `defaultOnError`) and an outage at most once per 10 seconds, so an outage cannot flood
   * the log nor hide a programming error.
   */
  readonly onError?: ((error: unknown, info: FailureInfo) => void) | undefined;
  /**
   * Which proxies may name the client in a forwarding header; see {@link TrustProxy}.
   * Trust-everything is refused with a `RangeError`: `true`, more than `MAX_TRUSTED_HOPS` (4)
   * hops, or a list whose ranges cover every public IPv4 address or all of `2000::/3`. A hop
   * count is safe only when clients cannot reach the server but through those proxies; prefer
   * a list of the proxies' addresses. When no proxy is trusted and a request carries
   * `X-Forwarded-For` or `Forwarded`, one `console.warn` line is written, once
   * (`UntrustedProxyWarning`).
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
   * IPv6 clients are keyed by this many leading bits (1-128): 56 gives one budget per customer
   * network (a common ISP assignment), where a /64 key would give a /56 customer 256 budgets.
   * @default 56 (`DEFAULT_IPV6_PREFIX`)
   */
  readonly ipv6Prefix?: number | undefined;
  /**
   * Blocks a client for this many milliseconds once it hits its limit (rate-limiter-flexible's
   * `blockDuration`): the denied request and every request of that key until then get 429 with
   * `Retry-After` the block (`KeyedLimiter.block`, docs/keyed.md#blocking); requests during the
   * block do not extend it. Needs a `KeyedLimiter` (a finite number > 0).
   * @default undefined (no block: a limited client may retry once its limit allows)
   * @throws {TypeError} at creation for a limiter without `block(key, durationMs)` (one
   *   unkeyed limiter, whose limit is global).
   */
  readonly blockDurationMs?: number | undefined;
  /**
   * When an admitted request counts as near its limit, for `onNearLimit`: when the decision's
   * `remaining` (whole units left after it) is at most `nearLimitShare * limit` (a share from 0
   * to 1; the same rule and default as `withMetrics`). 0 means "only the request that took the
   * last unit"; 1 means every admitted request, as @fastify/rate-limit's `onExceeding`.
   * @default 0.1
   */
  readonly nearLimitShare?: number | undefined;
}

/** {@link CommonRateLimitOptions} after validation (the header settings as `HeaderSettings`). */
export interface CommonConfig extends HeaderSettings {
  /** The limiter as called: an unkeyed one is wrapped to ignore the key. */
  readonly limiter: KeyedConsumer;
  readonly policy: string;
  /** `nearLimitShare`: an admitted request with `remaining <= nearLimitShare * limit` is near. */
  readonly nearLimitShare: number;
  readonly failure: FailureMode;
  readonly onError: (error: unknown, info: FailureInfo) => void;
  readonly client: ClientKeyConfig;
  /** The 429 body text around the retry seconds (see {@link QuotaExceededJson}). */
  readonly quotaJson: QuotaExceededJson;
  /** `blockDurationMs`, or `undefined` for none. */
  readonly blockDurationMs: number | undefined;
}

/** Checks `nearLimitShare` (default 0.1): a finite number from 0 to 1. */
function checkShare(where: string, value: unknown): number {
  if (value === undefined) return 0.1;
  if (typeof value === "number" && value >= 0 && value <= 1) return value;
  throw mustBe(where, "nearLimitShare", "a finite number from 0 to 1", value);
}

/**
 * Validates `blockDurationMs`: undefined, or a finite number > 0 with a limiter that can block
 * a key (`block(key, durationMs)`); a TypeError for a limiter without it.
 */
function checkBlockDuration(where: string, value: unknown, limiter: unknown): number | undefined {
  if (value === undefined) return undefined;
  const ms = checkNumber(where, "blockDurationMs", value, 0, false);
  if (isUnkeyedLimiter(limiter) || typeof (limiter as KeyedConsumer).block !== "function") {
    throw new TypeError(
      `${where}: blockDurationMs needs a limiter that blocks one client, with block(key, durationMs) (a KeyedLimiter), got ${describe(limiter)}`,
    );
  }
  return ms;
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

/** The names of {@link CommonRateLimitOptions}, in the order they are documented. */
export const COMMON_OPTION_NAMES: readonly string[] = [
  "limiter",
  "policy",
  "windowSeconds",
  "headers",
  "wallClock",
  "failure",
  "onError",
  "trustProxy",
  "proxyHeader",
  "ipv6Prefix",
  "blockDurationMs",
  "nearLimitShare",
];

const LIMIT_HINT =
  "set the limit on the limiter: capacity for TokenBucket/LeakyBucket, limit for FixedWindow/SlidingWindow*";
const FAILURE_HINT =
  'use failure: "open" (the default: pass requests while the limiter fails) or "closed" (answer 503)';
const HEADERS_HINT = 'use headers: "draft-10", "legacy", "both" or "none"';
const WINDOW_HINT =
  "set windowMs on the limiter (FixedWindow/SlidingWindow*) instead, or refillPerSecond on a bucket";

/**
 * What to use instead of the option names of express-rate-limit and @fastify/rate-limit,
 * for the error that refuses them (they would otherwise be ignored silently).
 */
export const PEER_OPTION_HINTS: Readonly<Record<string, string>> = {
  max: LIMIT_HINT,
  limit: LIMIT_HINT,
  windowMs: WINDOW_HINT,
  timeWindow: WINDOW_HINT,
  standardHeaders: HEADERS_HINT,
  legacyHeaders: 'use headers: "legacy" or "both" for X-RateLimit-*',
  keyGenerator: "use key: (request, clientKey) => string",
  skipSuccessfulRequests:
    "use refundIf: (status) => status < 400 (the request's units come back once its response is a success)",
  skipFailedRequests:
    "use refundIf: (status) => status >= 400 (the request's units come back once its response is a failure)",
  message: "use onLimited to answer a limited request with your own body",
  statusCode: "use onLimited to answer a limited request with another status",
  handler: "use onLimited to answer a limited request yourself",
  allowList: "use skip: (request) => boolean",
  store: "pass the store's limiter as limiter (a KeyedLimiter, or a tollgate/redis limiter)",
  redis: "pass a tollgate/redis limiter (RedisTokenBucket, ...) as limiter",
  ipv6Subnet: "use ipv6Prefix (the leading bits an IPv6 client is keyed by, default 56)",
  passOnStoreError: FAILURE_HINT,
  skipOnError: FAILURE_HINT,
  errorResponseBuilder: "use onLimited to answer a limited request with your own body",
  onExceeded: "use onLimited, called for every limited request",
  onExceeding:
    "use onNearLimit: (request, decision, key) => void, called for each admitted request with at most nearLimitShare * limit units left (nearLimitShare: 1 for every admitted request, as onExceeding)",
  identifier: "use policy (the policy name in RateLimit-Policy, RateLimit and the 429 body)",
  nameSpace: "set the key prefix on the store: prefix of a tollgate/redis limiter",
  keyPrefix: "set the key prefix on the store: prefix of a tollgate/redis limiter",
  enableDraftSpec: HEADERS_HINT,
  addHeaders: HEADERS_HINT,
  addHeadersOnExceeding: HEADERS_HINT,
  global:
    "there is no global: false: the middleware covers what it is mounted on; with fastifyRateLimit, turn it off on a route with config: { rateLimit: false }, or register the plugin inside the one whose routes it should cover",
  ban: "use blockDurationMs: a client that hits its limit is blocked for that many milliseconds",
  blockDuration: "use blockDurationMs (milliseconds, not seconds)",
  requestWasSuccessful: "use refundIf: (status, request) => boolean (true gives the units back)",
  validate: "there is nothing to turn off: every option is checked once, when rateLimit is called",
  requestPropertyName:
    "the decision is not put on the request: read it in onLimited, or call the limiter yourself for its Decision",
  hook: "fastifyRateLimit runs in onRequest; for another point, call the limiter in your own hook",
};

/**
 * The one-line example of options shown for a missing `limiter`: with express-rate-limit's or
 * @fastify/rate-limit's `max` and `windowMs`/`timeWindow` (numbers) carried over into the
 * fixed window those libraries count with, else a token bucket.
 */
function limiterExample(where: string, given: Readonly<Record<string, unknown>>): string {
  const number = (value: unknown) => (typeof value === "number" ? value : undefined);
  const max = number(given["max"]) ?? number(given["limit"]);
  const windowMs = number(given["windowMs"]) ?? number(given["timeWindow"]);
  const limiter =
    max !== undefined || windowMs !== undefined
      ? `new KeyedLimiter(new FixedWindow({ limit: ${max ?? 100}, windowMs: ${windowMs ?? 60_000} }))`
      : "new KeyedLimiter(new TokenBucket({ capacity: 100, refillPerSecond: 100 / 60 }))";
  if (where.startsWith("fastifyRateLimit"))
    return `app.register(fastifyRateLimit, { limiter: ${limiter} })`;
  if (where === "withRateLimit") return `withRateLimit(handler, { limiter: ${limiter} })`;
  return `${where}({ limiter: ${limiter} })`;
}

/**
 * Checks the `limiter` option. An unkeyed tollgate limiter (the natural first try of a global
 * limit) becomes one global limit: its `consume(cost)` is called for every request, the key
 * ignored. It is recognised by its brand (`isUnkeyedLimiter`), not `instanceof`, so one made
 * by another copy of tollgate (the CommonJS build, when this is the ESM one) is too.
 * @throws {TypeError} for anything else without a `consume` method.
 */
function checkLimiter(where: string, limiter: unknown): KeyedConsumer {
  if (isUnkeyedLimiter(limiter)) {
    const { refund, charge } = limiter;
    const consume = (_key: string, cost?: number) => limiter.consume(cost);
    if (typeof refund !== "function") return { consume };
    const give = refund as (cost: number | Receipt, units?: number) => number;
    return {
      consume,
      ...(typeof charge === "function"
        ? { charge: (_key: string, cost?: number) => charge.call(limiter, cost) }
        : {}),
      // `(key, cost)`, or `(receipt, units)` for a receipt of `charge`.
      refund: (keyOrReceipt: string | Receipt, units: number) =>
        typeof keyOrReceipt === "string"
          ? give.call(limiter, units)
          : give.call(limiter, keyOrReceipt, units),
    };
  }
  if (
    typeof limiter !== "object" ||
    limiter === null ||
    typeof (limiter as { consume?: unknown }).consume !== "function"
  ) {
    throw new TypeError(
      `${where}: limiter must be a KeyedLimiter (one limit per client), a tollgate limiter such as a TokenBucket (one global limit for all requests) or an object with a consume(key, cost) method, got ${describe(limiter)}`,
    );
  }
  return limiter as KeyedConsumer;
}

/**
 * The hook options an adapter may have (`remoteAddress` only where a runtime gives no peer
 * address on the request); each adapter types them on its own request or context.
 */
export interface AdapterHookOptions {
  readonly key?: unknown;
  readonly cost?: unknown;
  readonly skip?: unknown;
  readonly onLimited?: unknown;
  readonly remoteAddress?: unknown;
  readonly refundIf?: unknown;
  readonly refundAborted?: unknown;
  readonly onNearLimit?: unknown;
}

/** The hook option names of `rateLimit`, `koaRateLimit` and `fastifyRateLimit`, as listed in errors. */
export const HOOK_OPTIONS = [
  "key",
  "cost",
  "skip",
  "onLimited",
  "refundIf",
  "refundAborted",
  "onNearLimit",
] as const;

/** The hook option names of `withRateLimit` and `honoRateLimit`: {@link HOOK_OPTIONS} and `remoteAddress`. */
export const FETCH_HOOK_OPTIONS = [
  ...HOOK_OPTIONS.slice(0, 4),
  "remoteAddress",
  ...HOOK_OPTIONS.slice(4),
];

/**
 * Validates an adapter's options once, when the middleware is created: the shared ones in the
 * order they are documented, no names but those and `own` (the adapter's), then its hooks.
 * `unit` is the quota unit `RateLimit-Policy` states (`qu`), if any. Returns the config, the
 * `Pipeline`'s hooks, `onLimited`, and `remoteAddress`, `refundIf` and `refundAborted`
 * (`undefined`, or false, unless `own` names them).
 * @throws {TypeError} for a missing limiter, a wrong type, an unknown option name or a hook
 *   that is not a function (`withRateLimit: key must be a function, got "ip"`);
 *   {RangeError} for a bad value of a shared option.
 */
export function checkAdapterOptions<O extends AdapterHookOptions>(
  where: string,
  options: O,
  own: readonly string[],
  unit?: string,
) {
  const required = {
    names: ["limiter"],
    example: (given: Readonly<Record<string, unknown>>) => limiterExample(where, given),
  };
  const o = checkOptions<CommonRateLimitOptions>(where, options, required);
  checkOptionNames(where, o, [...COMMON_OPTION_NAMES, ...own], PEER_OPTION_HINTS, required);
  const limiter = checkLimiter(where, o.limiter);
  const policy = o.policy === undefined ? "default" : checkPolicyName(where, o.policy);
  const declared = checkWindowSeconds(where, o.windowSeconds);
  const windowSeconds = policyWindowSeconds(where, o.limiter, declared);
  const headers = checkChoice<HeaderMode>(where, "headers", o.headers, HEADER_MODES, "draft-10");
  const wallClock = checkWallClock(where, o.wallClock);
  const failure = checkChoice<FailureMode>(where, "failure", o.failure, ["open", "closed"], "open");
  const onError = checkHook<CommonConfig["onError"]>(where, "onError", o.onError);
  const client = checkClientKeyOptions(where, o.trustProxy, o.proxyHeader, o.ipv6Prefix);
  const nearLimitShare = checkShare(where, o.nearLimitShare);
  const blockDurationMs = checkBlockDuration(where, o.blockDurationMs, o.limiter);
  const config: CommonConfig = {
    limiter,
    policy,
    windowSeconds,
    source: o.limiter,
    nearLimitShare,
    draft: headers === "draft-10" || headers === "both",
    legacy: headers === "legacy" || headers === "both",
    failure,
    onError: onError ?? defaultOnError(where),
    client,
    text: new HeaderText(sfString(policy), wallClock, unit),
    quotaJson: new QuotaExceededJson(policy),
    blockDurationMs,
  };
  const remoteAddress = own.includes("remoteAddress")
    ? checkHook<O["remoteAddress"]>(where, "remoteAddress", options.remoteAddress)
    : undefined;
  const hooks = {
    key: checkHook<O["key"]>(where, "key", options.key),
    cost: checkHook<O["cost"]>(where, "cost", options.cost),
    skip: checkHook<O["skip"]>(where, "skip", options.skip),
    onNearLimit: checkHook<O["onNearLimit"]>(where, "onNearLimit", options.onNearLimit),
  };
  const onLimited = checkHook<O["onLimited"]>(where, "onLimited", options.onLimited);
  const refundIf = own.includes("refundIf")
    ? checkHook<O["refundIf"]>(where, "refundIf", options.refundIf)
    : undefined;
  const refundAborted =
    own.includes("refundAborted") &&
    checkBoolean(where, "refundAborted", options.refundAborted, false);
  return { config, hooks, onLimited, remoteAddress, refundIf, refundAborted };
}

/** How many distinct programming errors the default `onError` remembers having logged. */
export const MAX_REMEMBERED_ERRORS = 64;

/**
 * The default `onError`. A programming error is logged once per distinct error (its class and
 * message: the same bug on every request is one line, a second bug still shows); after
 * {@link MAX_REMEMBERED_ERRORS} distinct ones it falls back to one line per 10 s, so memory
 * stays bounded. An outage is logged at most once per 10 s (a token bucket of 1 refilled at
 * 0.1/s), with the count of those it left out.
 */
export function defaultOnError(where: string): CommonConfig["onError"] {
  const outages = new TokenBucket({ capacity: 1, refillPerSecond: 0.1 });
  const unremembered = new TokenBucket({ capacity: 1, refillPerSecond: 0.1 });
  let suppressed = 0; // outages not logged since the last one that was
  const seen = new Set<string>();
  return (error, info) => {
    if (info.kind === "programming") {
      const signature = errorSignature(error);
      if (seen.has(signature)) return;
      if (seen.size < MAX_REMEMBERED_ERRORS) seen.add(signature);
      else if (!unremembered.allow()) return;
      console.error(`${where}: programming error, answered 500:`, error);
      return;
    }
    if (!outages.allow()) {
      suppressed++;
      return;
    }
    const more = suppressed > 0 ? ` (${suppressed} more since the last report)` : "";
    suppressed = 0;
    const outcome = info.failure === "open" ? "let the request through" : "answered 503";
    console.error(`${where}: the limiter failed, ${outcome}${more}:`, error);
  };
}

/** What makes two errors "the same" for the log: class name and message (cut at 200 chars). */
function errorSignature(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message.slice(0, 200)}`;
  return `thrown ${typeof error}: ${String(error).slice(0, 200)}`;
}

/** Tells `onError` about a failure; an `onError` that throws is ignored. */
export function report(
  config: CommonConfig,
  error: unknown,
  key: string | undefined,
  kind: FailureKind,
): void {
  try {
    const failure = config.failure;
    const outcome: HttpFailureOutcome = kind === "programming" ? "error" : failure;
    config.onError(error, { error, operation: "consume", outcome, kind, failure, key });
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
  if (typeof cost === "number" && cost >= 0 && cost !== Number.POSITIVE_INFINITY) return cost;
  throw new (typeof cost === "number" ? RangeError : TypeError)(
    `${where}: cost() must return a finite number >= 0, got ${describe(cost)}`,
  );
}

/** True for a promise or any thenable. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
