import {
  checkCost,
  checkNumber,
  checkOptionNames,
  checkOptions,
  formatUnits,
  RateLimitError,
} from "../core/errors.js";
import type { Decision, Reservation, ReserveOptions, WaitOptions } from "../core/limiter.js";
import { decisionMs, fits, wholeUnits } from "../core/numeric.js";
import { RESERVE_HINTS, RESERVE_OPTIONS } from "../core/option-names.js";
import { checkWaitOptions, maxWaitError, neverError, OneTimer, WAIT_CALL } from "../core/wait.js";
import { WaitList, type WaitListNode } from "../core/wait-list.js";
import type { HeldBucket } from "./bucket-kernel.js";
import { msToRefill } from "./bucket-math.js";

/**
 * Reservations and waiting for the two buckets: a ledger of pending claims on one bucket, in
 * first-in, first-out order, served by at most one timer.
 *
 * Units. The bucket's `units` are its tokens (`TokenBucket`) or its free room `capacity - level`
 * (`LeakyBucket`). A pending entry (a `wait` or a `reserve` whose time has not come) has already
 * taken its units: they are *held*, the bucket may be in debt (tokens below 0), and a plain
 * `consume` is denied until the entries are served.
 *
 * When an entry is due. With `behind` the units held by the entries after it, an entry is due once
 * `units(now) + behind >= threshold`, where the threshold is 0 for a token bucket (the debt up to
 * and including it is repaid) and `capacity - cost` for a leaky bucket (the water ahead of it has
 * drained: `level - (its cost + behind) <= 0`). Both sides only grow with time and the thresholds
 * are ordered along the queue, so entries fall due in order and only the head needs checking.
 *
 * Giving back (abort, `cancel`, refund). A reservation's time to act is fixed when it is made,
 * counting every unit held ahead of it; the bucket then places new requests behind every held unit.
 * That is sound only while no pending reservation is due *before* its time to act: were it due
 * earlier, a later request could be placed to act together with it (a burst). So units come back
 * only as far as every reservation behind the entry that acts later than now stays due no sooner
 * than its time to act: its *slack*, the units that may leave before it,
 * `held up to and including it + threshold - base units at its time to act` (the base projected at
 * the rate, as if nothing were held). A reservation made by the ledger has no slack (it is due
 * exactly at its time to act), so an entry with such a reservation behind it gives nothing back at
 * once. What is not given back stays held, attached to the first such reservation behind it, until
 * that one is cancelled in turn (then it is given back with it, by the same rule) or acts (then it
 * was spent). With no reservation behind acting later than now, everything comes back, less what
 * has already left (units kept ahead of a reservation fall due from its time on, so part of them
 * may be repaid into a full bucket: the bucket as if nothing were held is above its capacity; that
 * excess is spent, never given back nor moved behind waiters). Waiters behind are not counted: they
 * are re-checked and move up at once, still behind every reservation ahead of them. So cancelling
 * every reservation, in any order, before its time gives back exactly what was reserved; the
 * arithmetic is on units (never units -> ms -> units), so it is exact. A refund (`refund`) that
 * finds reservations pending is bounded by the same slack (see {@link BucketLedger.slack}).
 *
 * This replaces Go's `x/time/rate` rule (give back `cost - units reserved later`), which counted
 * the units kept for a reservation cancelled ahead but not that reservation's own: two reservations
 * cancelled at one instant in reverse order let a third one, made after them, act half a second
 * before one made before them (3 units in 500 ms where 2.5 fit).
 * @module
 */

const WAITER = 1;
const FIXED = 2;

interface Entry extends WaitListNode<Entry> {
  /** Units held: its cost, plus units kept for reservations cancelled ahead of it. */
  units: number;
  readonly cost: number;
  /** Due once `units(now) + behind >= threshold` (see the module doc); re-set by `replan`. */
  threshold: number;
  /** A waiter's `where` for messages (`TokenBucket.wait`); the host's for a reservation. */
  readonly where: string;
  /** A waiter's `maxWaitMs` deadline (clock ms), checked again by `replan`; `Infinity` for none. */
  readonly deadlineMs: number;
  /** The `maxWaitMs` the waiter gave (for the message). */
  readonly maxWaitMs: number;
  /**
   * A reservation's time to act (clock ms): until the clock passes it, the reservation is
   * kept, and `cancel()` gives its units back, even once it is due; `Infinity` for a waiter.
   */
  readonly actAtMs: number;
  /**
   * When its turn in the ledger comes (clock ms): its time to act, or earlier once units
   * were given back ahead of it (or the bucket was reset). It is spent once the clock has
   * passed its turn, even before its time to act: giving its units back later would count
   * refill it was already charged for (waiters behind it were served on that account).
   */
  turnMs: number;
  readonly kind: typeof WAITER | typeof FIXED;
  readonly resolve: ((decision: Decision) => void) | undefined;
  readonly reject: ((reason: unknown) => void) | undefined;
}

