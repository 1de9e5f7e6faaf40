/**
 * `fastifyRateLimit`: the Fastify adapter. It renders the pipeline's outcome on a Fastify
 * reply; no runtime dependency on Fastify (the types below are the few members it uses).
 * @module
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { checkOptionNames, checkOptions, describe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import {
  AfterResponse,
  HandleSlot,
  type RequestCharges,
  requestCharges,
} from "./after-response.js";
import { UntrustedProxyWarning } from "./client-key.js";
import {
  type CommonRateLimitOptions,
  checkAdapterOptions,
  defaultOnError,
  HOOK_OPTIONS,
  isThenable,
  PEER_OPTION_HINTS,
  report,
} from "./core.js";
import { writeHeaders } from "./headers.js";
import { headerText } from "./node.js";
import {
  answerBody,
  type ClientSource,
  INTERNAL_ERROR_BODY,
  Outcome,
  Pipeline,
  PROBLEM_JSON,
} from "./pipeline.js";

/** The members of a Fastify request that the plugin reads (Fastify 4 and 5). */
export interface FastifyRequestLike {
  /** The node request: its socket's `remoteAddress` is the peer. */
  readonly raw: IncomingMessage;
  readonly headers: IncomingHttpHeaders;
  /** The matched route's options; `config.rateLimit` holds per-route options. */
  readonly routeOptions: {
    readonly config?: unknown;
    readonly method?: unknown;
    readonly url?: unknown;
  };
}

/** The members of a Fastify reply that the plugin uses. */
export interface FastifyReplyLike {
  code(statusCode: number): unknown;
  header(name: string, value: unknown): unknown;
  getHeader(name: string): unknown;
  send(payload?: unknown): unknown;
  readonly sent: boolean;
  /** The node response, watched for its status by `refundIf`. */
  readonly raw?: ServerResponse;
}

/** The members of a Fastify instance that the plugin uses. */
export interface FastifyInstanceLike {
  addHook(name: string, hook: (...args: never[]) => unknown): unknown;
}

/**
 * Options of {@link fastifyRateLimit}: the shared ones plus request hooks on Fastify's
 * request. The hooks are methods so that they may be annotated with Fastify's own
 * `FastifyRequest`/`FastifyReply` types.
 */
export interface FastifyRateLimitOptions<
  Request extends FastifyRequestLike = FastifyRequestLike,
  Reply extends FastifyReplyLike = FastifyReplyLike,
> extends CommonRateLimitOptions {
  /**
   * The key a request is counted under. `clientKey` is the default: the client's address
   * (the socket's peer; see `trustProxy`: Fastify's own `trustProxy` is not consulted),
   * IPv6 grouped by `ipv6Prefix`, or `"unknown"` when there is none.
   * @default (request, clientKey) => clientKey
   */
  key?(request: Request, clientKey: string): string;
  /**
   * Units this request costs (a finite number >= 0); anything else is a programming
   * error: 500, never a pass.
   * @default 1
   */
  cost?(request: Request): number;
  /** Return true to let a request through unchecked (no cost, no headers). */
  skip?(request: Request): boolean;
  /**
   * Answers a limited request instead of the default body: the status (429, or 403/413 when it
   * can never pass) and the rate-limit headers are already set on `reply`. Either send with
   * `reply` yourself, or return (or resolve with) the payload to send. A throw or rejection is
   * a programming error: 500, and `onError` is told with `kind: 'programming'`.
   */
  onLimited?(request: Request, reply: Reply, decision: Decision): unknown;
  /**
   * Called for each admitted request near its limit (see `nearLimitShare`), before it goes on:
   * for logging, alerts or a tracing span (`decisionAttributes`). A throw is a programming error
   * (500, `onError` told); a returned promise is not waited for (a rejection goes to `onError`).
   */
  onNearLimit?(request: Request, decision: Decision, key: string): unknown;
  /**
   * Called once the response status is known, for each request the limiter charged: true
   * gives back what the request took (see docs/http.md#refunds-and-charges-after-the-response).
   * `status` is the reply's. A request whose client went away first is not asked about: it
   * stays charged, unless `refundAborted` (then with status 499).
   * @example
   * refundIf: (status) => status < 400 // count only failed logins
   */
  refundIf?(status: number, request: Request): boolean;
  /**
   * Also ask `refundIf` about a request whose client went away before its response was
   * complete (status 499). Off by default: such a request stays charged
   * (docs/http.md#refunds-and-charges-after-the-response).
   * @default false
   */
  readonly refundAborted?: boolean | undefined;
}

