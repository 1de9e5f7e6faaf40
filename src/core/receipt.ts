import { checkCost, mustBe } from "./errors.js";
import type { Decision, Receipt } from "./limiter.js";

/**
 * Receipts: what a charge took, and when, so that a refund can hand back exactly that and
 * no more (Go's `rate.Reservation` for units already taken). `Receipt`, the public shape, is
 * in limiter.ts beside `Decision`; the rules are in one place, docs/semantics.md#refunds. @module
 */

/**
 * The one {@link Receipt} class. Its internal fields say who issued it and what the issuer
 * needs to judge a refund; they mean something only to that issuer. @internal
 */
export class ChargeReceipt implements Receipt {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  refunded = 0;

  /**
   * @param owner The limiter that issued it (a refund through another one is refused).
   * @param epoch The issuer's receipt epoch at the charge (a reset or reconfigure moves it).
   * @param a,b Numbers of the issuer's own (a bucket's full time and credit, a window's end...).
   * @param parts An `allOf`'s receipts of its parts, in order (`undefined` for a custom part).
   */
  constructor(
    decision: Decision,
    readonly key: string | undefined,
    readonly units: number,
    readonly atMs: number,
    readonly refundableUntilMs: number,
    readonly owner: object,
    readonly epoch: number,
    readonly a: number,
    readonly b: number,
    readonly parts: readonly (ChargeReceipt | undefined)[] | undefined,
  ) {
    this.allowed = decision.allowed;
    this.limit = decision.limit;
    this.remaining = decision.remaining;
    this.retryAfterMs = decision.retryAfterMs;
    this.resetAfterMs = decision.resetAfterMs;
  }

  /** Units a refund through it may still give back, before the issuer's rules. */
  get left(): number {
    return this.units - this.refunded;
  }

  /**
   * What a receipt says, as plain data (`JSON.stringify`, a log line): the decision (with its
   * `source`, if any), `key`, `units`, `atMs`, `refundableUntilMs` and `refunded`; never the
   * issuer or its state, which a receipt holds to check a refund.
   */
  toJSON(): Record<string, unknown> {
    const source = (this as { source?: unknown }).source;
    return {
      allowed: this.allowed,
      limit: this.limit,
      remaining: this.remaining,
      retryAfterMs: this.retryAfterMs,
      resetAfterMs: this.resetAfterMs,
      ...(source === undefined ? {} : { source }),
      key: this.key,
      units: this.units,
      atMs: this.atMs,
      refundableUntilMs: this.refundableUntilMs,
      refunded: this.refunded,
    };
  }

  /** `console.log` and `util.inspect` show {@link toJSON}'s fields. */
  [Symbol.for("nodejs.util.inspect.custom")](): Record<string, unknown> {
    return this.toJSON();
  }
}

/** A denied charge's receipt: nothing taken, nothing to give back. @internal */
export function deniedReceipt(
  decision: Decision,
  key: string | undefined,
  atMs: number,
  owner: object,
): ChargeReceipt {
  return new ChargeReceipt(decision, key, 0, atMs, atMs, owner, 0, 0, 0, undefined);
}

/**
 * Checks a refund through a receipt: `receipt` one `owner` issued, `units` a cost (`undefined`:
 * all it still holds). Returns the units asked for, at most what it still holds.
 * @throws {TypeError} For something that is not a receipt of `owner`, or a non-number `units`.
 * @throws {RangeError} For NaN, negative or infinite `units`.
 * @internal
 */
export function checkReceipt(
  where: string,
  receipt: unknown,
  owner: object,
  units: unknown,
): { receipt: ChargeReceipt; units: number } {
  if (!(receipt instanceof ChargeReceipt)) {
    throw mustBe(where, "receipt", "what this limiter's charge() returned", receipt, TypeError);
  }
  if (receipt.owner !== owner) {
    throw new TypeError(`${where}: the receipt is another limiter's: refund it through that one`);
  }
  const left = receipt.left;
  const asked = units === undefined ? left : checkCost(where, units);
  return { receipt, units: asked < left ? asked : left };
}
