/**
 * A circuit breaker for one store node: after `failuresToOpen` consecutive failures it
 * opens, and calls are answered by the failure policy at once, without reaching the store,
 * for `coolDownMs`; then one probe call goes out (half-open): an answer closes the circuit,
 * a failure opens it again for another cool-down. It also caps the calls in flight
 * (`maxPendingCalls`): a call beyond the cap is answered by the policy at once, so a
 * stalled store holds a bounded number of commands in the client's queue.
 * @module
 */

/** The state of a {@link Circuit}. */
export type CircuitState = "closed" | "open" | "half-open";

/** The validated `CircuitOptions` (src/store/options.ts) of one limiter, defaults applied. */
export interface CircuitSettings {
  readonly failuresToOpen: number;
  readonly coolDownMs: number;
  readonly maxPendingCalls: number;
  readonly clock: () => number;
}

/** A read-only view of one circuit, for metrics and health checks. */
export interface CircuitSnapshot {
  /** The node (a cluster node's address), or `undefined` for a client's one circuit. */
  readonly node: string | undefined;
  /** `closed` (calls go out), `open` (answered by the policy), `half-open` (a probe is out). */
  readonly state: CircuitState;
  /** Failures in a row since the last answer. */
  readonly consecutiveFailures: number;
  /** Calls sent to the store that it has not settled yet (answered, failed; a timeout does not settle). */
  readonly pendingCalls: number;
  /** Calls the store did not answer (failed, or not sent) since its last answer. */
  readonly failedCalls: number;
  /** When the circuit last opened, on the circuit clock (ms); `undefined` while closed. */
  readonly openedAtMs: number | undefined;
}

/** What {@link Circuit.admit} decides for one call. */
export type Admission = "send" | "probe" | "circuit-open" | "pending-cap";

/** One node's circuit. Not thread-aware: one event loop drives it. */
export class Circuit {
  /** As in {@link CircuitSnapshot} (`openedAtMs` kept while closed, and unused then). */
  state: CircuitState = "closed";
  consecutiveFailures = 0;
  pendingCalls = 0;
  failedCalls = 0;
  openedAtMs = 0;

  constructor(
    /** The node, or `undefined` for a client's one circuit. */
    readonly node: string | undefined,
    /** @internal */
    private readonly settings: CircuitSettings,
  ) {}

  /**
   * Whether a call may go to the store now: `'send'` (closed), `'probe'` (the one call
   * after a cool-down; the circuit is half-open until it settles), or why not. A call
   * sent counts as pending until {@link settled}.
   */
  admit(): Admission {
    if (this.state === "open") {
      if (this.settings.clock() - this.openedAtMs < this.settings.coolDownMs) return "circuit-open";
      this.state = "half-open";
      this.pendingCalls++;
      return "probe";
    }
    if (this.state === "half-open") return "circuit-open";
    if (this.pendingCalls >= this.settings.maxPendingCalls) return "pending-cap";
    this.pendingCalls++;
    return "send";
  }

  /** The store settled a sent call (answer or error; not a timeout, whose command is still queued). */
  settled(): void {
    this.pendingCalls--;
  }

  /** A call was answered by the policy without an answer from the store. */
  answeredByPolicy(): void {
    this.failedCalls++;
  }

  /**
   * The store answered a call in time. @returns the failed calls before it when this closed
   * an open or half-open circuit (the transition), else `undefined`.
   */
  succeeded(): number | undefined {
    this.consecutiveFailures = 0;
    const failedCalls = this.failedCalls;
    this.failedCalls = 0;
    if (this.state === "closed") return undefined;
    this.state = "closed";
    return failedCalls;
  }

  /**
   * A sent call failed (an error or a timeout). @returns true when this opened a closed
   * circuit (the transition `onError` reports); a failed probe re-opens it silently.
   */
  failed(probe: boolean): boolean {
    this.consecutiveFailures++;
    const reopened = probe && this.state === "half-open";
    const opened =
      this.state === "closed" && this.consecutiveFailures >= this.settings.failuresToOpen;
    if (!reopened && !opened) return false;
    this.state = "open";
    this.openedAtMs = this.settings.clock();
    return opened;
  }

  /** The circuit as plain data. */
  snapshot(): CircuitSnapshot {
    return {
      node: this.node,
      state: this.state,
      consecutiveFailures: this.consecutiveFailures,
      pendingCalls: this.pendingCalls,
      failedCalls: this.failedCalls,
      openedAtMs: this.state === "closed" ? undefined : this.openedAtMs,
    };
  }
}
