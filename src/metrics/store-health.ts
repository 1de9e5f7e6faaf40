/**
 * The seam a store-backed limiter (the `tollgate/redis` limiters) feeds metrics through:
 * its failure count and the state of each circuit.
 * @module
 */

/** A circuit breaker's state: `"closed"` (calls go to the store), `"open"`, `"half-open"`. */
export type CircuitState = "closed" | "open" | "half-open";

/** The states a circuit can be in, in the order metrics list them. */
export const CIRCUIT_STATES: readonly CircuitState[] = ["closed", "open", "half-open"];

/**
 * What a store-backed limiter tells metrics: read at each scrape, never on the request path.
 * A limiter offers it as a `storeHealth()` method, or `withMetrics` is given it as `store`.
 */
export interface StoreHealth {
  /** Store calls that failed (a timeout, a refused connection, an error reply), since creation. */
  readonly failures: number;
  /** One entry per circuit: per store node, or one for the client (`node` is then `""`). */
  readonly circuits: readonly { readonly node: string; readonly state: CircuitState }[];
}
