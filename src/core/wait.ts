import {
  checkCost,
  checkNumber,
  checkOptionNames,
  checkOptions,
  formatMs,
  mustBe,
  RateLimitError,
} from "./errors.js";
import { type Clock, type Decision, systemClock, type WaitOptions } from "./limiter.js";
import { WAIT_HINTS, WAIT_OPTIONS } from "./option-names.js";
import { listen, unlisten, WaitList, type WaitListNode } from "./wait-list.js";

/**
 * Waiting for a limiter that cannot hold units for its waiters (the three windows,
 * `allOf`, the keyed generic path): a first-in, first-out queue that polls `peek` for its
 * head, with one timer per limiter; and the timer helpers the buckets' ledger shares. @module
 */

/** The part of a limiter a {@link WaitQueue} drives. */
export interface Waitable {
  peek(cost?: number): Decision;
  consume(cost?: number): Decision;
}

/** The longest delay `setTimeout` takes; longer delays are waited for in pieces. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The delay to arm a timer with, for something due in `ms`: rounded up to a whole millisecond (a
 * timer never fires before it is due), at least 1, and at most {@link MAX_TIMER_MS}: a longer wait
 * re-arms when the piece ends, until it is due (`setTimeout` would fire a longer delay after 1 ms).
 */
export function timerDelay(ms: number): number {
  if (!(ms > 1)) return 1;
  return ms >= MAX_TIMER_MS ? MAX_TIMER_MS : Math.ceil(ms);
}

/**
 * One resettable timer calling `fire` (bound once, so arming allocates only the runtime's
 * timer). It is ref'd on purpose: a pending `wait` keeps the process alive, as a pending
 * `setTimeout` does, so `await limiter.wait()` in a script never exits silently half-way.
 */
export class OneTimer {
  /** @internal */
  private handle: ReturnType<typeof setTimeout> | undefined;
  /** @internal */
  private readonly run: () => void;

  constructor(fire: () => void) {
    this.run = () => {
      this.handle = undefined;
      fire();
    };
  }

  /** True while armed. */
  get armed(): boolean {
    return this.handle !== undefined;
  }

  /** (Re)arms the timer for something due in `ms` milliseconds (see {@link timerDelay}). */
  arm(ms: number): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = setTimeout(this.run, timerDelay(ms));
  }

  /** Disarms the timer. */
  clear(): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = undefined;
  }
}

interface Waiter extends WaitListNode<Waiter> {
  readonly cost: number;
  /** Clock reading after which it is rejected; `Infinity` without `maxWaitMs`. */
  readonly deadlineMs: number;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (reason: unknown) => void;
  /** Its index in the deadline heap, -1 when not there (so a waiter that leaves leaves it at once). */
  heapAt: number;
}

/**
 * First-in, first-out waiters of one limiter, served by at most one timer. The head is
 * granted as soon as `peek(cost)` allows it, so a large cost is never overtaken by small
 * ones. Waiting holds nothing: a plain `consume` may take free units meanwhile, and the
 * head is then re-armed for the new `retryAfterMs`.
 *
 * `maxWaitMs`: a waiter whose own `retryAfterMs` (as if first in line) exceeds it is
 * rejected at once; one still queued `maxWaitMs` after the call (on the limiter's clock)
 * is rejected with a `RateLimitError`, as is a head that can never be granted any more (a
 * rate-0 part drained meanwhile). The timer is armed for the head's `retryAfterMs` or the
 * earliest deadline, whichever comes first. See docs/waiting.md.
 */
export class WaitQueue {
  /** @internal */
  private readonly list = new WaitList<Waiter>((w, reason) => {
    this.drop(w);
    w.reject(reason);
    this.serve();
  });
  /**
   * @internal Queued waiters with a finite deadline, as a binary min-heap on `deadlineMs`,
   * each knowing its index: a waiter that leaves (granted, aborted) leaves the heap too.
   */
  private readonly deadlines: Waiter[] = [];
  /** @internal */
  private readonly timer: OneTimer;
  /** @internal */
  private readonly clock: Clock;
  /** @internal */
  private seenMs = Number.NEGATIVE_INFINITY;

