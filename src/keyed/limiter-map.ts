import { blockedDenial } from "../core/blocks.js";
import { RateLimitError } from "../core/errors.js";
import type { Receipt } from "../core/limiter.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  systemClock,
  type WaitOptions,
} from "../core/limiter.js";
import { BLOCK_BYTES, keyBytes } from "./engine.js";
import { WHERE } from "./options.js";
import { KeyCounters, type KeyedLimiterStats, SWEEP_EVERY } from "./stats.js";

/**
 * Entries looked at for idle ones when a new key arrives at the bound (the generic path
 * only drops idle keys, so it looks further than the slab's scan).
 */
const IDLE_SCAN = 32;
/** Entries one incremental sweep step looks at (each `isIdle` reads a clock). */
const CHUNK = 8;
/** Accounted bytes of one limiter object of a policy function or a subclass: an estimate. */
export const LIMITER_BYTES = 256;
/** `retryAfterMs` of a new key a full registry refuses with no key idle soonest to point to. */
export const REFUSED_RETRY_MS = 1000;

/**
 * The generic path of {@link KeyedLimiter}: a `Map<string, Limiter>`, one limiter per key, made by
 * `make(key)` (a policy function, or the policy's `clone()`). A key is kept only when its limiter
 * is not idle after the call that created it; one live Map iterator walks the incremental sweep.
 *
 * At the bound (`maxKeys`, or `maxBytes` counting each key and {@link LIMITER_BYTES} per limiter)
 * idle keys go first; a key in use is never dropped (an arbitrary limiter's state cannot be
 * bounded), so a new key that would take units is refused (`stats.refused`). `make` must not call
 * the registry for a key it does not hold (see {@link create}). @internal
 */
export class LimiterMap extends KeyCounters {
  private readonly map = new Map<string, Limiter>();
  /** @internal Keys with `wait` calls not yet settled, and how many: never dropped. */
  private readonly waits = new Map<string, number>();
  private iter: MapIterator<[string, Limiter]> | undefined;
  private countdown = SWEEP_EVERY;
  private bytes = 0;
  /**
   * @internal Blocked keys and when their block ends, on their limiter's clock (its `clock`, an
   * allOf's first part's, else `performance.now()`): each also keeps its limiter while blocked.
   */
  private readonly blocks = new Map<string, number>();
  /** @internal The key whose limiter `make` is making right now (the re-entrancy guard), else undefined. */
  private making: string | undefined = undefined;

  /** `maker` names `make` in the re-entrancy error: "the policy function" or "policy.clone()". */
  constructor(
    private readonly make: (key: string) => Limiter,
    private readonly maxKeys: number,
    private readonly maxBytes: number,
    private readonly maker = "the policy function",
  ) {
    super();
  }

  get size(): number {
    return this.map.size;
  }

  get stats(): KeyedLimiterStats {
    return this.statsWith(0, this.bytes);
  }

  /** `allow`; with `atMs`, as of that explicit time (`allowAt`: see {@link timed}). */
  allow(key: string, cost: number, atMs?: number): boolean {
    if (--this.countdown === 0) this.step();
    if (this.blocks.size !== 0 && this.blockedMs(key, atMs) > 0) return false;
    const limiter = this.map.get(key);
    if (limiter !== undefined) {
      return atMs === undefined ? limiter.allow(cost) : timed(limiter).allowAt(atMs, cost);
    }
    return this.decideNew(key, cost, atMs).allowed;
  }

  /** `consume` (`take`) or `peek` (which keeps nothing); with `atMs`, as of that explicit time. */
  decide(key: string, cost: number, take: boolean, atMs?: number): Decision {
    if (--this.countdown === 0) this.step();
    if (this.blocks.size !== 0 && this.blockedMs(key, atMs) > 0) {
      return this.blocked(key, cost, atMs);
    }
    const limiter = this.map.get(key);
    if (limiter !== undefined) return decide(limiter, cost, take, atMs);
    return take ? this.decideNew(key, cost, atMs) : decide(this.create(key), cost, false, atMs);
  }

  /**
   * @internal `consume` for a key without a limiter: a fresh one decides; it is kept when the
   * call left it in use, for which a full map must first make room (or refuse: nothing kept).
   */
  private decideNew(key: string, cost: number, atMs: number | undefined): Decision {
    const fresh = this.create(key);
    const refusal = this.refusal(key, fresh, cost, atMs);
    if (refusal !== undefined) return refusal;
    const decision = decide(fresh, cost, true, atMs);
    if (!fresh.isIdle()) this.insert(key, fresh);
    return decision;
  }

