import {
  checkClock,
  checkInteger,
  checkNumber,
  checkOptionNames,
  checkOptions,
  mustBe,
} from "./errors.js";
import { type Clock, systemClock } from "./limiter.js";
import { optionNames } from "./option-names.js";

/**
 * A coarse clock: milliseconds, monotonic, read from its source once per refresh instead of
 * once per check. See docs/semantics.md#the-coarse-clock.
 */
export interface CoarseClock extends Clock {
  /** The refresh interval, ms. */
  readonly refreshMs: number;
  /** The source is read at least once every `maxReads` reads. */
  readonly maxReads: number;
  /**
   * Stops the refresh timer for good; from then on every read reads the source (the clock
   * stays monotonic and exact, only no longer cheap). Idempotent.
   */
  stop(): void;
}

/** Options of {@link coarseClock}. */
export interface CoarseClockOptions {
  /**
   * Milliseconds between refreshes while the clock is read: the usual staleness bound of
   * a reading. At least 1 (a timer's resolution in Node). @default 1
   */
  readonly refreshMs?: number;
  /**
   * The source is read at least once every `maxReads` reads, whatever the timer did (the reads in
   * between answer the cached time): bounds staleness in a synchronous loop that never lets the
   * timer run (1M checks in one loop advance the clock every `maxReads` checks). An integer from 1
   * (every read reads the source) to 2^30. @default 1024
   */
  readonly maxReads?: number;
  /** The clock read at each refresh, ms. @default performance.now (systemClock) */
  readonly source?: Clock;
}

const WHERE = "coarseClock";
/** The option names {@link coarseClock} accepts. */
const COARSE_CLOCK_OPTIONS = optionNames<CoarseClockOptions>()(["refreshMs", "maxReads", "source"]);
const MAX_READS_LIMIT = 2 ** 30;
/** Longest refresh interval: a timer longer than 2^31-1 ms fires at once in Node. */
const MAX_REFRESH_MS = 2 ** 31 - 1;

/**
 * A clock (ms) for any limiter's `clock` option, one per process: reads `source` once per
 * `refreshMs` while in use (an unref'd timer that stops while unread) and at least every
 * `maxReads` reads, answering the reads between from its cache; monotonic. Each decision is
 * the exact one at a reading at most about `refreshMs` old; a synchronous stall of X ms
 * leaves the next reads up to X ms stale. See docs/semantics.md#the-coarse-clock.
 *
 * Good for: hot keys, where `performance.now()` is most of a check. Watch out: stalls.
 * @throws {TypeError} Options not an object, an unknown option, a non-number `refreshMs`
 *   or `maxReads`, a `source` that is not a function.
 * @throws {RangeError} `refreshMs` not in [1, 2^31-1]; `maxReads` not an integer in [1, 2^30].
 * @example
 * const clock = coarseClock()
 * new KeyedLimiter(new TokenBucket({ capacity: 10, refillPerSecond: 5, clock }))
 */
export function coarseClock(options: CoarseClockOptions = {}): CoarseClock {
  const o = checkOptions<CoarseClockOptions>(WHERE, options);
  checkOptionNames(WHERE, o, COARSE_CLOCK_OPTIONS);
  const refreshMs = checkNumber(WHERE, "refreshMs", o.refreshMs, 1, true, 1);
  if (refreshMs > MAX_REFRESH_MS) {
    throw mustBe(WHERE, "refreshMs", `a finite number >= 1 and <= ${MAX_REFRESH_MS}`, refreshMs);
  }
  const maxReads = checkInteger(WHERE, "maxReads", o.maxReads, 1, MAX_READS_LIMIT, 1024);
  const source = checkClock(WHERE, o.source, systemClock, "source");

  /** The cached time: the latest source reading (never lower than an earlier one). */
  let time = Number.NEGATIVE_INFINITY;
  /**
   * Cached reads left before the source is read again (counted down by every read: at 0
   * the read refreshes); `maxReads` right after a refresh, 0 once stopped.
   */
  let left = 0;
  let timer: ReturnType<typeof setInterval> | undefined;
  let stopped = false;

  const refresh = (): number => {
    const t = source();
    if (typeof t !== "number" || Number.isNaN(t)) {
      // Not a time: passed on uncached (the limiter reading it reports it), and the next
      // read asks the source again.
      left = 0;
      return t;
    }
    // A reading behind the cached time leaves it where it is: monotonic.
    if (t > time) time = t;
    left = stopped ? 0 : maxReads;
    return time;
  };
  const tick = (): void => {
    if (left === maxReads) {
      // Unread since the last refresh: idle. Stop waking the process; the next read
      // refreshes from the source and starts the timer again.
      clearInterval(timer);
      timer = undefined;
      left = 0;
      return;
    }
    refresh();
  };
  const slow = (): number => {
    if (!stopped && timer === undefined) {
      timer = setInterval(tick, refreshMs);
      unref(timer);
    }
    return refresh();
  };
  const stop = (): void => {
    stopped = true;
    left = 0;
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  const clock = () => (--left > 0 ? time : slow());
  return Object.freeze(Object.assign(clock, { refreshMs, maxReads, stop }));
}

/** Keeps a timer from holding the process open: Node and Bun's `unref`, Deno's `unrefTimer`. */
function unref(timer: ReturnType<typeof setInterval>): void {
  if (typeof timer === "object" && timer !== null && "unref" in timer) {
    (timer as { unref(): unknown }).unref();
    return;
  }
  const deno = (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
  if (typeof timer === "number" && typeof deno?.unrefTimer === "function") deno.unrefTimer(timer);
}
