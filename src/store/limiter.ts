import { BlockTable, blockedDenial } from "../core/blocks.js";
import { checkCost, describe, mustBe } from "../core/errors.js";
import type { Decision } from "../core/limiter.js";
import { wholeUnits } from "../core/numeric.js";
import { ChargeReceipt } from "../core/receipt.js";
import { Circuit, type CircuitSnapshot } from "./circuit.js";
import { RateLimitStoreError, StoreTimeoutError, StoreUnavailableError } from "./errors.js";
import { LOCAL_MAX_KEYS, type LocalLimiter } from "./local.js";
import type { StoreCommon } from "./options.js";
import {
  FAIL_CLOSED_RETRY_AFTER_MS,
  type FailureOutcome,
  type FailurePolicy,
  type StoreDecision,
  type StoreOperation,
  type StoreReceipt,
} from "./policy.js";

/** Most circuits kept by node; past it, keys of a new node share the client's circuit. */
export const MAX_NODE_CIRCUITS = 1024;

/**
 * Marks `decision` as the store's denial of a blocked key, `leftMs` from now: the store
 * limiter then records the block in its own table, so that its failure policies deny the
 * key too (a block another process set is learned this way).
 */
export function markBlocked<D extends Decision>(decision: D, leftMs: number): D {
  blockedLeftMs.set(decision, leftMs);
  return decision;
}
const blockedLeftMs = new WeakMap<Decision, number>();

/**
 * Marks `decision` as the store's answer to a charge it took: `mark` is what a refund through its
 * receipt sends back (a bucket's full time, a window's end or index, a log entry's leave time),
 * `atMs` the time it was decided at, `untilMs` when its units stop counting, `ledger` what else the
 * refund sends for the store to check (the state's incarnation and, for a bucket, the units
 * credited at the charge; `""` for none). {@link StoreLimiter.charge} turns it into the receipt.
 */
export function markCharge<D extends Decision>(
  decision: D,
  mark: number,
  atMs: number,
  untilMs: number,
  ledger = "",
): D {
  chargeMarks.set(decision, { mark, atMs, untilMs, ledger });
  return decision;
}
const chargeMarks = new WeakMap<
  Decision,
  { mark: number; atMs: number; untilMs: number; ledger: string }
>();

/**
 * The store-neutral half of a limiter whose state lives in a shared store: the key and
 * cost checks, the call timeout, one circuit breaker per store node, the pending-call cap,
 * the failure policy and the `onError`/`onRecover` hooks. A store (`RedisLimiter`)
 * supplies only how to name a key in the store ({@link storeKey}), how to send one
 * decision ({@link prepare}) and a reset ({@link prepareReset}), how to read the reply
 * ({@link decode}), and optionally which node serves a key ({@link nodeOf}).
 *
 * A call goes: check key and cost → prepare (may throw a programming error: rejected as
 * is) → the key's circuit admits it or not → send, with the timeout → decode → decision
 * with `source` the store's name. Any failure of the store (rejection, timeout, a reply
 * `decode` refuses), an open circuit and the pending cap are answered by the policy.
 */
export abstract class StoreLimiter<Store extends string, Key> {
  /** Longest wait per call, in milliseconds. */
  readonly timeoutMs: number;
  /** What happens when the store cannot answer (`'local'` unless set). */
  readonly failure: FailurePolicy;

  /** @internal The class name, for messages. */
  protected abstract readonly where: string;
  /** @internal `limit` or `capacity`, for open and closed decisions. */
  protected size: number;
  /** @internal */
  private readonly common: StoreCommon;
  /** @internal The store's name as a decision's source (`redis`). */
  private readonly store: Store;
  /** @internal The store's name in messages (`Redis`). */
  private readonly label: string;
  /** @internal The `'local'` policy's limiter, built at its first failure (not a caller's fallback). */
  protected localLimiter: LocalLimiter | undefined;
  /** @internal The circuit of a store without nodes, or of keys whose node is unknown. */
  private readonly mainCircuit: Circuit;
  /** @internal Circuits by node. */
  private readonly nodeCircuits = new Map<string, Circuit>();
  /** @internal mainCircuit serves nodes past {@link MAX_NODE_CIRCUITS}: circuits() keeps it. */
  private mainSharedWithNodes = false;
  /**
   * @internal The one table of this limiter's blocks (docs/semantics.md#blocks): every block
   * set through it, or seen in a reply, at once; consulted before the store on every call,
   * so the failure policies deny a blocked key too. On the local clock ({@link blockNow}).
   */
  protected readonly blocks = new BlockTable(LOCAL_MAX_KEYS);
  /**
   * @internal Under `'local'`, the keys the store last denied, with when it said they may
   * pass (the local clock, ms, as the block table): the local limiter keeps them denied until then, so a
   * store that fails (or refuses writes: a full Redis) hands a drained key no fresh budget.
   * At most {@link LOCAL_MAX_KEYS}, the oldest denial out first.
   */
  private readonly emptyUntil = new Map<string, number>();

