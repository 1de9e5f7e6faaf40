import { fits } from "../../core/numeric.js";
import type { LeaseGrant, LeaseRequest } from "./exchange.js";

/**
 * The shared bucket of one key, as the lease script keeps it (src/redis/lua/lease.ts mirrors
 * this file operation for operation): a token bucket that may go below zero (charges), plus
 * the processes contending for it and what each is entitled to. `MemoryLeaseStore` and the
 * lease simulator run it; the script's tests compare the two.
 * @module
 */

/** A process that did not get all it wanted at its last exchange of the key. */
export interface Contender {
  /** Its demand for the key, tokens per second (its weight in the fair share). */
  demand: number;
  /** Tokens of the bucket set aside for it (from its fair share of the refill). */
  entitled: number;
  /** Most tokens it may have set aside: the most it wanted while contending (at least what it needed). */
  most: number;
  /** Dropped after this time (ms) unless it asks again. */
  untilMs: number;
}

/** One key's shared bucket. */
export interface BucketState {
  /** Tokens now; below zero while charges are being repaid. */
  tokens: number;
  /** The time `tokens` was counted at (ms). */
  anchorMs: number;
  /** The contenders by process id. */
  readonly contenders: Map<string, Contender>;
  /** When the key's block ends (ms); -Infinity: not blocked. */
  blockedUntilMs: number;
  /** When the key's block was last lifted (ms); -Infinity: no mark kept. */
  liftedAtMs: number;
  /** The lift's mark is kept until then (ms): the end of the block it lifted, at least. */
  liftKeptUntilMs: number;
  /** The last call each process ran on the key, while it could still run again. */
  readonly calls: Map<string, CallRecord>;
}

/**
 * The last call a process ran on a key and its answer, kept until the call's deadline
 * (the latest time it could run again), so that a call run twice is answered, not applied,
 * twice ({@link repeated}).
 */
export interface CallRecord {
  /** The call's sequence number (LeaseStore.exchange). */
  readonly sequence: number;
  /** Kept until then (ms): the call's deadline. */
  readonly untilMs: number;
  /** The answer it was given. */
  readonly answer: KeyExchange;
}

/** The bucket's configuration. */
export interface BucketConfig {
  readonly capacity: number;
  readonly refillPerSecond: number;
  /**
   * A contender that does not ask again within this many ms (plus twice the time its fair
   * share takes to cover what it needs) is dropped, and what was set aside for it is free.
   */
  readonly staleMs: number;
}

/** The longest wait a contender is kept for beyond `staleMs` (twice this at most): 366 days. */
export const MAX_CONTENDER_WAIT_MS = 31_622_400_000;

/** A fresh (full) bucket at `nowMs`. */
export function freshBucket(capacity: number, nowMs: number): BucketState {
  return {
    tokens: capacity,
    anchorMs: nowMs,
    contenders: new Map(),
    blockedUntilMs: Number.NEGATIVE_INFINITY,
    liftedAtMs: Number.NEGATIVE_INFINITY,
    liftKeptUntilMs: Number.NEGATIVE_INFINITY,
    calls: new Map(),
  };
}

/**
 * True when `state` at `nowMs` holds nothing a fresh bucket would not: full, no contender,
 * no block, no lift's mark, no call record (the lease script then keeps no key).
 */
export function holdsNothing(state: BucketState, capacity: number, nowMs: number): boolean {
  return (
    state.tokens >= capacity &&
    state.contenders.size === 0 &&
    !(state.blockedUntilMs > nowMs) &&
    !(state.liftKeptUntilMs > nowMs) &&
    state.calls.size === 0
  );
}

/**
 * The answer to call `sequence` of `processId` on this key when the key ran that call or a
 * later one of the process already (a client that runs a call twice: LeaseStore.exchange),
 * else undefined: run it. The call it ran is answered as it was; an older one (its caller
 * stopped waiting for it long ago) is answered with nothing granted and changes nothing.
 * Drops the records whose call can no longer run (past `nowMs`).
 */
export function repeated(
  state: BucketState,
  processId: string,
  sequence: number,
  nowMs: number,
): KeyExchange | undefined {
  const calls = state.calls;
  if (calls.size === 0) return undefined;
  for (const [id, c] of calls) if (c.untilMs < nowMs) calls.delete(id);
  const last = calls.get(processId);
  if (last === undefined || last.sequence < sequence) return undefined;
  if (last.sequence === sequence) return last.answer;
  return { ...last.answer, granted: 0, waitMs: 0, back: 0 };
}

/**
 * Applies `change` to the key's block at `t` (ms), after dropping an ended block and a lift's
 * mark past its time: returns the ms the key stays blocked (0: not blocked).
 */
