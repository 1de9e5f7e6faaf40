/**
 * The error a store-backed limiter rejects with when its store failed (a connection
 * error, a timeout, a script error, an unexpected reply, or an open circuit) and the
 * failure policy is `'throw'`, and the error `onError` receives. `cause` holds the
 * underlying error; `operation` names the call.
 *
 * Message: `RedisTokenBucket.consume: Redis failed: <cause message>`,
 * `RedisTokenBucket.consume: Redis did not answer within 1000 ms`, or
 * `RedisTokenBucket.consume: circuit open after 5 consecutive failures`.
 */
export class RateLimitStoreError extends Error {
  override readonly name = "RateLimitStoreError";
  /** The failed call, such as `RedisTokenBucket.consume`. */
  readonly operation: string;
  /** True when the call failed because it took longer than `timeoutMs`. */
  readonly timedOut: boolean;

  constructor(message: string, options: { cause: unknown; operation: string; timedOut: boolean }) {
    super(message, { cause: options.cause });
    this.operation = options.operation;
    this.timedOut = options.timedOut;
  }
}

/** The `cause` of a {@link RateLimitStoreError} raised by a timeout. */
export class StoreTimeoutError extends Error {
  override readonly name = "StoreTimeoutError";
  /** The timeout that passed, in milliseconds. */
  readonly timeoutMs: number;

  /** @param store The store's name for the message (`Redis`). */
  constructor(timeoutMs: number, store = "Redis") {
    super(`${store} did not answer within ${timeoutMs} ms`);
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The `cause` of a {@link RateLimitStoreError} for a call that was not sent to the store
 * at all: its circuit is open (`reason: 'circuit-open'`, the store failed
 * `failuresToOpen` times in a row and the cool-down has not passed, or a probe is out),
 * or the circuit already has `maxPendingCalls` calls in flight (`reason: 'pending-cap'`).
 */
export class StoreUnavailableError extends Error {
  override readonly name = "StoreUnavailableError";
  /** Why the call was not sent. */
  readonly reason: "circuit-open" | "pending-cap";
  /** The circuit's node, or `undefined` for the one circuit of a client without nodes. */
  readonly node: string | undefined;

  constructor(message: string, reason: "circuit-open" | "pending-cap", node: string | undefined) {
    super(message);
    this.reason = reason;
    this.node = node;
  }
}