/**
 * Options a route may set in its `config.rateLimit` (all optional; the plugin's options
 * fill in the rest). A route that gives no `limiter` shares the plugin's limiter, and so
 * each client's budget (give it its own limiter for a separate budget). How clients are
 * identified (`trustProxy`, `proxyHeader`, `ipv6Prefix`), `onError` and `wallClock` are
 * the plugin's alone, the same for every route.
 *
 * `windowSeconds` describes a limiter: a route that gives its own `limiter` does not
 * inherit the plugin's `windowSeconds` (its `w=` is its limiter's window, or its own
 * `windowSeconds`); one that gives only `windowSeconds` has it checked against the
 * plugin's limiter. Either way a disagreeing `windowSeconds` is a `RangeError`.
 */
export type FastifyRouteRateLimit<
  Request extends FastifyRequestLike = FastifyRequestLike,
  Reply extends FastifyReplyLike = FastifyReplyLike,
> = Partial<
  Pick<
    FastifyRateLimitOptions<Request, Reply>,
    (typeof ROUTE_OPTIONS)[number] & keyof FastifyRateLimitOptions
  >
>;

const WHERE = "fastifyRateLimit";

/** The options a route may override in `config.rateLimit`. */
const ROUTE_OPTIONS = [
  "limiter",
  "policy",
  "windowSeconds",
  "headers",
  "failure",
  "key",
  "cost",
  "skip",
  "onLimited",
  "refundIf",
  "refundAborted",
  "blockDurationMs",
  "nearLimitShare",
  "onNearLimit",
] as const;

const PLUGIN_ONLY =
  "set it in the plugin's options: clients are identified, and failures reported, the same way on every route";

/** Hints for the options a route may not set, and for peers' names. */
const ROUTE_HINTS: Readonly<Record<string, string>> = {
  ...PEER_OPTION_HINTS,
  trustProxy: PLUGIN_ONLY,
  proxyHeader: PLUGIN_ONLY,
  ipv6Prefix: PLUGIN_ONLY,
  onError: PLUGIN_ONLY,
  wallClock: "set it in the plugin's options: one wall clock for every route",
};

/**
 * One route's pipeline, or the plugin's, with its `onLimited`; `fastifyConcurrencyLimit`'s
 * has neither `onLimited` nor `after` (it charges nothing to give back).
 */
export interface Route {
  readonly pipeline: Pipeline<FastifyRequestLike>;
  readonly onLimited: FastifyRateLimitOptions["onLimited"];
  readonly after: AfterResponse<FastifyRequestLike> | undefined;
}

/** The route that charged each request, for {@link fastifyRateLimitCharges}. */
const charged = new HandleSlot<AfterResponse<FastifyRequestLike>>("tollgate route");

/**
 * The per-request handle of {@link fastifyRateLimit}, for every route of every instance:
 * `fastifyRateLimitCharges.refund(request, units)` gives back units of what the request
 * took, `charge(request, units)` takes more (see `RequestCharges`).
 * @example
 * app.post("/complete", async (request) => {
 *   const answer = await llm(request.body)
 *   fastifyRateLimitCharges.refund(request, 4000 - answer.tokens) // cost: () => 4000
 *   return answer
 * })
 */
export const fastifyRateLimitCharges: RequestCharges<FastifyRequestLike> = requestCharges(
  WHERE,
  (request) => charged.get(request),
);

