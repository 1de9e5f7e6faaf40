/**
 * A source of time in milliseconds. It should be monotonic; a reading that goes
 * backwards is treated as the latest reading seen (time stands still), so it never
 * adds capacity. The default is `() => performance.now()`. See docs/semantics.md#clocks.
 *
 * Inject one for tests (a manual clock) or to replay recorded traffic at its own
 * timestamps (explicit time).
 */
export type Clock = () => number;

/**
 * The default clock: `performance.now()`, milliseconds on the process's monotonic
 * clock (it does not jump with wall-clock changes).
 */
export const systemClock: Clock = () => performance.now();

/**
 * The answer to one request for `cost` units.
 *
 * All durations are relative: milliseconds from the moment of the decision.
 */
export interface Decision {
  /** The request may proceed; its cost was taken (for `peek`: would be taken). */
  readonly allowed: boolean;
  /** The limiter's size: `capacity` for the buckets, `limit` for the windows. */
  readonly limit: number;
  /**
   * Whole units still available now, after this decision:
   * `max(0, floor(available + 1e-9))`, never above `limit`. See docs/semantics.md#remaining.
   */
  readonly remaining: number;
  /**
   * 0 when allowed; otherwise milliseconds from now until the same cost would be
   * allowed with no other traffic; `Infinity` when it never can (cost above the
   * limit, or a rate of 0 with too little left).
   */
  readonly retryAfterMs: number;
  /**
   * Milliseconds from now until the limiter is back to its fresh state with no
   * further traffic (bucket full or empty, windows empty); 0 if fresh now;
   * `Infinity` when it never will be (a rate of 0 after any use).
   */
  readonly resetAfterMs: number;
}

/**
 * The answer to one `charge`: its {@link Decision}, plus what it took and when. Give it to the same
 * limiter's `refund(receipt, units?)` to hand units back: never more than it took (less what
 * refunds through it gave back already), and nothing once those units no longer count: the fixed
 * window they were charged in has ended, the sliding log entry has left, the counter's window is
 * two windows back, the bucket has refilled past them. A `reset` or `reconfigure` of the limiter
 * since the charge leaves nothing to give back. See docs/semantics.md#refunds.
 */
export interface Receipt extends Decision {
  /** The key charged (`KeyedLimiter`, the Redis limiters); `undefined` for an unkeyed limiter. */
  readonly key: string | undefined;
  /** Units the charge took: its cost when allowed, 0 when denied. */
  readonly units: number;
  /** When: the limiter's clock reading at the charge, in ms (Redis: the server's clock). */
  readonly atMs: number;
  /**
   * The clock reading (ms) from which a refund through this receipt gives nothing back:
   * the end of the fixed window charged, when the log entry leaves, the end of the window
   * after the counter's, when the bucket would be full again with no further traffic
   * (`Infinity` at a rate of 0); for `allOf`, the latest of its parts'. A denial's is its `atMs`.
   */
  readonly refundableUntilMs: number;
  /** Units given back through this receipt so far (at most `units`). */
  readonly refunded: number;
}

/** Options of `wait`. */
export interface WaitOptions {
  /** Cancels the wait: the promise rejects with `signal.reason` and gives back what it held. */
  readonly signal?: AbortSignal | undefined;
  /**
   * The longest wait accepted, in milliseconds (>= 0). A request that would have to wait
   * longer rejects at once with a `RateLimitError`, taking nothing. The buckets know the
   * exact delay when `wait` is called; for the windows and `allOf` a waiter queued behind
   * others (whose delay depends on traffic to come) is also rejected if it is not granted
   * `maxWaitMs` after the call, on the limiter's clock. @default Infinity
   */
  readonly maxWaitMs?: number | undefined;
  /**
   * Up to this many milliseconds (>= 0) added at random to a wait that had to wait, so that callers
   * waiting for the same moment do not all go at once (governor's `Jitter::up_to`). Its units are
   * granted in the queue's order and at its time, as without it, so the limit holds; the caller is
   * released `u * jitterMs` ms later, `u` uniform in [0, 1), and so may finish up to `jitterMs`
   * past `maxWaitMs`. A wait granted at once is not delayed. Aborted in that time, the wait rejects
   * with the signal's reason and gives its units back. See docs/waiting.md#jitter. @default 0
   */
  readonly jitterMs?: number | undefined;
}

/** Options of `reserve`. */
export interface ReserveOptions {
  /**
   * The longest delay accepted, in milliseconds (>= 0); a longer one gives
   * `ok: false` and reserves nothing. @default Infinity
   */
  readonly maxWaitMs?: number | undefined;
}