  /** @internal Each argument fills the field of its name (`common`: the validated options). */
  protected constructor(store: Store, label: string, common: StoreCommon, size: number) {
    this.store = store;
    this.label = label;
    this.common = common;
    this.timeoutMs = common.timeoutMs;
    this.failure = common.failure;
    this.size = size;
    this.mainCircuit = new Circuit(undefined, common.circuit);
  }

  /** @internal The store's key for the caller's `key` (validated to be a string). */
  protected abstract storeKey(key: string): Key;
  /**
   * @internal Readies one decision call and returns the function that sends it (`charge`:
   * a `charge`, whose reply must carry what its receipt needs). Throwing here is a
   * programming error (a bad clock reading) and rejects the call as is; a rejection of the
   * returned promise is a store failure.
   */
  protected abstract prepare(
    where: string,
    key: Key,
    cost: number,
    take: boolean,
    charge: boolean,
  ): () => Promise<unknown>;
  /** @internal Readies the deletion of a key's state. */
  protected abstract prepareReset(key: Key): () => Promise<unknown>;
  /** @internal Builds the same algorithm in memory, bounded, for `failure: 'local'`. */
  protected abstract makeLocal(): LocalLimiter;
  /** @internal Builds the decision from the store's reply. @throws {TypeError} on a malformed reply. */
  protected abstract decode(reply: unknown, cost: number): Decision;
  /** @internal The node that serves `key`, or `undefined` (one circuit for the whole client). */
  protected nodeOf(_key: Key): string | undefined {
    return undefined;
  }

  /**
   * @internal The local clock of the block table: the limiter's explicit clock, else
   * `performance.now()` (a block's end is kept as `now + durationMs` on it).
   */
  protected abstract blockNow(): number;

  /**
   * @internal Records in the block table that `key` is blocked for `durationMs` from now
   * (extending a block in place, never shortening it). False when the table is full.
   */
  protected recordBlock(key: string, durationMs: number): boolean {
    const now = this.blockNow();
    return this.blocks.block(key, now + durationMs, now);
  }

  /**
   * Milliseconds until the block this process knows of `key` ends (set through this
   * limiter, or seen in the store's answer for it); 0 when none. Changes nothing.
   * @throws {TypeError} For a non-string key.
   */
  blockedMs(key: string): number {
    this.checkKey(`${this.where}.blockedMs`, key);
    return this.blocks.size === 0 ? 0 : this.blocks.blockedMs(key, this.blockNow());
  }

  /**
   * `consume(key, cost).allowed`: resolves true when the request may proceed (its cost
   * was taken). Rejects like {@link consume}.
   */
  async allow(key: string, cost?: number): Promise<boolean> {
    return (await this.call("allow", key, cost, true)).allowed;
  }

  /**
   * Takes `cost` units from `key`'s shared state when they are available, atomically in the store,
   * and resolves with the decision; a denied request changes nothing. Rejects with `TypeError` for
   * a non-string key or a non-number cost, `RangeError` for NaN, a negative or an infinite cost,
   * and {@link RateLimitStoreError} when the store cannot answer and the policy is `'throw'`.
   */
  consume(key: string, cost?: number): Promise<StoreDecision<Store>> {
    return this.call("consume", key, cost, true);
  }

  /**
   * What `consume(key, cost)` would answer now; takes nothing and sets no expiry (the
   * sliding log may drop entries that already left, which changes no decision).
   */
  peek(key: string, cost?: number): Promise<StoreDecision<Store>> {
    return this.call("peek", key, cost, false);
  }