  /**
   * @param where The class name for error messages (`FixedWindow`).
   * @param limiter What to poll and charge.
   * @param clock The limiter's clock, for `maxWaitMs` deadlines; by default `limiter.clock`
   *   when it has one, else {@link systemClock}.
   */
  constructor(
    private readonly where: string,
    private readonly limiter: Waitable,
    clock?: Clock,
  ) {
    const own = (limiter as { clock?: unknown }).clock;
    this.clock = clock ?? (typeof own === "function" ? (own as Clock) : systemClock);
    this.timer = new OneTimer(() => this.serve());
  }

  /** Number of pending waiters. */
  get size(): number {
    return this.list.size;
  }

  /**
   * Re-checks the head waiters now (after a refund gave units back): those that fit are
   * granted in order, first-in, first-out, and the timer is re-planned.
   */
  wake(): void {
    if (this.list.size > 0) this.serve();
  }

  /** See {@link Limiter.wait}. Never throws: every problem is a rejection. */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    // A throw in here (a bad argument, a limiter's or clock's error) rejects, as a refusal does.
    return new Promise<Decision>((resolve, reject) => {
      const where = `${this.where}.wait`;
      const c = checkCost(where, cost, WAIT_CALL);
      const { signal, maxWaitMs } = checkWaitOptions(where, options, WAIT_CALL);
      if (signal?.aborted) throw signal.reason;
      const d = this.limiter.peek(c);
      if (d.retryAfterMs === Number.POSITIVE_INFINITY && c > d.limit) {
        throw new RangeError(`${where}: cost ${c} exceeds limit ${d.limit}`);
      }
      if (this.list.size === 0 && d.allowed) {
        resolve(this.limiter.consume(c));
        return;
      }
      if (d.retryAfterMs === Number.POSITIVE_INFINITY) throw neverError(where, c, d);
      if (d.retryAfterMs > maxWaitMs) throw maxWaitError(where, c, d.retryAfterMs, maxWaitMs, d);
      const deadlineMs =
        maxWaitMs === Number.POSITIVE_INFINITY ? maxWaitMs : this.now() + maxWaitMs;
      const waiter: Waiter = {
        cost: c,
        deadlineMs,
        resolve,
        reject,
        signal,
        onAbort: undefined,
        prev: undefined,
        next: undefined,
        queued: false,
        heapAt: -1,
      };
      this.list.push(waiter);
      if (deadlineMs !== Number.POSITIVE_INFINITY) this.siftUp(this.deadlines.length, waiter);
      // A new head, or an earlier deadline: re-plan the one timer.
      if (this.list.size === 1 || deadlineMs !== Number.POSITIVE_INFINITY) this.serve();
    });
  }

  /**
   * The limiter's options changed (`reconfigure`): rejects every waiter whose cost is now above the
   * limit, with the `RangeError` a fresh `wait` gets, then re-plans the rest (those that fit are
   * granted in order; one that can never be is rejected; the timer is re-armed for the head).
   */
  replan(): void {
    const where = `${this.where}.wait`;
    try {
      for (let w = this.list.head; w !== undefined; ) {
        const next = w.next;
        const d = this.limiter.peek(w.cost);
        if (d.retryAfterMs === Number.POSITIVE_INFINITY && w.cost > d.limit) {
          this.drop(w);
          w.reject(new RangeError(`${where}: cost ${w.cost} exceeds limit ${d.limit}`));
        }
        w = next;
      }
    } catch {
      // A clock that throws: serve() below rejects every waiter with its error.
    }
    this.serve();
  }

  /** @internal */
  private now(): number {
    const t = this.clock();
    if (t > this.seenMs) this.seenMs = t;
    return this.seenMs;
  }

  /**
   * @internal Rejects waiters past their deadline, grants every head waiter that fits now, then
   * arms the one timer for the head's retry or the earliest deadline.
   */
  private serve(): void {
    let waitMs = Number.POSITIVE_INFINITY;
    try {
      const now = this.deadlines.length > 0 ? this.now() : 0;
      // Grant first (a waiter granted at its very deadline is in time), then expire the
      // ones past it, and grant again if an expired one was at the head.
      do {
        waitMs = Number.POSITIVE_INFINITY;
        for (let head = this.list.head; head !== undefined; head = this.list.head) {
          const d = this.limiter.peek(head.cost);
          if (d.allowed) {
            // Charged before it leaves the list: a throw leaves it there, rejected below.
            const granted = this.limiter.consume(head.cost);
            this.drop(head);
            head.resolve(granted);
            continue;
          }
          if (d.retryAfterMs === Number.POSITIVE_INFINITY) {
            this.drop(head);
            head.reject(neverError(`${this.where}.wait`, head.cost, d));
            continue;
          }
          waitMs = d.retryAfterMs;
          break;
        }
      } while (this.expire(now));
      const first = this.deadlines[0];
      if (first !== undefined && first.deadlineMs - now < waitMs) waitMs = first.deadlineMs - now;
    } catch (error) {
      // A clock or part that throws: nobody can be served; reject all rather than hang.
      for (let w = this.list.head; w !== undefined; w = this.list.head) {
        this.drop(w);
        w.reject(error);
      }
    }
    if (this.list.size === 0) {
      this.timer.clear();
    } else if (waitMs !== Number.POSITIVE_INFINITY) {
      this.timer.arm(waitMs);
    }
  }

  /** @internal Rejects every queued waiter whose deadline has come; true when the head was one. */
  private expire(now: number): boolean {
    const head = this.list.head;
    for (let w = this.deadlines[0]; w !== undefined && w.deadlineMs <= now; w = this.deadlines[0]) {
      // Read before it leaves the list: a throw leaves it there, for serve() to reject.
      const d = this.limiter.peek(w.cost);
      this.drop(w);
      const message = `${this.where}.wait: not granted within maxWaitMs for cost ${w.cost}`;
      w.reject(new RateLimitError(message, d));
    }
    return head !== undefined && !head.queued;
  }

  /** @internal Takes a waiter out of the list and, when there, the deadline heap. */
  private drop(w: Waiter): void {
    this.list.remove(w);
    if (w.heapAt >= 0) this.removeDeadline(w.heapAt);
  }

  /** @internal Removes the heap entry at `i` in O(log n). */
  private removeDeadline(i: number): void {
    const heap = this.deadlines;
    const gone = heap[i]!;
    gone.heapAt = -1;
    const last = heap.pop()!;
    if (last === gone) return;
    // The last entry fills the hole, then moves up or down to its place.
    if (i > 0 && heap[(i - 1) >> 1]!.deadlineMs > last.deadlineMs) this.siftUp(i, last);
    else this.siftDown(i, last);
  }

  /** @internal Places `w` at the hole `from` or above it (`deadlines.length` adds it). */
  private siftUp(from: number, w: Waiter): void {
    const heap = this.deadlines;
    let i = from;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.deadlineMs <= w.deadlineMs) break;
      heap[i] = heap[parent]!;
      heap[i]!.heapAt = i;
      i = parent;
    }
    heap[i] = w;
    w.heapAt = i;
  }

  /** @internal */
  private siftDown(from: number, w: Waiter): void {
    const heap = this.deadlines;
    let i = from;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= heap.length) break;
      const r = l + 1;
      const c = r < heap.length && heap[r]!.deadlineMs < heap[l]!.deadlineMs ? r : l;
      if (heap[c]!.deadlineMs >= w.deadlineMs) break;
      heap[i] = heap[c]!;
      heap[i]!.heapAt = i;
      i = c;
    }
    heap[i] = w;
    w.heapAt = i;
  }
}

