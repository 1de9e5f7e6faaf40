import { checkInteger, checkOptionNames, describe, mustBe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { TOLERANCE } from "../core/numeric.js";
import { optionNames } from "../core/option-names.js";
import { keyedPolicyOf } from "../keyed/keyed-limiter.js";

/**
 * The largest Integer a Structured Field can carry (RFC 9651 section 3.3.1: at most 15
 * digits). Counts and seconds above it are written as this value (about 31.7 million years).
 */
export const MAX_SF_INTEGER = 999_999_999_999_999;

/** The problem type of draft-ietf-httpapi-ratelimit-headers-10 and -11, section 5.1. */
export const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** Options of {@link rateLimitHeaders}. */
export interface RateLimitHeadersOptions {
  /**
   * Name of the quota policy, sent as a Structured Field String: printable ASCII
   * (0x20-0x7E), at least one character; `"` and `\` are escaped.
   */
  readonly policy: string;
  /**
   * The policy's time window in whole seconds (an integer >= 1), sent as
   * `RateLimit-Policy: ...;w=<windowSeconds>`; omitted when undefined (`w` is optional).
   * When `limiter` has a window of its own, that one is sent and this must agree with it.
   */
  readonly windowSeconds?: number | undefined;
  /**
   * The limiter that made `decision` (a `KeyedLimiter`, one tollgate limiter, a Redis
   * limiter), read now for what the decision alone does not say: its live window (the
   * `w=`) and a bucket's rate (so that `t` is the time to the next unit, not to a full
   * bucket). Without it, `w` is `windowSeconds` and a bucket's `t` the time until full.
   */
  readonly limiter?: unknown;
  /**
   * Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` on an
   * allowed decision (a denial that can pass later always carries them, for GitHub-style
   * clients). `X-RateLimit-Reset` is the Unix time in whole seconds of the moment `t`
   * stands for, rounded once, down (see {@link resetEpochSeconds}).
   * @default false
   */
  readonly legacy?: boolean | undefined;
  /**
   * The wall clock `X-RateLimit-Reset` is counted on: milliseconds since the Unix epoch.
   * Separate from a limiter's clock (monotonic, any origin); inject it in tests.
   * @default Date.now
   */
  readonly wallClock?: (() => number) | undefined;
  /**
   * Send the draft-10 `RateLimit-Policy` and `RateLimit` fields.
   * @default true
   */
  readonly draft?: boolean | undefined;
}

/**
 * Whole seconds from a duration in milliseconds, rounded up, so that a client waiting that
 * long is never early; a duration within a relative 1e-9 of a whole second counts as that
 * second, so float noise never adds one (1000.0000000000031 ms gives 1, not 2).
 * 0 and negative durations give 0; the result is at most {@link MAX_SF_INTEGER}.
 * @throws {RangeError} for NaN or `Infinity` (callers decide what "never" means).
 */
export function ceilSeconds(ms: number): number {
  if (!(ms > 0)) {
    if (Number.isNaN(ms)) throw new RangeError(`ceilSeconds: ms must not be NaN, got NaN`);
    return 0;
  }
  if (ms === Number.POSITIVE_INFINITY) {
    throw new RangeError(`ceilSeconds: ms must be finite, got Infinity`);
  }
  const seconds = ms / 1000;
  const nearest = Math.round(seconds);
  const whole =
    Math.abs(seconds - nearest) <= TOLERANCE * (seconds > 1 ? seconds : 1)
      ? nearest
      : Math.ceil(seconds);
  return whole < MAX_SF_INTEGER ? whole : MAX_SF_INTEGER;
}

/**
 * Checks that `value` can be sent as a Structured Field String (RFC 9651 section 3.3.3):
 * printable ASCII only. Returns it.
 * @throws {TypeError} for a non-string; {RangeError} for an empty or non-ASCII string.
 */
export function checkPolicyName(where: string, value: unknown): string {
  if (typeof value === "string" && /^[\x20-\x7e]+$/.test(value)) return value;
  throw new (typeof value === "string" ? RangeError : TypeError)(
    `${where}: policy must be a non-empty string of printable ASCII (0x20-0x7E), got ${describe(value)}`,
  );
}

/**
 * Checks an optional `windowSeconds`: an integer from 1 to {@link MAX_SF_INTEGER}
 * (draft-10 and draft-11 section 3.1.3: "non-negative, non-zero, Integer").
 */
export function checkWindowSeconds(where: string, value: unknown): number | undefined {
  return value === undefined
    ? undefined
    : checkInteger(where, "windowSeconds", value, 1, MAX_SF_INTEGER);
}

/**
 * The window, in milliseconds, of a limiter that has one (a finite `windowMs` > 0 on the object
 * {@link describing} finds). `undefined` for a token or leaky bucket, an `allOf` (several
 * windows), and a `KeyedLimiter` built from a function (its keys may differ).
 */
export function limiterWindowMs(limiter: unknown): number | undefined {
  return positive((describing(limiter) as { windowMs?: unknown } | undefined)?.windowMs);
}

/**
 * The rate, in units per second, at which a bucket gives units back: a finite `refillPerSecond`
 * (or `leakPerSecond`) > 0 on the object {@link describing} found. `undefined` for the windows,
 * an `allOf`, a function-built `KeyedLimiter`, and a bucket that never refills (rate 0). Read
 * per response, so a `reconfigure` shows at once.
 */
export function shapeRatePerSecond(shape: object | undefined): number | undefined {
  const s = shape as { refillPerSecond?: unknown; leakPerSecond?: unknown } | undefined;
  return positive(s?.refillPerSecond ?? s?.leakPerSecond);
}

/**
 * The object that states a limiter's window or rate: the limiter itself when it has a
 * `windowMs`, `refillPerSecond` or `leakPerSecond` (one tollgate limiter, a Redis one, a
 * `withMetrics` wrapper), else the policy a `KeyedLimiter` copies (which `reconfigure`
 * replaces, so it is looked up each time).
 */
export function describing(limiter: unknown): object | undefined {
  if (typeof limiter !== "object" || limiter === null) return undefined;
  const own = limiter as { windowMs?: unknown; refillPerSecond?: unknown; leakPerSecond?: unknown };
  if (
    own.windowMs !== undefined ||
    own.refillPerSecond !== undefined ||
    own.leakPerSecond !== undefined
  ) {
    return own;
  }
  return keyedPolicyOf(limiter);
}

/** `value` when it is a finite number > 0, else `undefined`. */
function positive(value: unknown): number | undefined {
  return typeof value === "number" && value > 0 && value < Number.POSITIVE_INFINITY
    ? value
    : undefined;
}

/**
 * The `w=` of `RateLimit-Policy` a limiter states by itself: its window ({@link limiterWindowMs})
 * in whole seconds, 1 to {@link MAX_SF_INTEGER} (within a relative 1e-9). `undefined` without a
 * window, or for one that is not whole seconds (500 ms, 1.5 s): `w` is an Integer (draft-10
 * section 3.1.3), and a rounded one would misstate the rate (`q=10;w=1` for 10 per 1.5 s).
 */
export function windowSecondsOf(limiter: unknown): number | undefined {
  return shapeWindowSeconds(describing(limiter), undefined);
}

/**
 * The `w=` sent for a response now: the window of `shape` ({@link describing}) as
 * {@link windowSecondsOf} (live: a `reconfigure({ windowMs })` shows in the next response), else
 * `declared` (`windowSeconds`, for a bucket or an `allOf`).
 */
export function shapeWindowSeconds(
  shape: object | undefined,
  declared: number | undefined,
): number | undefined {
  const windowMs = positive((shape as { windowMs?: unknown } | undefined)?.windowMs);
  return windowMs === undefined ? declared : wholeWindowSeconds(windowMs);
}

/** `windowMs` in whole seconds, 1 to the SF maximum (within 1e-9), else `undefined`. */
function wholeWindowSeconds(windowMs: number): number | undefined {
  const seconds = windowMs / 1000;
  const whole = Math.round(seconds);
  if (whole < 1 || whole > MAX_SF_INTEGER) return undefined;
  return Math.abs(seconds - whole) <= TOLERANCE * seconds ? whole : undefined;
}

/**
 * The `w=` a middleware sends: `windowSeconds` (already checked by {@link checkWindowSeconds})
 * when given, else {@link windowSecondsOf} the limiter. When both exist they must agree, so the
 * header cannot state a window the limiter does not enforce.
 * @throws {RangeError} If `windowSeconds` is given and the limiter's window is another
 *   (`rateLimit: windowSeconds is 60 but the limiter's window is 30 s (windowMs 30000)`),
 *   or is not whole seconds, so no `w` can state it.
 */
export function policyWindowSeconds(
  where: string,
  limiter: unknown,
  windowSeconds: number | undefined,
): number | undefined {
  const derived = windowSecondsOf(limiter);
  if (windowSeconds === undefined || windowSeconds === derived) return derived ?? windowSeconds;
  const windowMs = limiterWindowMs(limiter);
  if (windowMs === undefined) return windowSeconds; // a bucket, a function policy: nothing to check
  // The same number twice: one of them was given in the other's unit. Say both ways out
  // (windowSeconds in milliseconds, or windowMs in seconds).
  const fix = derived === undefined ? "" : `windowSeconds: ${derived} states its ${derived} s, or `;
  const units =
    windowMs === windowSeconds
      ? `. windowMs is in milliseconds, windowSeconds in seconds: ${fix}windowMs: ${windowSeconds * 1000} makes the limiter's window ${windowSeconds} s`
      : "";
  throw new RangeError(
    (derived === undefined
      ? `${where}: windowSeconds is ${windowSeconds} but the limiter's window (windowMs ${windowMs}) is not a whole number of seconds, so no w= can state it; leave windowSeconds out (w= is then omitted)`
      : `${where}: windowSeconds is ${windowSeconds} but the limiter's window is ${derived} s (windowMs ${windowMs}); leave windowSeconds out to send the limiter's own`) +
      units,
  );
}

/**
 * Checks an optional `wallClock` option: a function (milliseconds since the Unix epoch).
 * Returns it, or `Date.now` when undefined.
 * @throws {TypeError} for anything but a function.
 */
export function checkWallClock(where: string, value: unknown): () => number {
  if (value === undefined) return Date.now;
  if (typeof value === "function") return value as () => number;
  throw new TypeError(
    `${where}: wallClock must be a function returning milliseconds since the Unix epoch, got ${describe(value)}`,
  );
}

/**
 * The value of `X-RateLimit-Reset`: the Unix time, in whole seconds, of the moment `resetMs`
 * (the unrounded time `t` stands for: when the request can pass, or more quota comes) after
 * the wall-clock reading `nowMs`, rounded once, down: `floor((nowMs + resetMs) / 1000)`, the
 * Unix second in which that moment falls. Down, because the clients that read it add a second
 * of their own: GitHub's documentation says to retry "after" it, and Octokit's throttling
 * plugin waits `ceil((reset * 1000 - now) / 1000) + 1` seconds, which lands after the moment
 * and at most a second after `Retry-After` (rounded up: up to two seconds more).
 * At most {@link MAX_SF_INTEGER}.
 * @throws {RangeError} If `nowMs` is not a finite number >= 0 (a broken `wallClock`).
 */
export function resetEpochSeconds(nowMs: number, resetMs: number): number {
  if (!(nowMs >= 0 && nowMs < Number.POSITIVE_INFINITY)) {
    throw new RangeError(
      `rateLimitHeaders: wallClock must return a finite number of milliseconds since the Unix epoch >= 0, got ${describe(nowMs)}`,
    );
  }
  const epoch = Math.floor((nowMs + resetMs) / 1000);
  return epoch < MAX_SF_INTEGER ? epoch : MAX_SF_INTEGER;
}

/** A Structured Field String: `"` + text with `\` and `"` escaped + `"`. */
export function sfString(text: string): string {
  return `"${text.replace(/[\\"]/g, "\\$&")}"`;
}

/** A count as a Structured Field Integer: floor (with the 1e-9 tolerance), 0 to the max. */
function sfCount(value: number): number {
  const whole = Math.floor(value + TOLERANCE);
  return whole <= 0 ? 0 : whole < MAX_SF_INTEGER ? whole : MAX_SF_INTEGER;
}

/** Checks one numeric Decision field: a number, not NaN (`Infinity` is capped by the caller). */
function checkField(name: string, value: unknown): number {
  if (typeof value === "number" && !Number.isNaN(value)) return value;
  throw mustBe(WHERE, `decision.${name}`, "a number", value);
}

/**
 * Checks a Decision field that cannot be negative (`limit`, `resetAfterMs`, a denial's
 * `retryAfterMs`): a number >= 0 or `Infinity`. A negative one is a broken limiter, not a
 * value to round to 0 (`q=0` would tell clients the quota is empty; `t=0` that it is fresh).
 */
function checkNonNegative(name: string, value: unknown, when = ""): number {
  const ms = checkField(name, value);
  if (ms < 0) throw mustBe(WHERE, `decision.${name}`, `a number >= 0 or Infinity${when}`, ms);
  return ms;
}

/**
 * The unrounded ms of `t`: until more quota comes (draft-10 section 4.1.2), the effective
 * window within which to use no more than `r` (draft-11 section 4.1.2). `Infinity` for none:
 * - a denial that can pass later: `retryAfterMs`, as `Retry-After` (section 6 of both);
 * - a bucket below capacity (`ratePerSecond` its refill or leak rate): the time to its next
 *   whole unit, `resetAfterMs - (limit - remaining - 1) * 1000 / ratePerSecond` (it holds
 *   `limit - resetAfterMs * rate / 1000` now); until full when less than a unit is missing;
 * - else `resetAfterMs`: a fixed window's end, a sliding window's time until empty (an upper
 *   bound: a client under-uses, never over-uses), the time until fresh for an `allOf` or an
 *   unknown rate; `Infinity` for a quota that never refills (no `t`, as the draft's example
 *   "that has no time window reset"). docs/http.md#headers.
 */
export function resetMsOf(decision: Decision, ratePerSecond: number | undefined): number {
  if (!decision.allowed && decision.retryAfterMs < Number.POSITIVE_INFINITY) {
    return decision.retryAfterMs;
  }
  const reset = decision.resetAfterMs;
  if (ratePerSecond === undefined || !(reset > 0) || reset === Number.POSITIVE_INFINITY) {
    return reset;
  }
  const missing = decision.limit - decision.remaining - 1; // whole units beyond the next
  if (!(missing >= 0)) return reset;
  const next = reset - (missing * 1000) / ratePerSecond;
  return next > 0 && next <= reset ? next : reset;
}

/**
 * The status of a refusal: 429 when the request can pass later; when it never can at its cost
 * (`retryAfterMs: Infinity`), a status no retrying client repeats: 413 (Content Too Large) when
 * the cost is above the limit, 403 (Forbidden) when the quota is spent and never comes back (a
 * rate of 0). A 429 without `Retry-After` is retried by ky, got, undici's `RetryAgent` and
 * axios-retry anyway (axios-retry at once, 13 times in 3 s); none of them retries a 403 or a
 * 413 that has no `Retry-After` (docs/http.md#what-http-clients-do-with-these-answers). A
 * closed limiter's denial (`source: 'stopped'`, a `LeasedTokenBucket` after `close()`) is 503:
 * it says nothing of the client's quota, as the middleware answers it.
 */
export function refusalStatus(decision: Decision, cost: number): 429 | 403 | 413 | 503 {
  if ((decision as { source?: unknown }).source === "stopped" && !decision.allowed) return 503;
  if (decision.allowed || decision.retryAfterMs < Number.POSITIVE_INFINITY) return 429;
  return cost > decision.limit + TOLERANCE * (cost > 1 ? cost : 1) ? 413 : 403;
}

/**
 * The value of `Retry-After` (delay-seconds, RFC 9110 section 10.2.3) for a denied decision:
 * `ceil(retryAfterMs / 1000)` as {@link ceilSeconds}, at least 1 (a client told 0 would retry
 * at once); `undefined` when allowed or the retry is `Infinity` (do not invite a retry).
 * @throws {TypeError} If a denial's `retryAfterMs` is not a number.
 * @throws {RangeError} If a denial's `retryAfterMs` is NaN or negative: invalid limiter
 *   output, which the middleware answers with 500 (`kind: 'programming'`).
 */
export function retryAfterSeconds(decision: Decision): number | undefined {
  if (decision.allowed) return undefined;
  // A denial that says "retry 100 ms ago" is a broken limiter, not a reason to send 1.
  const ms = checkNonNegative("retryAfterMs", decision.retryAfterMs, " on a denial");
  if (ms === Number.POSITIVE_INFINITY) return undefined;
  const seconds = ceilSeconds(ms);
  return seconds < 1 ? 1 : seconds;
}

/**
 * The rate-limit headers for one {@link Decision}: `RateLimit-Policy` and `RateLimit` of
 * draft-10 and draft-11 (the same rules; no `pk`, section 6.1), `Retry-After` on a denial that
 * can pass later, and the `X-RateLimit-*` trio with `legacy` or on such a denial. Numbers are
 * whole and clamped (`r` to `[0, limit]`, all to {@link MAX_SF_INTEGER}); a denial's status is
 * {@link refusalStatus}: docs/http.md#headers.
 * @example
 * const allowed = { allowed: true, limit: 10, remaining: 7, retryAfterMs: 0, resetAfterMs: 2500 }
 * rateLimitHeaders(allowed, { policy: "default", windowSeconds: 60 })
 * //=> { "RateLimit-Policy": '"default";q=10;w=60', RateLimit: '"default";r=7;t=3' }
 * @throws {TypeError} If `decision` lacks a boolean `allowed` or a number field, or an option
 *   is unknown or of the wrong type.
 * @throws {RangeError} If a field is NaN, `limit`/`resetAfterMs` or a denial's `retryAfterMs`
 *   is negative, or an option is out of range ({@link RateLimitHeadersOptions}).
 */
export function rateLimitHeaders(
  decision: Decision,
  options: RateLimitHeadersOptions,
): Record<string, string> {
  if (typeof options !== "object" || options === null) {
    throw mustBe(WHERE, "options", "an object", options, TypeError);
  }
  checkOptionNames(WHERE, options, HEADERS_OPTIONS, HEADERS_HINTS);
  const policy = checkPolicyName(WHERE, options.policy);
  const windowSeconds = checkWindowSeconds(WHERE, options.windowSeconds);
  const legacy = checkBoolean(WHERE, "legacy", options.legacy, false);
  const wallClock = checkWallClock(WHERE, options.wallClock);
  const draft = checkBoolean(WHERE, "draft", options.draft, true);
  const limiter = options.limiter;
  const declared =
    limiter === undefined ? windowSeconds : policyWindowSeconds(WHERE, limiter, windowSeconds);
  const text = new HeaderText(sfString(policy), wallClock);
  const settings = { draft, legacy, text, source: limiter, windowSeconds: declared };
  const n = new HeaderNumbers();
  readDecision(decision, n, settings);
  const headers: Record<string, string> = {};
  writeHeaders(settings, n, headers, setRecord);
  return headers;
}

const WHERE = "rateLimitHeaders";

/** The option names of {@link RateLimitHeadersOptions}, checked by {@link rateLimitHeaders}. */
const HEADERS_OPTIONS = optionNames<RateLimitHeadersOptions>()([
  "policy",
  "windowSeconds",
  "limiter",
  "legacy",
  "wallClock",
  "draft",
]);

const WHICH_HEADERS =
  'use legacy: true for X-RateLimit-*, draft: false to leave out RateLimit-Policy and RateLimit ("headers" is the middleware\'s option)';
/** Hints for the middleware's and peers' names given to {@link rateLimitHeaders}. */
const HEADERS_HINTS: Readonly<Record<string, string>> = {
  headers: WHICH_HEADERS,
  standardHeaders: WHICH_HEADERS,
  legacyHeaders: WHICH_HEADERS,
  windowMs: 'use "windowSeconds" (whole seconds, the w= of RateLimit-Policy)',
  window: 'use "windowSeconds" (whole seconds, the w= of RateLimit-Policy)',
  name: 'use "policy" (the policy name)',
};

/**
 * Checks an optional boolean option (of {@link rateLimitHeaders}, `refundAborted`): `true`,
 * `false` or undefined (`fallback`), so `"yes"` or `0` cannot silently read as either.
 * @throws {TypeError} `rateLimitHeaders: legacy must be a boolean, got "yes" (string)`.
 */
export function checkBoolean(
  where: string,
  name: string,
  value: unknown,
  fallback: boolean,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value === "boolean") return value;
  throw mustBe(where, name, "a boolean", value, TypeError);
}

