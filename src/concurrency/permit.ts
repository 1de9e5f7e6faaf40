/**
 * A permit: one unit of concurrency held until `release()`.
 * @module
 */

/**
 * One held unit of a {@link ConcurrencyLimiter} (or of one key of a
 * `KeyedConcurrencyLimiter`), from `tryAcquire` or `acquire` until `release()`.
 *
 * Watch out: a permit never released is held for good: release it in a `finally`, or on
 * the response's `close` (the `tollgate/http` middlewares do).
 */
export interface Permit {
  /** Gives the unit back, serving the oldest waiter. Idempotent: a second call does nothing. */
  release(): void;
  /** True once `release()` was called. */
  readonly released: boolean;
}

/** What a permit gives its unit back to. */
export interface PermitOwner {
  /** Called exactly once per permit, on its first `release()`. */
  releaseOne(): void;
}

/** The one {@link Permit} class: releases its owner once. @internal */
export class HeldPermit implements Permit {
  /** @internal */
  private done = false;

  constructor(private readonly owner: PermitOwner) {}

  get released(): boolean {
    return this.done;
  }

  release(): void {
    if (this.done) return;
    this.done = true;
    this.owner.releaseOne();
  }
}