/** The rejection for a wait longer than `maxWaitMs`: `Where.wait: waiting 1500 ms for cost 3 exceeds maxWaitMs 1000`. */
export function maxWaitError(
  where: string,
  cost: number,
  waitMs: number,
  maxWaitMs: number,
  decision: Decision,
): RateLimitError {
  return new RateLimitError(
    `${where}: waiting ${formatMs(waitMs)} ms for cost ${cost} exceeds maxWaitMs ${maxWaitMs}`,
    decision,
  );
}

/** The rejection for a wait that can never end: `Where.wait: cost 1 can never be granted (a rate of 0)`. */
export function neverError(where: string, cost: number, decision: Decision): RateLimitError {
  return new RateLimitError(`${where}: cost ${cost} can never be granted (a rate of 0)`, decision);
}

/**
 * Where `wait`'s jitter draws from: uniform in [0, 1), `Math.random` by default. The tests
 * replace it (test/support/seeds.ts), so that jittered times are the same in every run. @internal
 */
export const jitterSource: { next: () => number } = { next: () => Math.random() };

/**
 * `wait` with `options.jitterMs` (see `WaitOptions.jitterMs`): `wait()` as is, but a wait that did
 * not resolve at once is released a random time after its grant, below `jitterMs`; aborted
 * meanwhile, it rejects with the signal's reason and `giveBack()` returns its units. Without a
 * valid `jitterMs` above 0, `wait()` alone (its own checks reject a bad one). @internal
 */
