import { ChargeReceipt } from "../../core/receipt.js";
import type { LeaseEntry } from "./lease-table.js";
import type { LeasedDecision, LeasedSource } from "./leased-token-bucket.js";
import type { LocalShare } from "./local-share.js";

/**
 * The receipt of `LeasedTokenBucket.charge`: the decision, its `source`, and where its
 * units came from (the key's entry, as it was at the charge, and the fallback bucket that
 * admitted it), for `refund(receipt, units?)` (docs/redis.md#refunds-and-receipts-of-a-lease).
 * @internal
 */
export class LeaseChargeReceipt extends ChargeReceipt {
  /** See `LeasedSource`. */
  readonly source: LeasedSource;

  /**
   * `entry`: the key's entry at the charge (undefined: nothing was taken), `epoch` its epoch then;
   * `share`: the `'local'` fallback bucket that admitted it, if it did; `refundedBefore`: the
   * entry's `refunded` then (refunds since were repaid by the refill first: see refundReceipt).
   */
  constructor(
    decision: LeasedDecision,
    key: string,
    units: number,
    atMs: number,
    untilMs: number,
    owner: object,
    epoch: number,
    readonly entry: LeaseEntry | undefined,
    readonly share: LocalShare | undefined,
    readonly refundedBefore: number,
  ) {
    super(decision, key, units, atMs, untilMs, owner, epoch, 0, 0, undefined);
    this.source = decision.source;
  }
}