  /** See `KeyedLimiter.refund`: the key's limiter gives back; a key not held is left alone. */
  refund(key: string, cost: number): number {
    const limiter = this.map.get(key);
    if (limiter === undefined) return 0;
    if (typeof limiter.refund !== "function") {
      throw new TypeError(`${WHERE}.refund: the limiter of ${this.maker} has no refund()`);
    }
    const given = limiter.refund(cost);
    return typeof given === "number" ? given : cost;
  }

  /**
   * See `KeyedLimiter.charge`: the key's limiter's own `charge` (the key kept as `consume`
   * keeps it). A blocked key is denied, taking nothing.
   * @throws {TypeError} When the policy's limiters have no `charge()`.
   */
  charge(
    key: string,
    cost: number,
  ): { decision: Decision; receipt: Receipt | undefined; atMs: number } {
    if (--this.countdown === 0) this.step();
    if (this.blocks.size !== 0 && this.blockedMs(key) > 0) {
      const atMs = clockOf(this.map.get(key)!)();
      return { decision: this.blocked(key, cost), receipt: undefined, atMs };
    }
    let limiter = this.map.get(key);
    const fresh = limiter === undefined;
    limiter ??= this.create(key);
    if (typeof limiter.charge !== "function") {
      throw new TypeError(`${WHERE}.charge: the limiter of ${this.maker} has no charge()`);
    }
    const refusal = fresh ? this.refusal(key, limiter, cost) : undefined;
    if (refusal !== undefined) {
      return { decision: refusal, receipt: undefined, atMs: clockOf(limiter)() };
    }
    const receipt = limiter.charge(cost);
    if (fresh && !limiter.isIdle()) this.insert(key, limiter);
    const taken = receipt.units > 0 ? receipt : undefined;
    return { decision: receipt, receipt: taken, atMs: receipt.atMs };
  }

  /**
   * A refund through `receipt`, which the key's limiter issued: 0 when the key's limiter is
   * no longer the one that charged (it was dropped and made again: its units are gone).
   */
  refundReceipt(key: string, receipt: Receipt, units: number): number {
    const limiter = this.map.get(key);
    if (limiter === undefined || (receipt as { owner?: unknown }).owner !== limiter) return 0;
    return limiter.refund!(receipt, units);
  }

  /**
   * See `KeyedLimiter.block`: the key's limiter is kept (made first when the key has none)
   * while blocked, on its own clock.
   * @throws {RangeError} When the map is full of keys in use and cannot keep the key.
   */
  block(key: string, durationMs: number): void {
    let limiter = this.map.get(key);
    if (limiter === undefined) {
      const fresh = this.create(key);
      if (!this.makeRoom(key, BLOCK_BYTES)) {
        this.refused++;
        throw new RangeError(
          `${WHERE}.block: the registry is full (maxKeys or maxBytes) of keys in use and cannot keep this key`,
        );
      }
      this.insertKept(key, fresh);
      limiter = fresh;
    }
    const until = clockOf(limiter)() + durationMs;
    const had = this.blocks.get(key);
    if (had === undefined) this.bytes += BLOCK_BYTES;
    if (had === undefined || until > had) this.blocks.set(key, until);
  }

  /**
   * Milliseconds until the key's block ends (from its limiter's clock reading, or from the
   * later of `atMs` and that reading), 0 when not blocked (an ended block is lifted).
   */
  blockedMs(key: string, atMs?: number): number {
    const until = this.blocks.get(key);
    if (until === undefined) return 0;
    const limiter = this.map.get(key);
    let nowMs = limiter === undefined ? until : clockOf(limiter)();
    if (atMs !== undefined && atMs > nowMs) nowMs = atMs;
    const left = until - nowMs;
    if (left > 0) return left;
    this.lift(key);
    return 0;
  }

  /** Forgets the key's block and its bytes (`KeyedLimiter.unblock`). */
  lift(key: string): void {
    if (this.blocks.delete(key)) this.bytes -= BLOCK_BYTES;
  }

  /** @internal The denial of a blocked key (see `KeyedLimiter.block`). */
  private blocked(key: string, cost: number, atMs?: number): Decision {
    const ms = this.blockedMs(key, atMs);
    const limiter = this.map.get(key)!;
    const state = decide(limiter, cost, false, atMs);
    const reset = state.allowed ? decide(limiter, 0, false, atMs).resetAfterMs : state.resetAfterMs;
    return blockedDenial(state.limit, state.retryAfterMs, reset, ms);
  }

