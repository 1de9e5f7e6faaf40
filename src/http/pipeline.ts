/**
 * The framework-neutral request pipeline of `tollgate/http`: skip → key → cost → decide → one
 * {@link Outcome}. It holds every rule about what a failure means (an outage, which `failure`
 * decides, against a programming error, which is always a 500), so that each framework adapter
 * (node:http/Express, fetch, Fastify, Hono, Koa) only renders the outcome in its own terms.
 * Synchronous when the limiter is: no promise, no microtask.
 * @module
 */
import type { Decision, Receipt } from "../core/limiter.js";
import { DEFAULT_MAX_KEY_LENGTH } from "../keyed/keyed-limiter.js";
import { blockOnLimit, overLimit } from "./block.js";
import { clientKey, OVERSIZED_KEY, PeerKeyCache, UntrustedProxyWarning } from "./client-key.js";
import { type CommonConfig, checkHookCost, checkHookKey, isThenable, report } from "./core.js";
import {
  HeaderNumbers,
  quotaExceededProblem,
  readDecision,
  refusalStatus,
  setRecord,
  writeHeaders,
} from "./headers.js";

/**
 * What became of one request, for the adapter to render:
 * - `'skip'`: `skip` said so; pass it on unchecked, without headers.
 * - `'pass'`: pass it on, with the rate-limit headers when `decision` is set (none when
 *   the limiter failed and `failure` is `'open'`).
 * - `'limited'`: answer `status` (429, or 403/413 for a request that can never pass: see
 *   `refusalStatus`), or call `onLimited`, with the headers and {@link limitedBody}.
 * - `'unavailable'`: the limiter failed and `failure` is `'closed'`, or it was closed
 *   (`source: 'stopped'`): answer 503.
 * - `'error'`: a programming error: answer 500. Already reported to `onError`.
 */
export type OutcomeKind = "skip" | "pass" | "limited" | "unavailable" | "error";

/**
 * One request's outcome. The header numbers ({@link HeaderNumbers}) are valid when `decision`
 * is set. One shape for every kind, so the adapters' reads stay monomorphic.
 */
export class Outcome extends HeaderNumbers {
  kind: OutcomeKind;
  /** The key checked, when it was computed. */
  key: string | undefined;
  /** The request's cost (1 unless `cost` said otherwise). */
  cost = 1;
  /** The limiter's decision, for `'pass'` (unless it failed open) and `'limited'`. */
  decision: Decision | undefined = undefined;
  /** The decision as a receipt, when the limiter charged through `charge` (for refunds). */
  receipt: Receipt | undefined = undefined;
  /** The status to answer: for `'limited'` 429 (403/413 if it never can pass), else 503 or 500. */
  status = 429;

  constructor(kind: OutcomeKind, key: string | undefined) {
    super();
    this.kind = kind;
    this.key = key;
  }
}

const SKIPPED = new Outcome("skip", undefined);

/** The request hooks every adapter offers, typed on the adapter's request (or context). */
export interface RequestHooks<Req> {
  readonly key?: ((req: Req, clientKey: string) => string) | undefined;
  readonly cost?: ((req: Req) => number) | undefined;
  readonly skip?: ((req: Req) => boolean) | undefined;
  readonly onNearLimit?: ((req: Req, decision: Decision, key: string) => unknown) | undefined;
}

/**
 * How an adapter reads the client's address from its request: the connection's peer address,
 * and the text of a (lower-case) request header. Either may throw: a user-supplied
 * `remoteAddress` hook that throws is a programming error like any hook.
 */
export interface ClientSource<Req, Extra> {
  peer(req: Req, extra: Extra): string | undefined;
  header(req: Req, name: string, extra: Extra): string | null | undefined;
  /**
   * Shows the request to `warning` (`checkNode`, or `checkFetch` with `peer`); called only
   * while no proxy is trusted and the warning has not fired.
   */
  untrusted(req: Req, extra: Extra, peer: string | undefined, warning: UntrustedProxyWarning): void;
}

/**
 * The pipeline of one middleware (or one Fastify route): validated config, hooks and the
 * adapter's {@link ClientSource}. `run` gives the {@link Outcome}; `refuse` reports a
 * failure of an adapter-level hook (`onLimited`) as the programming error it is.
 */
export class Pipeline<Req, Extra = undefined> {
  /** @internal */
  private readonly peerKeys: PeerKeyCache;
  /** @internal */
  private readonly trusting: boolean;
  /** @internal Set only while no proxy is trusted: then nothing about it is on the request path. */
  private readonly proxyWarning: UntrustedProxyWarning | undefined;
  /** @internal Keys longer than this share {@link OVERSIZED_KEY}: the limiter's own bound, or 512. */
  private readonly maxKeyLength: number;
  /** @internal True when the limiter has `charge`: each request is charged with a receipt. */
  private readonly charging: boolean;