export function applyBlock(state: BucketState, change: LeaseRequest["block"], t: number): number {
  if (!(state.blockedUntilMs > t)) state.blockedUntilMs = Number.NEGATIVE_INFINITY;
  if (!(state.liftKeptUntilMs > t)) {
    state.liftedAtMs = Number.NEGATIVE_INFINITY;
    state.liftKeptUntilMs = Number.NEGATIVE_INFINITY;
  }
  if (change !== undefined) {
    const end = t + change.ms;
    if (change.op === "lift") {
      // The mark is kept until the lifted block would have ended, or `ms` from now.
      let kept = state.blockedUntilMs > end ? state.blockedUntilMs : end;
      if (state.liftKeptUntilMs > kept) kept = state.liftKeptUntilMs;
      state.blockedUntilMs = Number.NEGATIVE_INFINITY;
      if (kept > t) {
        state.liftedAtMs = t;
        state.liftKeptUntilMs = kept;
      }
    } else if (change.op === "block" ? end > state.blockedUntilMs : !(state.blockedUntilMs > t)) {
      state.blockedUntilMs = end;
    }
  }
  return state.blockedUntilMs > t ? state.blockedUntilMs - t : 0;
}

/**
 * Max-min fair shares of `rate` among `demands` (water-filling, as Doorman's FAIR_SHARE):
 * each gets its demand when that is below an equal share of what is left, and what they
 * leave is split equally among the others. Returns the shares in the order given.
 */
export function fairShares(rate: number, demands: readonly number[]): number[] {
  const order = demands
    .map((_, i) => i)
    .sort((a, b) => (demands[a] as number) - (demands[b] as number) || a - b);
  const shares = new Array<number>(demands.length).fill(0);
  let left = rate;
  let count = demands.length;
  for (const i of order) {
    const equal = left / count;
    const demand = demands[i] as number;
    const share = demand < equal ? demand : equal; // (NaN-free: demands are > 0)
    shares[i] = share;
    left -= share;
    count--;
  }
  return shares;
}

/** What {@link exchangeKey} answers: the grant, and how much of the give-back was taken. */
export interface KeyExchange extends LeaseGrant {
  /** Tokens of `give` the bucket took back (the rest would have passed capacity). */
  readonly back: number;
  /** Ms until the key's block ends (0: not blocked). */
  readonly blockedMs: number;
  /** Ms since the key's block was lifted, while the mark is kept (Infinity: none). */
  readonly liftedAgoMs: number;
}

/**
 * One key's part of an exchange at `nowMs` for process `processId`, in this order:
 * 0. the block: `request.block` applied ({@link applyBlock}); a blocked key is answered as
 *    if it wanted nothing (nothing granted, `waitMs` 0), its give-back and charge applied;
 * 1. refill (the anchor never moves back); the part of the refill above zero is set aside
 *    for the contenders, each its max-min fair share of `refillPerSecond` by their demands,
 *    up to what each may have set aside; the rest is free;
 * 2. take back `give` (never above capacity); 3. take `charge` whatever the bucket holds
 *    (it may go below zero: later refills repay it before anything is set aside or granted);
 * 4. when `want` > 0: up to `want` of what is set aside for it plus what is free, when
 *    `need` fits, else nothing; one that got less than it wanted is (or stays) a contender.
 * `waitMs`: until this process could get `need` (0: now; a debt at the whole refill, then
 * its share plus the unclaimed part, or until full). A request that asks anything is kept
 * as call `sequence` until `keepUntilMs`, for {@link repeated}, which the caller asks first.
 */