  /**
   * @internal The denial of a new `key` a full map cannot keep, when `fresh`, its limiter,
   * would allow `cost` (counted in `stats.refused`); undefined when the call may go on. Only
   * a full map must know first whether the call would keep the key.
   */
  private refusal(key: string, fresh: Limiter, cost: number, atMs?: number): Decision | undefined {
    if (!(cost > 0) || this.hasRoom(key)) return undefined;
    const peeked = decide(fresh, cost, false, atMs);
    if (!peeked.allowed || this.makeRoom(key)) return undefined;
    this.refused++;
    return { ...peeked, allowed: false, remaining: 0, retryAfterMs: REFUSED_RETRY_MS };
  }

  /**
   * `wait` on the key's limiter. A new key's limiter is kept only when the call took or
   * queued something (a rejected wait keeps nothing and evicts nobody). The key is not
   * dropped (swept or evicted) until its waits settle.
   */
  wait(key: string, cost: number, options: WaitOptions | undefined): Promise<Decision> {
    if (this.blocks.size !== 0 && this.blockedMs(key) > 0) {
      return Promise.reject(
        new RateLimitError(`${WHERE}.wait: the key is blocked`, this.blocked(key, cost)),
      );
    }
    let limiter = this.map.get(key);
    let promise: Promise<Decision>;
    if (limiter === undefined) {
      const fresh = this.create(key);
      const decision = fresh.peek(cost);
      // A cost above the limit never fits: the limiter's own wait would say so first.
      if (decision.retryAfterMs === Number.POSITIVE_INFINITY && cost > decision.limit) {
        return fresh.wait(cost, options);
      }
      if (!this.makeRoom(key)) {
        this.refused++;
        return Promise.reject(
          new RateLimitError(`${WHERE}.wait: the registry is full and cannot keep this key`, {
            ...decision,
            allowed: false,
          }),
        );
      }
      limiter = fresh;
      promise = limiter.wait(cost, options);
      if (!limiter.isIdle()) this.insert(key, limiter);
    } else {
      promise = limiter.wait(cost, options);
    }
    this.waits.set(key, (this.waits.get(key) ?? 0) + 1);
    const settled = () => {
      const n = this.waits.get(key)! - 1;
      if (n === 0) this.waits.delete(key);
      else this.waits.set(key, n);
    };
    promise.then(settled, settled);
    return promise;
  }

  /**
   * @internal `make(key)`, refusing a call made from inside `make` itself (a policy function
   * that calls the registry for a key it does not hold): that call throws a TypeError before it
   * changes anything, so the registry is as it was.
   */
  private create(key: string): Limiter {
    const making = this.making;
    if (making !== undefined) {
      const also =
        making === key ? "" : ` (while making the limiter of key ${JSON.stringify(making)})`;
      throw new TypeError(
        `${WHERE}: ${this.maker} called the registry re-entrantly for key ${JSON.stringify(key)}${also}`,
      );
    }
    this.making = key;
    try {
      return this.make(key);
    } finally {
      this.making = undefined;
    }
  }

  /** @internal True when the key may be dropped now: idle, not blocked, no `wait` of it pending. */
  private droppable(key: string, limiter: Limiter): boolean {
    return (
      limiter.isIdle() &&
      !this.waiting(key) &&
      (this.blocks.size === 0 || this.blockedMs(key) === 0)
    );
  }

  /** @internal True while a `wait` of the key is pending. */
  private waiting(key: string): boolean {
    return this.waits.size !== 0 && this.waits.has(key);
  }

  /** @internal Forgets the key's limiter, or resets it while a `wait` of it is pending. */
  private forget(key: string, limiter: Limiter): void {
    if (this.waiting(key)) limiter.reset();
    else this.delete(key);
  }

  /** Calls `visit` with every kept limiter (`reconfigure`: each carries its own state over). */
  forEach(visit: (limiter: Limiter) => void): void {
    for (const limiter of this.map.values()) visit(limiter);
  }

  reset(key: string): void {
    this.lift(key);
    // Forgotten, as on the slab, so its next request starts as a new key's (which, for a
    // bucket with initialTokens, is from that request on); one with waiters is reset.
    const limiter = this.map.get(key);
    if (limiter !== undefined) this.forget(key, limiter);
  }

  clear(): void {
    for (const key of [...this.blocks.keys()]) this.lift(key);
    for (const [key, limiter] of this.map) this.forget(key, limiter);
    this.iter = undefined;
  }

