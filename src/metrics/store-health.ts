/**
 * The seam a store-backed limiter (the `tollgate/redis` limiters) feeds metrics through:
 * its failure count and the state of each circuit. @module
 */

import type { CircuitState } from "../store/circuit.js";

export type { CircuitState } from "../store/circuit.js";

/** The states a circuit can be in, in the order metrics list them. */
export const CIRCUIT_STATES: readonly CircuitState[] = ["closed", "open", "half-open"];

/**
 * What a store-backed limiter tells metrics, read at each scrape. `withMetrics` builds it for
 * a limiter with `circuits()` (the `tollgate/redis` limiters): their states, and the calls it
 * saw answered by the failure policy or rejected; or a limiter's own `storeHealth()`, or the
 * `store` option.
 */
export interface StoreHealth {
  /**
   * Calls the store did not answer (it failed or timed out, or an open circuit or the pending
   * cap kept the call from it): answered by the failure policy, or rejected.
   */
  readonly failures: number;
  /** One entry per circuit: per store node, or one for the client (`node` is then `""`). */
  readonly circuits: readonly { readonly node: string; readonly state: CircuitState }[];
}