export function exchangeKey(
  state: BucketState,
  request: LeaseRequest,
  processId: string,
  nowMs: number,
  config: BucketConfig,
  sequence: number,
  keepUntilMs: number,
): KeyExchange {
  const { capacity, refillPerSecond: rate } = config;
  const t = nowMs > state.anchorMs ? nowMs : state.anchorMs;
  const blockedMs = applyBlock(state, request.block, t);
  // Infinity when no lift is marked (liftedAtMs -Infinity, t finite).
  const liftedAgoMs = t > state.liftedAtMs ? t - state.liftedAtMs : 0;
  // A blocked key takes nothing: no lease for a key no process may admit.
  const want = blockedMs > 0 ? 0 : request.want;
  const need = blockedMs > 0 ? 0 : request.need;
  const contenders = state.contenders;
  for (const [id, c] of contenders) if (c.untilMs < t) contenders.delete(id);
  const refilled = state.tokens + ((t - state.anchorMs) * rate) / 1000;
  const tokens0 = state.tokens;
  let tokens = refilled < capacity ? refilled : capacity;
  const above = (tokens > 0 ? tokens : 0) - (tokens0 > 0 ? tokens0 : 0);
  // A full bucket wastes its refill: what is set aside does not hold it back (when the
  // contenders' needs add up to more than the capacity, their shares could never all cover
  // them). Whoever asks then may take any of it; the others keep their part of the rest.
  const full = tokens >= capacity;
  if (!full && above > 0 && contenders.size > 0 && rate > 0) {
    const list = [...contenders.values()];
    const shares = fairShares(
      rate,
      list.map((c) => c.demand),
    );
    for (let i = 0; i < list.length; i++) {
      const c = list[i] as Contender;
      const e = c.entitled + (above * (shares[i] as number)) / rate;
      c.entitled = e < c.most ? e : c.most;
    }
  }
  let back = 0;
  if (request.give > 0 && tokens < capacity) {
    back = request.give < capacity - tokens ? request.give : capacity - tokens;
    tokens += back;
  }
  if (request.charge > 0) tokens -= request.charge;
  // What is set aside never exceeds what the bucket holds.
  const holds = tokens > 0 ? tokens : 0;
  const reserved = fitEntitled(contenders, holds);
  let granted = 0;
  let waitMs = 0;
  if (want > 0) {
    let mine = contenders.get(processId);
    const own = mine === undefined ? 0 : mine.entitled;
    const free = holds - reserved;
    const available = full ? holds : own + (free > 0 ? free : 0);
    if (fits(need, available)) {
      granted = want < available ? want : available;
      if (granted < 0) granted = 0;
      tokens -= granted;
      if (mine !== undefined) mine.entitled = own > granted ? own - granted : 0;
      // Taken from a full bucket beyond its own part: the others' parts shrink to fit.
      fitEntitled(contenders, tokens > 0 ? tokens : 0);
    }
    if (granted < want && rate > 0) {
      if (mine === undefined) {
        mine = { demand: 0, entitled: 0, most: 0, untilMs: 0 };
        contenders.set(processId, mine);
      }
      mine.demand = request.demand;
      // What it may have set aside: the most it asked for while contending (a request that
      // asks a little less, with tokens still in hand, does not cut it).
      const most = want > need ? want : need;
      if (most > mine.most) mine.most = most;
    } else if (mine !== undefined) {
      contenders.delete(processId);
      mine = undefined;
    }
    const left = available - granted;
    if (!fits(need, left)) {
      // Counted from what is set aside for it alone: the free part may be gone by then.
      const own = mine === undefined ? 0 : mine.entitled;
      const short = need - (own < left ? own : left > 0 ? left : 0);
      waitMs = waitFor(short, tokens, processId, request.demand, contenders, rate);
      // ... or until the bucket is full, when whoever asks may take it.
      if (rate > 0 && need <= capacity) {
        const fullMs = ((capacity - tokens) * 1000) / rate;
        if (fullMs < waitMs) waitMs = fullMs;
      }
    }
    // Kept while it keeps asking: for staleMs, plus twice the wait it was given.
    if (mine !== undefined) {
      const wait = waitMs < MAX_CONTENDER_WAIT_MS ? waitMs : MAX_CONTENDER_WAIT_MS;
      mine.untilMs = t + config.staleMs + 2 * wait;
    }
  }
  state.tokens = tokens;
  state.anchorMs = t;
  const answer = { granted, waitMs, tokens, back, blockedMs, liftedAgoMs };
  const asks =
    request.give > 0 || request.charge > 0 || request.want > 0 || request.block !== undefined;
  if (asks && keepUntilMs >= nowMs) {
    state.calls.set(processId, { sequence, untilMs: keepUntilMs, answer });
  }
  return answer;
}

/** Scales what is set aside down to at most `holds` in all; returns the total set aside. */
function fitEntitled(contenders: Map<string, Contender>, holds: number): number {
  let reserved = 0;
  for (const c of contenders.values()) reserved += c.entitled;
  if (!(reserved > holds)) return reserved;
  const scale = holds / reserved;
  for (const c of contenders.values()) c.entitled *= scale;
  return holds;
}

/**
 * Ms until `short` more tokens are there for `processId`: the bucket's debt (tokens below
 * zero) first, at the whole refill rate, then `short` at this process's fair share (with
 * its `demand`, beside the other contenders) plus the part of the refill nobody claims.
 */
function waitFor(
  short: number,
  tokens: number,
  processId: string,
  demand: number,
  contenders: Map<string, Contender>,
  rate: number,
): number {
  if (!(rate > 0)) return Number.POSITIVE_INFINITY;
  const debtMs = tokens < 0 ? (-tokens * 1000) / rate : 0;
  const demands = [demand];
  for (const [id, c] of contenders) if (id !== processId) demands.push(c.demand);
  const shares = fairShares(rate, demands);
  let claimed = 0;
  for (const s of shares) claimed += s;
  const perSecond = (shares[0] as number) + (rate - claimed);
  if (!(perSecond > 0)) return Number.POSITIVE_INFINITY;
  return debtMs + (short * 1000) / perSecond;
}