/**
 * The numbers of one response's headers: a checked {@link Decision}'s, filled in place by
 * {@link readDecision} so the per-request path allocates nothing (the pipeline's `Outcome`
 * is one), the `w=` of `RateLimit-Policy` and the `X-RateLimit-Reset` text.
 */
export class HeaderNumbers {
  /** Whole `limit` (`q`), 0 to {@link MAX_SF_INTEGER}. */
  limit = 0;
  /** Whole `remaining` clamped to `[0, limit]` (`r`). */
  remaining = 0;
  /** `Retry-After` seconds (>= 1), or -1 when none is sent (allowed, or never). */
  retryAfter = -1;
  /** Reset seconds (`t`), or -1 when left out (`Infinity`). */
  reset = -1;
  /** The unrounded ms `t` stands for ({@link resetMsOf}); `Infinity` when `t` is left out. */
  resetMs = Number.POSITIVE_INFINITY;
  /** True for a denial that can never pass at its cost (`retryAfterMs: Infinity`). */
  never = false;
  /** The `w=` of `RateLimit-Policy`, read from the limiter with the decision; none when undefined. */
  windowSeconds: number | undefined = undefined;
  /** The `X-RateLimit-Reset` text (a Unix time), or `""` when it is not sent. */
  resetText = "";
}