  /**
   * Deletes `key`'s state: back to fresh. Also resets the key in the local limiter (`'local'` or a
   * fallback). Rejects with {@link RateLimitStoreError} when the store fails or the key's circuit
   * is open, whatever the policy (a reset that did not happen must not pass silently).
   */
  async reset(key: string): Promise<void> {
    const where = `${this.where}.reset`;
    const k = this.checkKey(where, key);
    const policy = this.failure;
    if (typeof policy === "object") policy.reset(key);
    else this.localLimiter?.reset(key);
    if (this.blocks.size !== 0) this.blocks.unblock(key, this.blockNow());
    this.emptyUntil.delete(key);
    await this.write("reset", key, k, this.prepareReset(k));
  }

  /**
   * @internal Sends one write that is not a decision (a reset, a refund, a block) through the
   * key's circuit, with the timeout, once (never again: it may have run), rejecting as
   * {@link reset} says whatever the policy.
   */
  protected async write(
    operation: "reset" | "refund" | "block",
    key: string,
    k: Key,
    send: () => Promise<unknown>,
  ): Promise<unknown> {
    const where = `${this.where}.${operation}`;
    const circuit = this.circuitOf(k);
    const admission = circuit.admit();
    if (admission === "circuit-open" || admission === "pending-cap") {
      circuit.answeredByPolicy();
      throw this.storeError(where, this.unavailable(admission, circuit));
    }
    let reply: unknown;
    try {
      reply = await this.timed(send(), circuit);
    } catch (cause) {
      const opened = circuit.failed(admission === "probe");
      circuit.answeredByPolicy();
      const error = this.storeError(where, cause);
      const node = circuit.node; // a circuit that opened is reported (onError), once
      if (opened) this.common.onError?.({ error, operation, key, outcome: "throw", node });
      throw error;
    }
    this.answered(operation, circuit);
    return reply;
  }

  /**
   * The circuits as plain data, for metrics and health checks: the client's one circuit
   * (`node: undefined`) first, then one per node seen. On a cluster the client's circuit serves
   * only the calls made while the slot table was unknown; once node circuits exist it is left out
   * while it is closed with no call pending and no failure counted (so metrics show no `node=""`
   * beside the nodes), unless it serves the nodes past {@link MAX_NODE_CIRCUITS}.
   */
  circuits(): CircuitSnapshot[] {
    const main = this.mainCircuit;
    const keepMain =
      this.nodeCircuits.size === 0 ||
      this.mainSharedWithNodes ||
      main.state !== "closed" ||
      main.pendingCalls > 0 ||
      main.consecutiveFailures > 0 ||
      main.failedCalls > 0;
    const circuits = [...this.nodeCircuits.values()];
    return (keepMain ? [main, ...circuits] : circuits).map((c) => c.snapshot());
  }

  /** @internal */
  protected checkKey(where: string, key: unknown): Key {
    if (typeof key !== "string") throw mustBe(where, "key", "a string", key, TypeError);
    return this.storeKey(key);
  }

  /** @internal The circuit of the node that serves `key`. */
  private circuitOf(key: Key): Circuit {
    const node = this.nodeOf(key);
    if (node === undefined) return this.mainCircuit;
    let circuit = this.nodeCircuits.get(node);
    if (circuit === undefined) {
      // Nodes are few; a nodeOf that names something per key must not grow this map.
      if (this.nodeCircuits.size >= MAX_NODE_CIRCUITS) {
        this.mainSharedWithNodes = true;
        return this.mainCircuit;
      }
      circuit = new Circuit(node, this.common.circuit);
      this.nodeCircuits.set(node, circuit);
    }
    return circuit;
  }