/** A reservation that cannot be made: nothing was taken. */
const NOT_OK: Reservation = Object.freeze({
  ok: false,
  delayMs: Number.POSITIVE_INFINITY,
  cancel() {},
});
/** A free reservation (cost 0) that may act at once: nothing to give back. */
const FREE_NOW: Reservation = Object.freeze({ ok: true, delayMs: 0, cancel() {} });

/** Result of planning a request: a delay, or why there is none. */
const FULL = -1;
const TOO_BIG = -2;

/** The pending reservations and waiters of one bucket (see the module doc). @internal */
export class BucketLedger {
  /** @internal */
  private readonly list = new WaitList<Entry>((e, reason) => this.withdraw(e, reason));
  /** @internal Units held by all entries. */
  private total = 0;
  /** @internal Pending reservations (not waiters), of any cost: a free one still has its place. */
  private fixedEntries = 0;
  /** @internal */
  private waiters = 0;
  /** @internal */
  private readonly timer: OneTimer;

  constructor(private readonly host: HeldBucket) {
    this.timer = new OneTimer(() => this.serve());
  }

  /**
   * @internal The delay in ms before `cost` may act given `units` now, or `FULL` (a leaky queue
   * without room) or `TOO_BIG` (above capacity); `Infinity` when it never can.
   */
  private plan(cost: number, units: number): number {
    const h = this.host;
    if (!fits(cost, h.capacity)) return TOO_BIG;
    if (h.shaping) {
      if (!fits(cost, units)) return FULL;
      // Delayed by the water ahead of it: the level before it is added.
      return fits(h.capacity, units) ? 0 : msToRefill(h.capacity - units, h.ratePerSecond);
    }
    return fits(cost, units) ? 0 : msToRefill(cost - units, h.ratePerSecond);
  }

  /**
   * @internal Holds `cost` at `now` and queues its entry: a reservation acting at `actAtMs`,
   * or a waiter (`actAtMs` Infinity) settled through `settle` (its promise's functions).
   */
  private enqueue(
    cost: number,
    now: number,
    kind: typeof WAITER | typeof FIXED,
    where: string,
    deadlineMs: number,
    maxWaitMs: number,
    actAtMs: number,
    settle: Pick<Entry, "resolve" | "reject" | "signal"> | undefined,
  ): Entry {
    const h = this.host;
    h.hold(cost, now);
    const entry: Entry = {
      units: cost,
      cost,
      threshold: h.shaping ? h.capacity - cost : 0,
      where,
      deadlineMs,
      maxWaitMs,
      actAtMs,
      turnMs: actAtMs,
      kind,
      resolve: settle?.resolve,
      reject: settle?.reject,
      signal: settle?.signal,
      onAbort: undefined,
      prev: undefined,
      next: undefined,
      queued: false,
    };
    this.list.push(entry);
    this.total += cost;
    if (kind === FIXED) this.fixedEntries++;
    else this.waiters++;
    return entry;
  }

  /** See `TokenBucket.reserve`. Throws for bad arguments. */
  reserve(cost: number | undefined, options: ReserveOptions | undefined): Reservation {
    const where = `${this.host.where}.reserve`;
    const c = checkCost(where, cost, "reserve(1, { maxWaitMs: 100 })");
    let maxWaitMs = Number.POSITIVE_INFINITY;
    if (options !== undefined) {
      const m = checkOptions<ReserveOptions>(where, options).maxWaitMs;
      checkOptionNames(where, options, RESERVE_OPTIONS, RESERVE_HINTS);
      if (m !== undefined && m !== maxWaitMs)
        maxWaitMs = checkNumber(where, "maxWaitMs", m, 0, true);
    }
    const now = this.host.now();
    const units = this.settle(now);
    const delayMs = this.plan(c, units);
    if (delayMs < 0 || delayMs === Number.POSITIVE_INFINITY || delayMs > maxWaitMs) {
      return NOT_OK;
    }
    if (delayMs === 0 && c === 0) return FREE_NOW;
    // Kept until the clock passes its time to act (a delay of 0 included: it may still be
    // cancelled at that instant, Go's rule).
    const never = Number.POSITIVE_INFINITY;
    const at = now + delayMs;
    const entry = this.enqueue(c, now, FIXED, this.host.where, never, never, at, undefined);
    return { ok: true, delayMs, cancel: () => this.withdraw(entry) };
  }