/** The client's address on Fastify: the node socket's peer, and the forwarding header. */
const FASTIFY_SOURCE: ClientSource<FastifyRequestLike, undefined> = {
  peer: (request) => request.raw.socket?.remoteAddress,
  header: (request, name) => headerText(request.headers[name]),
  untrusted: (request, _extra, _peer, warning) => warning.checkNode(request.raw),
};

/**
 * Validates `options` (all of them, names included) and builds the pipeline; `warning` is
 * the plugin's one forwarding-header warning, shared by all its routes.
 */
function build(
  where: string,
  options: FastifyRateLimitOptions,
  warning: UntrustedProxyWarning,
): Route {
  const { config, hooks, onLimited, refundIf, refundAborted } = checkAdapterOptions(
    where,
    options,
    HOOK_OPTIONS,
  );
  return {
    pipeline: new Pipeline(where, config, hooks, FASTIFY_SOURCE, warning),
    onLimited,
    after: new AfterResponse(where, config, refundIf, refundAborted),
  };
}

/**
 * A Fastify plugin (Fastify 4 and 5), `app.register(fastifyRateLimit, options)`, with the
 * options, headers, 429 body, failure modes and client keys of {@link rateLimit}. One
 * `onRequest` hook, not encapsulated: it answers before the body is read, on every route
 * of the instance (earlier ones, the 404 handler, later plugins' routes).
 *
 * A route's `config.rateLimit` is `false` (no check) or a {@link FastifyRouteRateLimit}
 * overriding the plugin's options, validated when the route is registered (or, for a
 * route registered before the plugin, on its first request: a bad one answers 500). A bad
 * plugin option makes `register`, `ready` and `listen` reject with the `TypeError` or
 * `RangeError` {@link rateLimit} would throw.
 * @example
 * await app.register(fastifyRateLimit, { limiter: new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 1 })) })
 * app.get("/health", { config: { rateLimit: false } }, () => "ok")
 */
export const fastifyRateLimit: <
  Request extends FastifyRequestLike = FastifyRequestLike,
  Reply extends FastifyReplyLike = FastifyReplyLike,
>(
  instance: FastifyInstanceLike,
  options: FastifyRateLimitOptions<Request, Reply>,
  done: (error?: Error) => void,
) => void = Object.assign(
  function fastifyRateLimit(
    instance: FastifyInstanceLike,
    options: FastifyRateLimitOptions,
    done: (error?: Error) => void,
  ): void {
    let plugin: Route;
    let shared: FastifyRateLimitOptions;
    // One warning and one default logger for the plugin and all its routes.
    const warning = new UntrustedProxyWarning(WHERE);
    try {
      const o = checkOptions<FastifyRateLimitOptions>(WHERE, options);
      shared = o.onError === undefined ? { ...o, onError: defaultOnError(WHERE) } : { ...o };
      plugin = build(WHERE, shared, warning);
    } catch (error) {
      done(error as Error);
      return;
    }
    const routes = new WeakMap<object, Route>();
    // The route's name is made only for a message or a new route, never per request.
    const routeOf = (options: FastifyRequestLike["routeOptions"]): Route | null => {
      const value = (options.config as { rateLimit?: unknown } | undefined)?.rateLimit;
      if (value === undefined || value === null) return plugin;
      if (value === false) return null;
      if (typeof value !== "object" || Array.isArray(value)) {
        throw new TypeError(
          `${routeName(options)}: config.rateLimit must be false or an object of options, got ${describe(value)}`,
        );
      }
      let route = routes.get(value);
      if (route === undefined) {
        const where = routeName(options);
        checkOptionNames(where, value, ROUTE_OPTIONS, ROUTE_HINTS);
        const own = value as FastifyRouteRateLimit;
        // The plugin's windowSeconds describes the plugin's limiter, not a route's own.
        const inherited =
          "limiter" in own && !("windowSeconds" in own)
            ? { ...shared, windowSeconds: undefined }
            : shared;
        route = build(where, { ...inherited, ...own }, warning);
        routes.set(value, route);
      }
      return route;
    };
    instance.addHook("onRoute", (route: FastifyRequestLike["routeOptions"]) => {
      routeOf(route);
    });
    instance.addHook(
      "onRequest",
      (request: FastifyRequestLike, reply: FastifyReplyLike, next: (error?: Error) => void) => {
        let route: Route | null;
        try {
          route = routeOf(request.routeOptions);
        } catch (error) {
          // A route registered before the plugin loaded, with bad options: seen only now.
          report(plugin.pipeline.config, error, undefined, "programming");
          problem(reply, 500, INTERNAL_ERROR_BODY);
          return;
        }
        if (route === null) {
          next();
          return;
        }
        const result = route.pipeline.run(request, undefined);
        if (result instanceof Outcome) render(route, result, request, reply, next);
        else result.then((outcome) => render(route, outcome, request, reply, next));
      },
    );
    done();
  },
  {
    [Symbol.for("skip-override")]: true,
    [Symbol.for("fastify.display-name")]: "tollgate-rate-limit",
  },
);