  /**
   * `proxyWarning`: one {@link UntrustedProxyWarning} shared by pipelines (a Fastify plugin's
   * routes); by default each has its own. Unused when `config` trusts a proxy.
   */
  constructor(
    readonly where: string,
    readonly config: CommonConfig,
    private readonly hooks: RequestHooks<Req>,
    private readonly source: ClientSource<Req, Extra>,
    proxyWarning?: UntrustedProxyWarning,
  ) {
    this.peerKeys = new PeerKeyCache(config.client);
    this.trusting = config.client.hops !== 0;
    const own = (config.limiter as { maxKeyLength?: unknown }).maxKeyLength;
    this.maxKeyLength = typeof own === "number" && own >= 1 ? own : DEFAULT_MAX_KEY_LENGTH;
    this.charging = typeof config.limiter.charge === "function";
    this.proxyWarning = this.trusting
      ? undefined
      : (proxyWarning ?? new UntrustedProxyWarning(where));
  }

  /**
   * Runs the request through skip, key, cost and the limiter. Returns the outcome itself
   * when the limiter answered synchronously, else a promise of it that never rejects
   * (`Promise.resolve` adopts any thenable: one whose `then` throws is a rejection, one
   * that settles twice settles once).
   */
  run(req: Req, extra: Extra): Outcome | Promise<Outcome> {
    const hooks = this.hooks;
    let key: string | undefined;
    let cost = 1;
    try {
      if (hooks.skip !== undefined && hooks.skip(req) === true) return SKIPPED;
      const source = this.source;
      const client = this.trusting
        ? clientKey(
            source.peer(req, extra),
            source.header(req, this.config.client.header, extra),
            this.config.client,
          )
        : this.peerKey(req, extra);
      key = hooks.key === undefined ? client : checkHookKey(this.where, hooks.key(req, client));
      // A key is often a header the client wrote: its length never decides memory.
      if (key.length > this.maxKeyLength) key = OVERSIZED_KEY;
      if (hooks.cost !== undefined) cost = checkHookCost(this.where, hooks.cost(req));
    } catch (error) {
      return this.refuse(error, key); // a hook broke its contract: never fail open on it
    }
    const checked = key;
    let result: Decision | PromiseLike<Decision>;
    try {
      // With `charge`, the decision is a receipt: refunds then give back only what it took.
      const limiter = this.config.limiter;
      result = this.charging ? limiter.charge!(checked, cost) : limiter.consume(checked, cost);
    } catch (error) {
      return this.failed(error, checked, cost);
    }
    if (isThenable(result)) {
      return Promise.resolve(result).then(
        (decision) => this.decided(decision, checked, cost, req),
        (error: unknown) => this.failed(error, checked, cost),
      );
    }
    return this.decided(result, checked, cost, req);
  }

  /** @internal The key when no proxy is trusted: the peer's (cached), shown to the warning. */
  private peerKey(req: Req, extra: Extra): string {
    const source = this.source;
    const peer = source.peer(req, extra);
    const warning = this.proxyWarning!;
    if (!warning.fired) source.untrusted(req, extra, peer, warning);
    return this.peerKeys.key(peer);
  }

  /** A programming error: reported, then `'error'` (500). */
  refuse(error: unknown, key: string | undefined): Outcome {
    report(this.config, error, key, "programming");
    const outcome = new Outcome("error", key);
    outcome.status = 500;
    return outcome;
  }

  /** @internal The limiter's answer, checked: `'pass'` or `'limited'`, or `'error'` when malformed. */
  private decided(
    given: Decision,
    key: string,
    cost: number,
    req: Req,
  ): Outcome | Promise<Outcome> {
    const block = this.config.blockDurationMs;
    if (block === undefined || given.allowed !== false || !overLimit(given)) {
      return this.outcome(given, key, cost, req);
    }
    const decision = blockOnLimit(this.config, given, key, block);
    if (decision instanceof Promise) return decision.then((d) => this.outcome(d, key, cost, req));
    return this.outcome(decision, key, cost, req);
  }

  /** @internal The outcome of a decision (after any block), checked. */
  private outcome(decision: Decision, key: string, cost: number, req: Req): Outcome {
    const said = decision as { allowed?: unknown; source?: unknown } | null;
    if (
      typeof said === "object" &&
      said !== null &&
      said.allowed === false &&
      said.source === "stopped"
    ) {
      // A closed limiter decides nothing: 503 (see refusalStatus).
      return this.undecided("unavailable", key, cost);
    }
    const outcome = new Outcome("pass", key);
    const config = this.config;
    try {
      // Read here, once, so every adapter sends the same text, and a malformed decision or
      // a wall clock that reads NaN (a RangeError) is a 500 before anything is written.
      readDecision(decision, outcome, config);
    } catch (error) {
      return this.refuse(error, key); // invalid limiter output is a bug, not an outage
    }
    outcome.cost = cost;
    outcome.decision = decision;
    if (this.charging && decision.allowed) outcome.receipt = decision as Receipt;
    if (!decision.allowed) {
      outcome.kind = "limited";
      outcome.status = refusalStatus(decision, cost);
      return outcome;
    }
    const near = this.hooks.onNearLimit;
    if (near !== undefined && decision.remaining <= config.nearLimitShare * decision.limit) {
      return this.nearLimit(near, outcome, req, decision, key);
    }
    return outcome;
  }