/**
 * A claim on future capacity, as in Go's `rate.Reservation`: the units are taken
 * now (the bucket may go into debt) and may be used after `delayMs`.
 */
export interface Reservation {
  /** False when the cost can never fit or the delay would pass `maxWaitMs`; nothing was taken. */
  readonly ok: boolean;
  /** Milliseconds to wait before acting; 0 when it can proceed now; `Infinity` when not ok. */
  readonly delayMs: number;
  /**
   * Gives back the reserved units, as far as later reservations allow (units that later
   * reservations already count on stay taken). Calling it twice, or on a reservation that
   * is not ok, does nothing.
   */
  cancel(): void;
}

/**
 * One rate limiter with one state (no key). Implemented by all five algorithms and
 * by {@link allOf}.
 *
 * `cost` is a finite number >= 0 and defaults to 1; fractions are allowed and 0 is
 * a free probe that is always allowed. A non-number cost throws `TypeError`; NaN, a
 * negative or an infinite cost throws `RangeError`. A cost above the limit is not
 * an error: it is denied with `retryAfterMs: Infinity`.
 */
export interface Limiter {
  /** `consume(cost).allowed`, without allocating a {@link Decision}. */
  allow(cost?: number): boolean;
  /** Takes `cost` units when they are available; a denied request changes nothing. */
  consume(cost?: number): Decision;
  /** What `consume(cost)` would answer now; changes nothing. */
  peek(cost?: number): Decision;
  /** Forgets all usage: back to the fresh state. */
  reset(): void;
  /**
   * `consume(cost)` that also says what it took and when: a {@link Receipt} (the decision,
   * the units, the instant) to refund through later, when the request turns out cheaper or
   * should not count. Optional, so that a custom limiter without it still is a `Limiter`;
   * every built-in limiter and `allOf` have it. See docs/semantics.md#refunds.
   */
  charge?(cost?: number): Receipt;
  /**
   * Gives back units taken earlier and returns how many it gave back; may wake waiters,
   * first-in, first-out. Through a receipt (`refund(receipt, units?)`, `units` by default
   * all it still holds): never more than that charge took, and nothing once its units no
   * longer count. Without one (`refund(cost?)`, default 1): never past the fresh state; a
   * `FixedWindow` refuses it (it cannot tell which window the units came from). Optional
   * like {@link charge}. See docs/semantics.md#refunds.
   */
  refund?(receipt: Receipt, units?: number): number;
  /** See the receipt form: gives back `cost` (default 1) without a receipt. */
  refund?(cost?: number): number;

  /**
   * True when the state equals a fresh one, so that dropping this limiter and
   * creating a new one later would change no decision.
   */
  isIdle(): boolean;
  /**
   * Resolves with the granting {@link Decision} once `cost` units were taken,
   * waiting first-in, first-out behind earlier waiters of this limiter.
   *
   * Rejects (never throws) with `TypeError`/`RangeError` for a bad cost or option,
   * `RangeError` when the cost can never fit, `RateLimitError` when the wait would
   * exceed `maxWaitMs` or never end, and `signal.reason` when aborted.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision>;
}

/**
 * The brand of tollgate's unkeyed limiters (the five algorithms and `allOf`), on the prototype of
 * {@link UnkeyedLimiterBase}, which they extend. A registered symbol (`Symbol.for`), so every copy
 * of tollgate in a process (the ESM and CommonJS builds, two installed versions) shares it:
 * `tollgate/http` recognises a `TokenBucket` made by `require("tollgate")` as unkeyed, where
 * `instanceof` against its own build's classes would not, and would call it as a keyed limiter
 * (`consume(key, cost)`). Internal: not exported by the package.
 */
const UNKEYED_LIMITER: unique symbol = Symbol.for("tollgate.unkeyedLimiter");

/**
 * The base class of tollgate's unkeyed limiters: it holds nothing but the {@link UNKEYED_LIMITER}
 * brand (non-enumerable, on its prototype), which every subclass inherits. A base class rather than
 * a top-level call branding each class, so that a bundler still drops the classes an application
 * does not import. Internal: not exported by the package.
 */
export abstract class UnkeyedLimiterBase {}
Object.defineProperty(UnkeyedLimiterBase.prototype, UNKEYED_LIMITER, { value: true });

/**
 * True for an unkeyed tollgate limiter from any copy of tollgate: an object whose
 * prototype chain carries {@link UNKEYED_LIMITER} and that has a `consume` method.
 */
export function isUnkeyedLimiter(value: unknown): value is Limiter {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { [UNKEYED_LIMITER]?: unknown })[UNKEYED_LIMITER] === true &&
    typeof (value as { consume?: unknown }).consume === "function"
  );
}