  /** @internal */
  private async call(
    operation: "allow" | "consume" | "peek",
    key: string,
    cost: number | undefined,
    take: boolean,
    charge = false,
  ): Promise<StoreDecision<Store>> {
    const where = `${this.where}.${operation}`;
    const k = this.checkKey(where, key);
    const c = checkCost(where, cost);
    // A block this process knows denies whatever the store remembers (a key evicted, a
    // failover) and whichever policy answers: the store is only asked to peek (its own
    // block then gives the exact denial), and one it no longer has is set again.
    const blockedLeft = this.blocks.size === 0 ? 0 : this.blocks.blockedMs(key, this.blockNow());
    if (blockedLeft > 0) take = false;
    const send = this.prepare(where, k, c, take, charge && take);
    const circuit = this.circuitOf(k);
    const admission = circuit.admit();
    if (admission === "circuit-open" || admission === "pending-cap") {
      circuit.answeredByPolicy();
      return this.answer(operation, key, c, take, circuit, false, () =>
        this.unavailable(admission, circuit),
      );
    }
    let decision: Decision;
    try {
      decision = this.decode(await this.timed(send(), circuit), c);
    } catch (cause) {
      const opened = circuit.failed(admission === "probe");
      circuit.answeredByPolicy();
      return this.answer(operation, key, c, take, circuit, opened, () => cause);
    }
    this.answered(operation, circuit);
    if (this.failure === "local") this.remember(key, decision);
    const left = blockedLeftMs.get(decision);
    if (left !== undefined && left > 0) this.recordBlock(key, left);
    else if (blockedLeft > 0) {
      this.reassertBlock(key, k, blockedLeft);
      return this.blockedHere(decision, blockedLeft);
    }
    const answer: StoreDecision<Store> = { ...decision, source: this.store };
    const marks = chargeMarks.get(decision);
    if (marks !== undefined) chargeMarks.set(answer, marks);
    return answer;
  }

  /** @internal Keeps (or forgets) when the store said `key` may pass again. */
  private remember(key: string, decision: Decision): void {
    const emptyUntil = this.emptyUntil;
    if (decision.allowed) {
      if (emptyUntil.size > 0) emptyUntil.delete(key);
      return;
    }
    if (!(decision.retryAfterMs > 0)) return;
    emptyUntil.delete(key); // re-inserted last: the oldest denial goes first
    if (emptyUntil.size >= LOCAL_MAX_KEYS) {
      const oldest = emptyUntil.keys().next();
      if (oldest.done !== true) emptyUntil.delete(oldest.value);
    }
    emptyUntil.set(key, this.blockNow() + decision.retryAfterMs);
  }

  /**
   * `consume(key, cost)` with a receipt (docs/semantics.md#refunds): the decision, its
   * `source`, the key, and what the store took and when, for `refund(receipt, units?)`. A
   * charge the failure policy answered (`source` not the store) takes nothing from the
   * store, and its receipt gives nothing back. Rejects like {@link consume}.
   */
  async charge(key: string, cost?: number): Promise<StoreReceipt<Store>> {
    const decision = await this.call("consume", key, cost, true, true);
    const c = cost === undefined ? 1 : cost;
    const marks = chargeMarks.get(decision);
    const atMs = marks?.atMs ?? this.blockNow();
    const epoch = this.receiptEpoch;
    const m = decision.allowed && c !== 0 && decision.source === this.store ? marks : undefined;
    const receipt =
      m === undefined
        ? new ChargeReceipt(decision, key, 0, atMs, atMs, this, epoch, 0, 0, undefined)
        : new ChargeReceipt(decision, key, c, atMs, m.untilMs, this, epoch, m.mark, 0, undefined);
    const ledger = m === undefined ? "" : m.ledger;
    return Object.assign(receipt, { ledger, source: decision.source });
  }

  /** @internal Moved by `reconfigure`: receipts from before give nothing back. */
  protected receiptEpoch = 0;

  /**
   * @internal The denial of a key the block table holds, `leftMs` more, from `state` (what
   * its state alone answers, as peeked), as `KeyedLimiter` denies a blocked key
   * (`source: 'local'`: the table decided).
   */
  private blockedHere(state: Decision | undefined, leftMs: number): StoreDecision<Store> {
    const limit = state?.limit ?? this.size;
    const d = blockedDenial(limit, state?.retryAfterMs ?? 0, state?.resetAfterMs ?? 0, leftMs);
    return { ...d, source: "local" };
  }

  /** @internal Sets again a block this process set or saw that the store lost (RedisLimiter). */
  protected reassertBlock(_key: string, _k: Key, _leftMs: number): void {}