  /**
   * @internal Calls `onNearLimit`: a throw is a 500; a returned promise is not waited for,
   * its rejection reported to `onError` (the request has gone on by then).
   */
  private nearLimit(
    hook: NonNullable<RequestHooks<Req>["onNearLimit"]>,
    outcome: Outcome,
    req: Req,
    decision: Decision,
    key: string,
  ): Outcome {
    let returned: unknown;
    try {
      returned = hook(req, decision, key);
    } catch (error) {
      return this.refuse(error, key);
    }
    if (isThenable(returned)) {
      Promise.resolve(returned).then(undefined, (error: unknown) =>
        report(this.config, error, key, "programming"),
      );
    }
    return outcome;
  }

  /**
   * @internal The limiter threw or rejected: a programming error when {@link isArgumentError},
   * else an outage, reported, then passed without headers (`'open'`) or `'unavailable'`.
   */
  private failed(error: unknown, key: string, cost: number): Outcome {
    if (isArgumentError(error)) return this.refuse(error, key);
    report(this.config, error, key, "outage");
    return this.undecided(this.config.failure === "open" ? "pass" : "unavailable", key, cost);
  }

  /** @internal `'unavailable'` (503), or a `'pass'` without a decision (failed open). */
  private undecided(kind: "pass" | "unavailable", key: string, cost: number): Outcome {
    const outcome = new Outcome(kind, key);
    outcome.cost = cost;
    outcome.status = 503;
    return outcome;
  }
}

/** The rate-limit headers of an outcome as an object (for adapters that build a `Response`). */
export function headerRecord(config: CommonConfig, outcome: Outcome): Record<string, string> {
  const headers: Record<string, string> = {};
  if (outcome.decision !== undefined) writeHeaders(config, outcome, headers, setRecord);
  return headers;
}

/** The names of the List fields, which are appended to rather than replaced (RFC 9651 3.1). */
export const LIST_FIELDS: ReadonlySet<string> = new Set(["RateLimit-Policy", "RateLimit"]);

/**
 * The JSON body of an outcome the middleware answers itself: for `'limited'` the
 * `quota-exceeded` problem (precomputed when the retry is finite), else the 503 or 500 body.
 */
export function answerBody(config: CommonConfig, outcome: Outcome): string {
  if (outcome.kind !== "limited") {
    return outcome.kind === "unavailable" ? UNAVAILABLE_BODY : INTERNAL_ERROR_BODY;
  }
  return outcome.retryAfter >= 0
    ? config.quotaJson.text(outcome.retryAfter)
    : JSON.stringify(quotaExceededProblem(outcome.decision!, config.policy, outcome.cost));
}

/** The 503 body sent with `failure: 'closed'` when the limiter fails (RFC 9457, `about:blank`). */
const UNAVAILABLE_BODY = JSON.stringify({
  type: "about:blank",
  title: "Service Unavailable",
  status: 503,
  detail: "The rate limiter is unavailable, so the request was refused.",
});

/**
 * The 500 body sent for a programming error (RFC 9457, `about:blank`). Says nothing about the
 * cause; `onError` gets the error.
 */
export const INTERNAL_ERROR_BODY = JSON.stringify({
  type: "about:blank",
  title: "Internal Server Error",
  status: 500,
  detail: "The request could not be checked against its rate limit, so it was refused.",
});

/** The media type of every body the middleware sends (RFC 9457). */
export const PROBLEM_JSON = "application/problem+json";

/** The error names {@link isArgumentError} looks for. */
const ARGUMENT_ERRORS: ReadonlySet<unknown> = new Set(["TypeError", "RangeError"]);

/**
 * True when a limiter's error is a wrong argument, so a programming error (answered 500) rather
 * than an outage (passed under `failure: 'open'`): a `TypeError` or `RangeError` of this realm,
 * or of another one (a `vm` context, a worker's structured clone: `instanceof` fails there),
 * recognised by its `name` or its constructor's. An object whose `name` or `constructor` cannot
 * be read (a throwing getter, a revoked proxy) counts as one too: when in doubt, refusing is
 * the safe side, since passing would switch rate limiting off.
 */
export function isArgumentError(error: unknown): boolean {
  if (error instanceof TypeError || error instanceof RangeError) return true;
  if ((typeof error !== "object" && typeof error !== "function") || error === null) return false;
  try {
    const { name, constructor: Class } = error as { name?: unknown; constructor?: unknown };
    const className = typeof Class === "function" ? Class.name : undefined;
    return ARGUMENT_ERRORS.has(name) || ARGUMENT_ERRORS.has(className);
  } catch {
    return true;
  }
}