/**
 * Checks `decision` and writes its header numbers into `out` (rules: {@link rateLimitHeaders}),
 * with the `w=` and a bucket's rate read now on `config.source` and the `X-RateLimit-Reset`
 * text when it is sent. Throws as {@link rateLimitHeaders} does.
 */
export function readDecision(decision: Decision, out: HeaderNumbers, config: HeaderSettings): void {
  if (typeof decision !== "object" || decision === null || typeof decision.allowed !== "boolean") {
    throw mustBe(WHERE, "decision", "an object with a boolean allowed", decision, TypeError);
  }
  const shape = describing(config.source);
  const limit = sfCount(checkNonNegative("limit", decision.limit));
  const left = sfCount(checkField("remaining", decision.remaining));
  checkNonNegative("resetAfterMs", decision.resetAfterMs);
  const retryAfter = retryAfterSeconds(decision);
  const resetMs = resetMsOf(decision, shapeRatePerSecond(shape));
  out.limit = limit;
  out.remaining = left < limit ? left : limit; // more left than the quota is not possible
  out.retryAfter = retryAfter === undefined ? -1 : retryAfter;
  // On a denial, t is the Retry-After value itself (at least 1), so the two always agree.
  out.reset =
    retryAfter !== undefined
      ? retryAfter
      : resetMs === Number.POSITIVE_INFINITY
        ? -1
        : ceilSeconds(resetMs);
  out.resetMs = resetMs;
  out.never = !decision.allowed && retryAfter === undefined;
  out.windowSeconds = shapeWindowSeconds(shape, config.windowSeconds);
  if (out.reset >= 0 && legacyWanted(out, config.draft, config.legacy)) {
    out.resetText = config.text.resetEpoch(resetMs);
  }
}

