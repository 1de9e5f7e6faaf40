import { checkCost, checkNumber, describe, RateLimitError } from "./errors.js";
import type { Decision, WaitOptions } from "./limiter.js";

/** The part of a limiter a {@link WaitQueue} drives. */
export interface Waitable {
  peek(cost?: number): Decision;
  consume(cost?: number): Decision;
}

interface Waiter {
  readonly cost: number;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (reason: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

/** The longest delay `setTimeout` takes; longer delays are waited for in pieces. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * First-in, first-out waiters of one limiter, served by at most one timer.
 *
 * The head waiter is granted as soon as `peek(cost)` allows it; the others wait
 * behind it, so a large cost is never overtaken by small ones. The timer is ref'd:
 * a pending `wait` keeps the process alive, as a pending `setTimeout` would.
 */
export class WaitQueue {
  private readonly waiters: Waiter[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly where: string,
    private readonly limiter: Waitable,
  ) {}

  /** Number of pending waiters. */
  get size(): number {
    return this.waiters.length;
  }

  /** See {@link Limiter.wait}. Never throws: every problem is a rejection. */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const c = checkCost(`${this.where}.wait`, cost);
      const { signal, maxWaitMs } = checkWaitOptions(`${this.where}.wait`, options);
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const d = this.limiter.peek(c);
      if (d.retryAfterMs === Number.POSITIVE_INFINITY && c > d.limit) {
        reject(new RangeError(`${this.where}.wait: cost ${c} exceeds limit ${d.limit}`));
        return;
      }
      if (this.waiters.length === 0 && d.allowed) {
        resolve(this.limiter.consume(c));
        return;
      }
      if (d.retryAfterMs > maxWaitMs) {
        reject(
          new RateLimitError(
            `${this.where}.wait: waiting ${d.retryAfterMs} ms for cost ${c} exceeds maxWaitMs ${maxWaitMs}`,
            d,
          ),
        );
        return;
      }
      const waiter: Waiter = {
        cost: c,
        resolve,
        reject,
        signal,
        onAbort: () => this.abort(waiter),
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiters.push(waiter);
      if (this.waiters.length === 1) this.serve();
    });
  }

  private abort(waiter: Waiter): void {
    const i = this.waiters.indexOf(waiter);
    if (i < 0) return;
    this.waiters.splice(i, 1);
    waiter.reject(waiter.signal?.reason);
    if (i === 0) {
      this.clearTimer();
      this.serve();
    }
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Grants every head waiter that fits now, then arms one timer for the next. */
  private serve(): void {
    this.timer = undefined;
    for (let head = this.waiters[0]; head !== undefined; head = this.waiters[0]) {
      const d = this.limiter.peek(head.cost);
      if (!d.allowed) {
        const delay = Math.min(Math.max(1, Math.ceil(d.retryAfterMs)), MAX_TIMER_MS);
        this.timer = setTimeout(() => this.serve(), delay);
        return;
      }
      this.waiters.shift();
      head.signal?.removeEventListener("abort", head.onAbort);
      head.resolve(this.limiter.consume(head.cost));
    }
  }
}

/**
 * Validates `wait` options.
 * @throws {TypeError} when options is not an object or signal is not an AbortSignal.
 * @throws {RangeError} when maxWaitMs is not a number >= 0.
 */
export function checkWaitOptions(
  where: string,
  options: WaitOptions | undefined,
): { signal: AbortSignal | undefined; maxWaitMs: number } {
  if (options === undefined) return { signal: undefined, maxWaitMs: Number.POSITIVE_INFINITY };
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`${where}: options must be an object, got ${describe(options)}`);
  }
  const { signal, maxWaitMs } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(`${where}: signal must be an AbortSignal, got ${describe(signal)}`);
  }
  const max =
    maxWaitMs === undefined || maxWaitMs === Number.POSITIVE_INFINITY
      ? Number.POSITIVE_INFINITY
      : checkNumber(where, "maxWaitMs", maxWaitMs, 0, true);
  return { signal, maxWaitMs: max };
}