  /**
   * @internal The store's promise, rejected with a {@link StoreTimeoutError} after `timeoutMs`; the
   * circuit counts the call pending until the store itself settles it. The timer's rejection waits
   * one turn of the event loop (`setImmediate`): after a blocked event loop the timer phase runs
   * before the poll phase, so a reply already in the socket would otherwise lose to the timer, and
   * a call Redis answered (and charged) would be answered again by the policy.
   */
  private timed(call: Promise<unknown>, circuit: Circuit): Promise<unknown> {
    const timeoutMs = this.timeoutMs;
    const label = this.label;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        setImmediate(() => reject(new StoreTimeoutError(timeoutMs, label)));
      }, timeoutMs);
      // A pending limiter call must not hold the process open on its own.
      if (typeof timer === "object" && typeof timer.unref === "function") timer.unref();
      call.then(
        (reply) => {
          circuit.settled();
          clearTimeout(timer);
          resolve(reply);
        },
        (error: unknown) => {
          circuit.settled();
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /** @internal The cause for a call that was not sent. */
  private unavailable(admission: "circuit-open" | "pending-cap", circuit: Circuit): Error {
    const on = circuit.node === undefined ? "" : ` on ${circuit.node}`;
    const message =
      admission === "circuit-open"
        ? `circuit open${on} after ${circuit.consecutiveFailures} consecutive failures`
        : `${circuit.pendingCalls} calls already pending${on} (maxPendingCalls)`;
    return new StoreUnavailableError(message, admission, circuit.node);
  }

  /** @internal */
  private storeError(where: string, cause: unknown): RateLimitStoreError {
    const timedOut = cause instanceof StoreTimeoutError;
    const detail = cause instanceof Error ? cause.message : describe(cause);
    const message =
      timedOut || cause instanceof StoreUnavailableError
        ? `${where}: ${detail}`
        : `${where}: ${this.label} failed: ${detail}`;
    return new RateLimitStoreError(message, { cause, operation: where, timedOut });
  }

  /** @internal The store answered in time: closes the circuit, reporting the transition. */
  private answered(operation: StoreOperation, circuit: Circuit): void {
    const failedCalls = circuit.succeeded();
    if (failedCalls === undefined) return;
    this.common.onRecover?.({ operation, failedCalls, node: circuit.node });
  }

  /** @internal The policy's answer for a call the store did not answer. */
  private answer(
    operation: "allow" | "consume" | "peek",
    key: string,
    cost: number,
    take: boolean,
    circuit: Circuit,
    opened: boolean,
    cause: () => unknown,
  ): StoreDecision<Store> {
    const policy = this.failure;
    const outcome: FailureOutcome = typeof policy === "object" ? "local" : policy;
    const blockedLeft = this.blocks.size === 0 ? 0 : this.blocks.blockedMs(key, this.blockNow());
    if (opened || policy === "throw") {
      const error = this.storeError(`${this.where}.${operation}`, cause());
      if (opened) this.common.onError?.({ error, operation, key, outcome, node: circuit.node });
      if (policy === "throw") throw error;
    }
    if (policy === "open" || policy === "closed") {
      // A known block denies under every policy ('open' included): nothing is taken.
      if (blockedLeft > 0) return this.blockedHere(undefined, blockedLeft);
      const open = policy === "open";
      return {
        allowed: open,
        limit: this.size,
        remaining: open ? wholeUnits(this.size - cost, this.size) : 0,
        retryAfterMs: open ? 0 : FAIL_CLOSED_RETRY_AFTER_MS,
        resetAfterMs: 0,
        source: policy,
      };
    }
    const local = typeof policy === "object" ? policy : (this.localLimiter ??= this.makeLocal());
    if (blockedLeft > 0) return this.blockedHere(local.peek(key, cost), blockedLeft);
    if (policy === "local" && this.emptyUntil.size > 0) {
      const until = this.emptyUntil.get(key);
      if (until !== undefined) {
        const waitMs = until - this.blockNow();
        if (waitMs > 0) {
          // The store said this key is empty until then: failing changes nothing about it.
          const d = local.peek(key, cost);
          return {
            ...d,
            allowed: false,
            remaining: 0,
            retryAfterMs: d.retryAfterMs > waitMs ? d.retryAfterMs : waitMs,
            source: "local",
          };
        }
        this.emptyUntil.delete(key);
      }
    }
    const decision = take ? local.consume(key, cost) : local.peek(key, cost);
    return { ...decision, source: "local" };
  }
}