/**
 * Decimal text of a whole number from 0 to {@link MAX_SF_INTEGER}, as `String(value)`: from
 * 2^30 up (not a small integer to V8; usual for an "effectively unlimited" quota) two
 * small-integer conversions, the high digits and the low eight padded by adding 1e8, cost
 * about half the generic 0.14 µs.
 */
export function wholeText(value: number): string {
  if (value < 1_073_741_824) return String(value);
  const high = Math.floor(value / 100_000_000);
  return String(high) + String(value - high * 100_000_000 + 100_000_000).slice(1);
}

/**
 * The header text of one middleware, with its constant parts joined once at construction:
 * `"<policy>";q=` for `RateLimit-Policy` (whose whole value is also kept for the last `limit`
 * and window seen: they rarely change), `"<policy>";r=` for `RateLimit` (its last value kept
 * too), and the last `X-RateLimit-Reset` text (a Unix time: it changes once a second for a
 * steady `t`). Produces exactly the strings of {@link rateLimitHeaders}; with a quota `unit`,
 * `RateLimit-Policy` ends in `;qu="<unit>"` (the concurrency middlewares').
 */
export class HeaderText {
  /** @internal */
  private readonly policyHead: string;
  /** @internal */
  private readonly rateHead: string;
  /** @internal `;qu="<unit>"`, or "" */
  private readonly policyTail: string;
  /** @internal */
  private readonly wallClock: () => number;
  /** @internal */
  private lastLimit = -1;
  /** @internal -2: none seen yet (undefined is a valid window: no w=) */
  private lastWindow: number | undefined = -2;
  /** @internal */
  private lastPolicy = "";
  /** @internal */
  private lastRemaining = -1;
  /** @internal */
  private lastReset = -2; // -1 is a valid reset ("none")
  /** @internal */
  private lastRate = "";
  /** @internal */
  private lastEpoch = -1;
  /** @internal */
  private lastEpochText = "";