  /**
   * See `TokenBucket.wait`. Never throws: every problem is a rejection, whose message
   * starts with `where` (by default `TokenBucket.wait`).
   */
  wait(
    cost: number | undefined,
    options: WaitOptions | undefined,
    where = `${this.host.where}.wait`,
  ): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const h = this.host;
      const c = checkCost(where, cost, WAIT_CALL);
      const { signal, maxWaitMs } = checkWaitOptions(where, options, WAIT_CALL);
      // A throw here rejects the promise, as a bad cost or option does.
      if (signal?.aborted) throw signal.reason;
      const now = h.now();
      const units = this.settle(now);
      const delayMs = this.plan(c, units);
      if (delayMs === TOO_BIG)
        throw new RangeError(`${where}: cost ${c} exceeds capacity ${h.capacity}`);
      if (delayMs === FULL) {
        throw new RateLimitError(
          `${where}: the queue is full: cost ${c} does not fit in the ${formatUnits(units)} units free of capacity ${h.capacity} (capacity bounds the level and the units waiting together: a larger one lets more wait)`,
          this.decision(false, units, msToRefill(c - units, h.ratePerSecond)),
        );
      }
      if (delayMs === Number.POSITIVE_INFINITY)
        throw neverError(where, c, this.decision(false, units, delayMs));
      if (delayMs > maxWaitMs)
        throw maxWaitError(where, c, delayMs, maxWaitMs, this.decision(false, units, delayMs));
      if (delayMs === 0) {
        h.take(units, c, now);
        resolve(this.decision(true, h.unitsAt(now), 0));
        return;
      }
      const deadlineMs = maxWaitMs === Number.POSITIVE_INFINITY ? maxWaitMs : now + maxWaitMs;
      const never = Number.POSITIVE_INFINITY;
      const settle = { resolve, reject, signal };
      this.enqueue(c, now, WAITER, where, deadlineMs, maxWaitMs, never, settle);
      if (!this.timer.armed) this.arm(units - c);
    });
  }

  /** @internal */
  private unlink(e: Entry): void {
    this.list.remove(e);
    if (e.kind === FIXED) this.fixedEntries--;
    else this.waiters--;
    // The last entry takes the exact remainder, so no float residue stays held.
    this.total = this.list.size === 0 ? 0 : this.total - e.units;
  }

  /**
   * Removes every due entry at `now` and returns the bucket's units at `now`: waiters are granted;
   * a reservation is spent once the clock has passed its turn (until then a due one is kept in its
   * place, changing no one's units: see `Entry.actAtMs`), even if the units say it is not due: a
   * plain request took units after it was due (a leaky bucket's level then counts that water).
   */
  settle(now: number): number {
    const h = this.host;
    const units = h.unitsAt(now);
    let grant: Decision | undefined;
    // Units held by the reservations kept ahead of `e`.
    let kept = 0;
    for (let e = this.list.head; e !== undefined; ) {
      const next = e.next;
      const past = now > e.turnMs;
      if (!past && !fits(e.threshold - (this.total - kept - e.units), units)) break;
      if (e.kind === FIXED && !past) {
        kept += e.units;
        e = next;
        continue;
      }
      const spent = this.list.size === 1 ? this.total : e.units;
      this.unlink(e);
      h.spend(spent, now);
      if (e.kind === WAITER) {
        grant ??= this.decision(true, units, 0);
        e.resolve!(grant);
      }
      e = next;
    }
    this.sync(now);
    return units;
  }

  /**
   * @internal With nothing pending, nothing is held: a float residue the host's count kept (its
   * sums and the ledger's differ in the last bit) would deny forever what a fresh bucket allows.
   */
  private sync(now: number): void {
    const h = this.host;
    if (this.list.size === 0 && h.held !== 0) h.hold(-h.held, now);
  }

  /** Whether a plain request must wait behind pending entries at `units` now. */
  blocks(units: number): boolean {
    const last = this.list.tail;
    return last !== undefined && !fits(last.threshold, units);
  }

  /** Milliseconds until the last pending entry is due, at `units` now. */
  msUntilServed(units: number): number {
    const last = this.list.tail;
    return last === undefined ? 0 : msToRefill(last.threshold - units, this.host.ratePerSecond);
  }

  /**
   * Removes a pending entry before its time, giving back what reservations behind it
   * do not count on (see the module doc); an aborted waiter is rejected with `reason`.
   */
  withdraw(e: Entry, reason?: unknown): void {
    const h = this.host;
    let now: number;
    let units: number;
    try {
      now = h.now();
      units = this.settle(now);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (!e.queued) return;
    const held = e.units;
    // What has already left cannot come back (see the module doc): with `e` first, the
    // excess over capacity (`ahead` below 0) is spent. Due reservations kept ahead of `e`
    // (until their time to act) count as spent: their units are repaid already.
    let first = true;
    let keptAhead = 0;
    for (let f = this.list.head; f !== e && f !== undefined; f = f.next) {
      if (!this.isKept(f, units, keptAhead, now)) {
        first = false;
        break;
      }
      keptAhead += f.units;
    }
    const ahead = h.capacity - units - this.total + keptAhead;
    const drained = first && ahead < 0 ? (-ahead < held ? -ahead : held) : 0;
    const left = held - drained;
    // Only as far as no reservation behind it, acting later than now, falls due before its
    // time to act (see the module doc); the rest stays held ahead of the first of them.
    const binding = this.fixedEntries > (e.kind === FIXED ? 1 : 0) ? e.next : undefined;
    const slack = binding === undefined ? left : this.slack(units, now, e);
    const give = slack < left ? (slack > 0 ? slack : 0) : left;
    const nextFixed = give < left ? this.firstLater(e.next, now) : undefined;
    const keep = left - give;
    const last = this.list.size === 1;
    const total = this.total;
    this.unlink(e);
    if (last) {
      h.hold(-total, now); // exactly nothing held any more
      if (drained > 0) h.take(h.unitsAt(now), drained, now);
    } else {
      if (drained > 0) h.spend(drained, now);
      if (keep > 0 && nextFixed !== undefined) {
        nextFixed.units += keep;
        this.total += keep;
      }
      h.hold(-give, now);
      // Units given back ahead of reservations move their turn before their time to act.
      if (give > 0) this.markEarly(nextFixed, now);
    }
    this.sync(now);
    if (e.kind === WAITER) e.reject!(reason);
    this.serve();
  }

  /**
   * The units that may come back at `now` (the bucket's `units` then) without making a
   * pending reservation due before its time to act: the least slack (see the module doc) of
   * the reservations acting later than now, behind `after` when given; `Infinity` for none.
   * A refund of the bucket is bounded by it too: a reservation's time counted those units.
   */
  slack(units: number, now: number, after?: Entry): number {
    const rate = this.host.ratePerSecond;
    const base = units + this.total;
    let least = Number.POSITIVE_INFINITY;
    let held = 0;
    let behind = after === undefined;
    for (let f = this.list.head; f !== undefined; f = f.next) {
      held += f.units;
      if (f === after) {
        behind = true;
        continue;
      }
      if (!behind || f.kind !== FIXED || !(f.actAtMs > now)) continue;
      const baseThen = rate === 0 ? base : base + ((f.actAtMs - now) * rate) / 1000;
      const s = held + f.threshold - baseThen;
      if (s < least) least = s;
    }
    return least;
  }

  /**
   * @internal After a `reconfigure`: a faster rate (or a smaller leaky capacity) would let a
   * reservation fall due before its time to act; the units that would (the least slack, below
   * 0) are held ahead of the first reservation acting later than now, as a cancel keeps them.
   */
  private keepLate(): void {
    if (this.fixedEntries === 0) return;
    const h = this.host;
    let now: number;
    try {
      now = h.now();
    } catch {
      return; // a clock that throws: replan rejects the waiters
    }
    const slack = this.slack(h.unitsAt(now), now);
    const f = slack < 0 ? this.firstLater(this.list.head, now) : undefined;
    if (f === undefined) return;
    f.units -= slack;
    this.total -= slack;
    h.hold(-slack, now);
  }

  /** @internal The first reservation from `from` on that acts later than `now`. */
  private firstLater(from: Entry | undefined, now: number): Entry | undefined {
    for (let f = from; f !== undefined; f = f.next) {
      if (f.kind === FIXED && f.actAtMs > now) return f;
    }
    return undefined;
  }

  /** @internal Whether `f`, with `keptAhead` units kept ahead of it, is a due reservation kept. */
  private isKept(f: Entry, units: number, keptAhead: number, now: number): boolean {
    return (
      f.kind === FIXED &&
      !(now > f.turnMs) &&
      fits(f.threshold - (this.total - keptAhead - f.units), units)
    );
  }

  /** @internal Moves the turn (`Entry.turnMs`) of the reservations from `from` on to when due. */
  private markEarly(from: Entry | undefined, now: number): void {
    if (from === undefined) return;
    const units = this.host.unitsAt(now);
    let ahead = 0;
    let mark = false;
    for (let f = this.list.head; f !== undefined; f = f.next) {
      ahead += f.units;
      if (f === from) mark = true;
      if (!mark || f.kind !== FIXED) continue;
      const dueMs =
        now + msToRefill(f.threshold - (this.total - ahead) - units, this.host.ratePerSecond);
      if (dueMs < f.turnMs) f.turnMs = dueMs;
    }
  }

  /** The bucket was reset at `now`: every turn may come early; serve who is due now. */
  reset(now: number): void {
    this.markEarly(this.list.head, now);
    this.serve();
  }

  /**
   * The bucket's capacity or rate changed (`reconfigure`; the host reads the new ones):
   * re-plans every entry at the current time. A leaky bucket's thresholds follow the new
   * capacity; then, one at a time from the head, a waiter is rejected as a fresh `wait`
   * would be now: a cost above the new capacity (`RangeError`), a wait that never ends (a
   * rate of 0: `RateLimitError`), or one that now ends after its `maxWaitMs` deadline
   * (`RateLimitError`); its units are given back as on abort, and those behind move up.
   * Reservations keep their units and their time to act. Then the timer is re-armed.
   */
  replan(): void {
    const h = this.host;
    for (let e = this.list.head; e !== undefined; e = e.next) {
      e.threshold = h.shaping ? h.capacity - e.cost : 0;
    }
    this.keepLate();
    for (;;) {
      let units: number;
      let now: number;
      try {
        now = h.now();
        units = this.settle(now);
      } catch (error) {
        this.fail(error);
        return;
      }
      const refused = this.refusedWaiter(units, now);
      if (refused === undefined) break;
      this.withdraw(refused[0], refused[1]);
    }
    this.serve();
  }

  /** @internal The first waiter a fresh `wait` would refuse now, with its rejection. */
  private refusedWaiter(units: number, now: number): [Entry, unknown] | undefined {
    const h = this.host;
    let ahead = 0;
    for (let e = this.list.head; e !== undefined; e = e.next) {
      ahead += e.units;
      if (e.kind !== WAITER) continue;
      if (!fits(e.cost, h.capacity)) {
        const message = `${e.where}: cost ${e.cost} exceeds ${h.sizeWord} ${h.capacity}`;
        return [e, new RangeError(message)];
      }
      const waitMs = msToRefill(e.threshold - (this.total - ahead) - units, h.ratePerSecond);
      const never = waitMs === Number.POSITIVE_INFINITY;
      // A few float steps of slack: an unchanged plan must not be refused by rounding.
      if (never || now + waitMs > e.deadlineMs + Math.abs(e.deadlineMs) * 2 ** -48 + 1e-9) {
        const denied = this.decision(false, units, waitMs);
        const error = never
          ? neverError(e.where, e.cost, denied)
          : maxWaitError(e.where, e.cost, waitMs, e.maxWaitMs, denied);
        return [e, error];
      }
    }
    return undefined;
  }

  /** Settles at the current time and re-arms the one timer for the first waiter. */
  serve(): void {
    try {
      const units = this.settle(this.host.now());
      if (this.waiters === 0) this.timer.clear();
      else this.arm(units);
    } catch (error) {
      this.fail(error);
    }
  }

  /** @internal Arms the timer for the first waiter, given `units` now (after settling). */
  private arm(units: number): void {
    let ahead = 0;
    for (let e = this.list.head; e !== undefined; e = e.next) {
      ahead += e.units;
      if (e.kind !== WAITER) continue;
      const behind = this.total - ahead;
      this.timer.arm(msToRefill(e.threshold - behind - units, this.host.ratePerSecond));
      return;
    }
    this.timer.clear();
  }

  /** @internal A clock that throws: no waiter can be served; reject them all rather than hang. */
  private fail(error: unknown): void {
    for (let e = this.list.head; e !== undefined; ) {
      const next = e.next;
      if (e.kind === WAITER) {
        this.unlink(e);
        e.reject!(error);
      }
      e = next;
    }
    this.timer.clear();
  }

  /**
   * @internal The decision a granted waiter resolves with (`waitMs` 0), or a refused wait
   * carries (`retryAfterMs` the wait it would have had), at `units` now.
   */
  private decision(allowed: boolean, units: number, waitMs: number): Decision {
    const h = this.host;
    return {
      allowed,
      limit: h.capacity,
      remaining: wholeUnits(units, h.capacity),
      retryAfterMs: decisionMs(waitMs),
      resetAfterMs: decisionMs(msToRefill(h.capacity - units, h.ratePerSecond)),
    };
  }
}
