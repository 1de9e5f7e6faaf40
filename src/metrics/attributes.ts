/**
 * `decisionAttributes(decision, options)`: a decision as the attributes of a tracing span,
 * OpenTelemetry-shaped, with no dependency on OpenTelemetry (docs/metrics.md#tracing-spans).
 * @module
 */
import { checkCost, checkOptionNames, checkOptions, mustBe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { optionNames } from "../core/option-names.js";

/** Options of {@link decisionAttributes}: what the decision alone does not say. */
export interface DecisionAttributesOptions {
  /** The policy's name (`ratelimit.policy`), as in `RateLimit-Policy`. */
  readonly policy?: string | undefined;
  /** The units the request asked for (`ratelimit.cost`), a finite number >= 0. */
  readonly cost?: number | undefined;
  /**
   * The key it was counted under (`ratelimit.key`). Left out unless given: a key is often
   * a client address or a user id, which a trace backend may not be the place for.
   */
  readonly key?: string | undefined;
}

/** An attribute value an OpenTelemetry span takes: `span.setAttributes(attributes)`. */
export type DecisionAttributeValue = string | number | boolean;

const OPTIONS = optionNames<DecisionAttributesOptions>()(["policy", "cost", "key"]);
const WHERE = "decisionAttributes";

/**
 * The attributes of one {@link Decision} for a tracing span, as a plain object to pass to
 * `span.setAttributes(...)`. OpenTelemetry's semantic conventions have no rate-limiting
 * attributes yet (only ASP.NET Core's own `aspnetcore.rate_limiting.*`), so the names
 * follow their naming rules (lower case, dot namespaces, snake_case) in the `ratelimit.*`
 * namespace of the IETF RateLimit fields, with units in the names:
 * `ratelimit.allowed`, `ratelimit.limit`, `ratelimit.remaining` (always);
 * `ratelimit.retry_after_ms` (a denial that can pass later), `ratelimit.never` (`true` on
 * a denial that never can), `ratelimit.reset_after_ms` (when finite), `ratelimit.source`
 * (a store limiter's), and `ratelimit.policy`, `ratelimit.cost`, `ratelimit.key` when given.
 * @throws {TypeError} For a decision without a boolean `allowed`, or a bad or unknown option.
 */
export function decisionAttributes(
  decision: Decision,
  options?: DecisionAttributesOptions,
): Record<string, DecisionAttributeValue> {
  if (typeof decision !== "object" || decision === null || typeof decision.allowed !== "boolean") {
    const range = "a Decision (an object with a boolean allowed)";
    throw mustBe(WHERE, "decision", range, decision, TypeError);
  }
  const o = options === undefined ? {} : checkOptions<DecisionAttributesOptions>(WHERE, options);
  checkOptionNames(WHERE, o, OPTIONS);
  const attributes: Record<string, DecisionAttributeValue> = {
    "ratelimit.allowed": decision.allowed,
    "ratelimit.limit": decision.limit,
    "ratelimit.remaining": decision.remaining,
  };
  if (!decision.allowed) {
    const retry = decision.retryAfterMs;
    if (retry < Number.POSITIVE_INFINITY) attributes["ratelimit.retry_after_ms"] = retry;
    else attributes["ratelimit.never"] = true;
  }
  if (decision.resetAfterMs < Number.POSITIVE_INFINITY) {
    attributes["ratelimit.reset_after_ms"] = decision.resetAfterMs;
  }
  const source = (decision as { source?: unknown }).source;
  if (typeof source === "string") attributes["ratelimit.source"] = source;
  if (o.policy !== undefined) attributes["ratelimit.policy"] = checkString("policy", o.policy);
  if (o.cost !== undefined) attributes["ratelimit.cost"] = checkCost(WHERE, o.cost);
  if (o.key !== undefined) attributes["ratelimit.key"] = checkString("key", o.key);
  return attributes;
}

function checkString(name: string, value: unknown): string {
  if (typeof value === "string") return value;
  throw mustBe(WHERE, name, "a string", value, TypeError);
}