  /** @internal Deletes a key and its accounted bytes. */
  private delete(key: string): void {
    this.map.delete(key);
    this.bytes -= keyBytes(key) + LIMITER_BYTES;
  }

  /** @internal True when a new `key` fits under both bounds. */
  private hasRoom(key: string, extra = 0): boolean {
    return (
      this.map.size < this.maxKeys &&
      this.bytes + keyBytes(key) + LIMITER_BYTES + extra <= this.maxBytes
    );
  }

  /**
   * Drops every idle key, in a pass of its own: the incremental sweep's iterator stays where
   * it was (walking it here would move where the next incremental step begins).
   */
  sweep(): number {
    let dropped = 0;
    for (const [key, limiter] of this.map) {
      if (this.droppable(key, limiter)) {
        this.delete(key);
        dropped++;
      }
    }
    this.evictedIdle += dropped;
    return dropped;
  }

  /** @internal The next entry of the live sweep iterator, starting over at the end. */
  private next(): [string, Limiter] | undefined {
    let r = this.iter?.next();
    if (r === undefined || r.done === true) {
      this.iter = this.map.entries();
      r = this.iter.next();
    }
    return r.done === true ? undefined : r.value;
  }

  /** @internal The incremental sweep: the next {@link CHUNK} entries. */
  private step(): void {
    this.countdown = SWEEP_EVERY;
    this.dropIdle(CHUNK);
  }

  /** @internal Drops every idle limiter among the next `most` entries of the live iterator. */
  private dropIdle(most: number): void {
    const n = this.map.size < most ? this.map.size : most;
    for (let i = 0; i < n; i++) {
      const entry = this.next();
      if (entry === undefined) return;
      if (this.droppable(entry[0], entry[1])) {
        this.delete(entry[0]);
        this.evictedIdle++;
      }
    }
  }

  /** @internal Keeps a new key's limiter, making room first (idle keys only) when full. */
  private insert(key: string, limiter: Limiter): void {
    // A denied or free first request that left state (a policy that counts denials) is
    // kept only when there is room: it took nothing, so dropping it grants nothing.
    if (!this.makeRoom(key)) return;
    this.insertKept(key, limiter);
  }

  /** @internal Keeps a new key's limiter (room was made). */
  private insertKept(key: string, limiter: Limiter): void {
    this.map.set(key, limiter);
    this.bytes += keyBytes(key) + LIMITER_BYTES;
    this.created++;
  }

  /**
   * @internal True when a new `key` (and `extra` bytes) fits, after dropping, when it does not,
   * every idle limiter among the next {@link IDLE_SCAN} entries (skipping keys with pending waits).
   */
  private makeRoom(key: string, extra = 0): boolean {
    if (this.hasRoom(key, extra)) return true;
    this.dropIdle(IDLE_SCAN);
    return this.hasRoom(key, extra);
  }
}

/** The clock a key's limiter decides on: its `clock` when it has one, else `performance.now()`. */
function clockOf(limiter: Limiter): Clock {
  const own = limiter as { clock?: unknown; parts?: readonly { clock?: unknown }[] };
  // An allOf has no clock of its own: its first part's, as its own waiting reads it.
  const clock = own.clock ?? own.parts?.[0]?.clock;
  return typeof clock === "function" ? (clock as Clock) : systemClock;
}

/** A limiter that decides as of an explicit time: the built-in algorithms and `allOf`. */
interface TimedLimiter extends Limiter {
  allowAt(timeMs: number, cost?: number): boolean;
  consumeAt(timeMs: number, cost?: number): Decision;
  peekAt(timeMs: number, cost?: number): Decision;
}

/** `limiter` as one that decides at an explicit time; a TypeError for one without the `…At`s. */
function timed(limiter: Limiter): TimedLimiter {
  const t = limiter as Partial<TimedLimiter>;
  if (
    typeof t.allowAt !== "function" ||
    typeof t.consumeAt !== "function" ||
    typeof t.peekAt !== "function"
  ) {
    throw new TypeError(
      `${WHERE}: the policy's limiter has no allowAt, consumeAt and peekAt, so it cannot decide at an explicit time`,
    );
  }
  return limiter as TimedLimiter;
}

/** `consume` (`take` true) or `peek` of `limiter`, as of `atMs` when given. */
function decide(limiter: Limiter, cost: number, take: boolean, atMs: number | undefined): Decision {
  if (atMs === undefined) return take ? limiter.consume(cost) : limiter.peek(cost);
  const t = timed(limiter);
  return take ? t.consumeAt(atMs, cost) : t.peekAt(atMs, cost);
}