  /**
   * `quotedPolicy` is the SF String of a checked name; `wallClock` reads milliseconds since
   * the Unix epoch, for `X-RateLimit-Reset`; `unit` is the quota unit (`qu`), if any.
   */
  constructor(quotedPolicy: string, wallClock: () => number = Date.now, unit?: string) {
    this.policyHead = `${quotedPolicy};q=`;
    this.rateHead = `${quotedPolicy};r=`;
    this.policyTail = unit === undefined ? "" : `;qu=${sfString(unit)}`;
    this.wallClock = wallClock;
  }

  /**
   * The `X-RateLimit-Reset` value for a moment `resetMs` (>= 0, finite) from now: the Unix
   * time of {@link resetEpochSeconds}, read on the wall clock now. The last text is kept.
   * @throws {RangeError} If the wall clock reads anything but a finite number >= 0.
   */
  resetEpoch(resetMs: number): string {
    const epoch = resetEpochSeconds(this.wallClock(), resetMs);
    if (epoch !== this.lastEpoch) {
      this.lastEpochText = wholeText(epoch);
      this.lastEpoch = epoch;
    }
    return this.lastEpochText;
  }

  /** The `RateLimit-Policy` value for a whole `limit` and a window (`w=`; none when undefined). */
  policy(limit: number, windowSeconds: number | undefined): string {
    if (limit !== this.lastLimit || windowSeconds !== this.lastWindow) {
      const head = this.policyHead + wholeText(limit);
      this.lastPolicy =
        (windowSeconds === undefined ? head : `${head};w=${wholeText(windowSeconds)}`) +
        this.policyTail;
      this.lastLimit = limit;
      this.lastWindow = windowSeconds;
    }
    return this.lastPolicy;
  }