/** `fastifyRateLimit (route GET /login)`, for messages about one route's options. */
function routeName({ method, url }: FastifyRequestLike["routeOptions"]): string {
  const m = Array.isArray(method) ? method.join(",") : String(method);
  return `${WHERE} (route ${m} ${String(url)})`;
}

/**
 * Sets a header on a reply; a List field (`RateLimit`, `RateLimit-Policy`) is appended to a
 * value already there, so that a limiter before this one (a `fastifyRateLimit` before a
 * `fastifyConcurrencyLimit`) keeps its own.
 */
export function setReplyHeader(
  reply: Pick<FastifyReplyLike, "header" | "getHeader">,
  name: string,
  value: string,
  list: boolean,
): void {
  const previous = list ? reply.getHeader(name) : undefined;
  if (previous === undefined) reply.header(name, value);
  else
    reply.header(name, [
      ...(Array.isArray(previous) ? previous.map(String) : [String(previous)]),
      value,
    ]);
}

/** Renders an outcome on a Fastify reply: `next()` to go on, or an answer. */
export function render(
  route: Route,
  outcome: Outcome,
  request: FastifyRequestLike,
  reply: FastifyReplyLike,
  next: (error?: Error) => void,
): void {
  const config = route.pipeline.config;
  switch (outcome.kind) {
    case "skip":
      next();
      return;
    case "pass":
      if (outcome.decision !== undefined) {
        writeHeaders(config, outcome, reply, setReplyHeader);
        if (route.after !== undefined) {
          charged.set(request, route.after);
          route.after.open(request, outcome, reply.raw);
        }
      }
      next();
      return;
    default: // answered here: "limited", "unavailable", "error"
      if (outcome.decision !== undefined) writeHeaders(config, outcome, reply, setReplyHeader);
      if (outcome.kind === "limited" && route.onLimited !== undefined) {
        limited(route, outcome, request, reply, route.onLimited);
      } else problem(reply, outcome.status, answerBody(config, outcome));
  }
}

/** Calls `onLimited` and sends what it returns; a throw or rejection is a 500. */
function limited(
  route: Route,
  outcome: Outcome,
  request: FastifyRequestLike,
  reply: FastifyReplyLike,
  onLimited: NonNullable<FastifyRateLimitOptions["onLimited"]>,
): void {
  const broken = (error: unknown) => {
    route.pipeline.refuse(error, outcome.key);
    if (!reply.sent) problem(reply, 500, INTERNAL_ERROR_BODY);
  };
  const answer = (payload: unknown) => {
    if (!reply.sent) reply.send(payload);
  };
  reply.code(outcome.status);
  let returned: unknown;
  try {
    returned = onLimited(request, reply, outcome.decision!);
  } catch (error) {
    broken(error);
    return;
  }
  if (isThenable(returned)) Promise.resolve(returned).then(answer, broken);
  else answer(returned);
}

/** Answers with an `application/problem+json` body (JSON text). */
export function problem(
  reply: Pick<FastifyReplyLike, "code" | "header" | "send">,
  status: number,
  body: string,
): void {
  reply.code(status);
  reply.header("content-type", PROBLEM_JSON);
  reply.send(body);
}