export function jittered(
  options: WaitOptions | undefined,
  wait: () => Promise<Decision>,
  giveBack: () => void,
): Promise<Decision> {
  const jitterMs = options?.jitterMs;
  if (!(typeof jitterMs === "number" && jitterMs > 0 && jitterMs < Number.POSITIVE_INFINITY)) {
    return wait();
  }
  const waiting = wait();
  const atOnce = {};
  // A promise settled before the race wins it: granted (or refused) at once, no jitter.
  return Promise.race([waiting, atOnce]).then((first) =>
    first !== atOnce
      ? (first as Decision)
      : waiting.then((decision) =>
          release(decision, jitterSource.next() * jitterMs, options?.signal, giveBack),
        ),
  );
}

/** Resolves with `decision` after `ms`, or rejects on `signal`'s abort, giving the units back. */
function release(
  decision: Decision,
  ms: number,
  signal: AbortSignal | undefined,
  giveBack: () => void,
): Promise<Decision> {
  return new Promise((resolve, reject) => {
    const abandon = () => {
      try {
        giveBack();
      } finally {
        reject(signal!.reason);
      }
    };
    if (signal?.aborted) {
      abandon();
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      abandon();
    };
    const timer = setTimeout(() => {
      if (signal !== undefined) unlisten(signal, onAbort);
      resolve(decision);
    }, ms);
    if (signal !== undefined) listen(signal, onAbort);
  });
}

/** The call a wait's error shows for a cost or options out of place. */
export const WAIT_CALL = "wait(1, { maxWaitMs: 100 })";

/**
 * Validates `wait` options; `call`, when given, is the call shown for options that are no
 * object (`wait(1, 100)`).
 * @throws {TypeError} when options is not an object, names an unknown option, or signal
 *   is not an AbortSignal.
 * @throws {RangeError} when maxWaitMs or jitterMs is not a number >= 0.
 */
export function checkWaitOptions(
  where: string,
  options: WaitOptions | undefined,
  call?: string,
): { signal: AbortSignal | undefined; maxWaitMs: number } {
  if (options === undefined) return { signal: undefined, maxWaitMs: Number.POSITIVE_INFINITY };
  const example = call === undefined ? undefined : { names: [], example: call };
  const { signal, maxWaitMs, jitterMs } = checkOptions<WaitOptions>(where, options, example);
  checkOptionNames(where, options, WAIT_OPTIONS, WAIT_HINTS);
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw mustBe(where, "signal", "an AbortSignal", signal, TypeError);
  }
  if (jitterMs !== undefined) checkNumber(where, "jitterMs", jitterMs, 0, true);
  const max =
    maxWaitMs === undefined || maxWaitMs === Number.POSITIVE_INFINITY
      ? Number.POSITIVE_INFINITY
      : checkNumber(where, "maxWaitMs", maxWaitMs, 0, true);
  return { signal, maxWaitMs: max };
}