  /**
   * The `RateLimit` value; `reset` -1 leaves `t` out. The last value is kept: every client well
   * under its limit gets the same `r` and `t` (a full bucket less one), so most reuse it.
   */
  rate(remaining: number, reset: number): string {
    if (remaining !== this.lastRemaining || reset !== this.lastReset) {
      const head = this.rateHead + wholeText(remaining);
      this.lastRate = reset < 0 ? head : `${head};t=${wholeText(reset)}`;
      this.lastRemaining = remaining;
      this.lastReset = reset;
    }
    return this.lastRate;
  }
}

/**
 * Whether the `X-RateLimit-*` fields go on this response: with `legacy` on every one, and
 * in every mode with the draft fields on a denial that can pass later (`Retry-After` set),
 * because GitHub-style clients (Octokit's throttling plugin) read nothing else: without
 * `X-RateLimit-Remaining: 0` they do not retry at all.
 */
export function legacyWanted(n: HeaderNumbers, draft: boolean, legacy: boolean): boolean {
  return legacy || (draft && n.retryAfter >= 0);
}

/** What {@link readDecision} and {@link writeHeaders} read of a middleware's `CommonConfig`. */
export interface HeaderSettings {
  readonly draft: boolean;
  readonly legacy: boolean;
  /** The header text with its constant parts precomputed (see {@link HeaderText}). */
  readonly text: HeaderText;
  /**
   * The limiter as the user gave it, read per response for its live window and a bucket's
   * rate ({@link describing}): a wrapped unkeyed limiter no longer shows them.
   */
  readonly source: unknown;
  /** The `w=` sent when the limiter has no live window (see {@link policyWindowSeconds}). */
  readonly windowSeconds: number | undefined;
}

