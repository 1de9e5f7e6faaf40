/**
 * The error a Redis limiter rejects with when the store failed (a connection error,
 * a timeout, a script error, an unexpected reply) and the failure policy is
 * `'throw'`. `cause` holds the underlying error; `operation` names the call.
 *
 * Message: `RedisTokenBucket.consume: Redis failed: <cause message>` or
 * `RedisTokenBucket.consume: Redis did not answer within 1000 ms`.
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

  constructor(timeoutMs: number) {
    super(`Redis did not answer within ${timeoutMs} ms`);
    this.timeoutMs = timeoutMs;
  }
}