/** Sets one header on an adapter's response; `list` marks a List field (append, not replace). */
export type SetHeader<Target> = (
  target: Target,
  name: string,
  value: string,
  list: boolean,
) => void;

/**
 * Writes the rate-limit headers of checked numbers, in the order of `rateLimitHeaders`:
 * `RateLimit-Policy`, `RateLimit`, `X-RateLimit-*` ({@link legacyWanted}), `Retry-After`, from
 * the precomputed parts of `settings.text`. A denial that can never pass carries neither
 * `X-RateLimit-Remaining` nor `X-RateLimit-Reset`: GitHub-style clients take
 * `X-RateLimit-Remaining: 0` as "wait for the reset, then retry", and ky retries a 413 at
 * `X-RateLimit-Reset`.
 */
export function writeHeaders<Target>(
  settings: HeaderSettings,
  n: HeaderNumbers,
  target: Target,
  set: SetHeader<Target>,
): void {
  if (settings.draft) {
    set(target, "RateLimit-Policy", settings.text.policy(n.limit, n.windowSeconds), true);
    set(target, "RateLimit", settings.text.rate(n.remaining, n.reset), true);
  }
  if (legacyWanted(n, settings.draft, settings.legacy)) {
    set(target, "X-RateLimit-Limit", wholeText(n.limit), false);
    if (!n.never) {
      set(target, "X-RateLimit-Remaining", wholeText(n.remaining), false);
      if (n.resetText !== "") set(target, "X-RateLimit-Reset", n.resetText, false);
    }
  }
  if (n.retryAfter >= 0) set(target, "Retry-After", wholeText(n.retryAfter), false);
}

/** A {@link SetHeader} for a header object (insertion order is the order they are set). */
export function setRecord(target: Record<string, string>, name: string, value: string): void {
  target[name] = value;
}

/**
 * The default refusal body: an RFC 9457 problem (`application/problem+json`) of the draft's
 * `quota-exceeded` type, naming the violated policy, its `status` that of {@link refusalStatus}.
 * When `retryAfterMs` is `Infinity` the detail says that no retry helps.
 */
export function quotaExceededProblem(
  decision: Decision,
  policy: string,
  cost: number,
): Record<string, unknown> {
  const retryAfter = retryAfterSeconds(decision);
  const detail =
    retryAfter === undefined
      ? `This request (cost ${cost}) can never succeed at this cost: policy ${JSON.stringify(policy)} will never have ${cost} units available (quota ${sfCount(decision.limit)}). Retrying will not help.`
      : `Quota exceeded; retry after ${retryAfter} second${retryAfter === 1 ? "" : "s"}.`;
  return problemOf(policy, detail, refusalStatus(decision, cost));
}

/** The `quota-exceeded` problem object with a given detail and status. */
function problemOf(policy: string, detail: string, status = 429): Record<string, unknown> {
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status,
    detail,
    "violated-policies": [policy],
  };
}

/**
 * The JSON text of {@link quotaExceededProblem} for a finite retry, with the parts around the
 * number serialized once per middleware: `text(n)` equals `JSON.stringify(quotaExceededProblem(
 * decision, policy, cost))` whenever `retryAfterSeconds(decision)` is `n` (a finite retry's
 * detail does not depend on `cost`). Built by the same code and cut at a placeholder detail,
 * so the two cannot drift apart.
 */
export class QuotaExceededJson {
  /** @internal */
  private readonly head: string;
  /** @internal */
  private readonly tail: string;

  /** `policy` is a checked name (printable ASCII). */
  constructor(policy: string) {
    const placeholder = JSON.stringify("\u0000"); // `"\u0000"`: cannot occur in a checked name
    const whole = JSON.stringify(problemOf(policy, "\u0000"));
    const at = whole.indexOf(placeholder);
    this.head = `${whole.slice(0, at)}"Quota exceeded; retry after `;
    this.tail = `."${whole.slice(at + placeholder.length)}`;
  }

  /** The body for `Retry-After: retryAfter` (a whole number >= 1). */
  text(retryAfter: number): string {
    return (
      this.head + wholeText(retryAfter) + (retryAfter === 1 ? " second" : " seconds") + this.tail
    );
  }
}
