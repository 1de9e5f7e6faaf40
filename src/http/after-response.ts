/**
 * After the response: `refundIf(status, request)` and the per-request handle (`refund`,
 * `charge`, `settle`) of every middleware, refunding through the receipts of the charges
 * (docs/semantics.md#refunds). The adapters only say when the status is known (a node
 * response's `finish`, or its `close` first: an aborted request). The rules:
 * docs/http.md#refunds-and-charges-after-the-response.
 * @module
 */
import type { ServerResponse } from "node:http";
import { checkNumber, describe } from "../core/errors.js";
import type { Decision, Receipt } from "../core/limiter.js";
import { type CommonConfig, isThenable, type KeyedConsumer, report } from "./core.js";
import type { Outcome } from "./pipeline.js";

/**
 * The status `refundIf` sees, with `refundAborted`, for a request whose connection closed before
 * its response was complete (the client went away, or the handler destroyed it): nginx's 499.
 */
export const ABORTED_STATUS = 499;

/** The after-response options every adapter has, typed on its request (or context). */
export interface AfterResponseOptions<Req> {
  /**
   * Called once the response is over, for each request the limiter charged: true gives back
   * what the request took (its cost, plus what `charge` added, less what `refund` gave back
   * already), through the receipts of those charges, so units of a window that has ended are
   * not given back to the next one. `status` is the response's status code. A request whose
   * client went away before its response was complete is not asked about: it stays charged
   * (its handler ran, and a client that hangs up must not get its requests free), unless
   * `refundAborted` is set. The rate-limit headers already sent stay as sent. It needs a limiter
   * with `refund` (a `KeyedLimiter`, a Redis limiter, or one unkeyed tollgate limiter). A throw
   * is a programming error, reported to `onError`; nothing is refunded. See
   * docs/http.md#refunds-and-charges-after-the-response.
   * @example
   * refundIf: (status) => status < 400 // count only failed logins
   */
  readonly refundIf?: ((status: number, request: Req) => boolean) | undefined;
  /**
   * Also ask `refundIf` about a request whose client went away before its response was
   * complete, with status {@link ABORTED_STATUS} (499). Off by default: such a request
   * stays charged, so that a client that sends requests and hangs up cannot run handlers
   * without limit. Turn it on only when your handlers stop as soon as the client goes away.
   * @default false
   */
  readonly refundAborted?: boolean | undefined;
}

/** The per-request handle of a middleware: what a handler may do once it knows the real cost. */
export interface RequestCharges<Handle> {
  /**
   * Gives back `units` (default: all that is left) of what the request took, at most what it
   * took (its cost plus what {@link charge} added, less what was given back already), so a
   * handler cannot give back other requests' units; through the receipts of its charges (newest
   * first), so nothing comes back for a window that has ended. A request the middleware did not
   * charge (skipped, limited, or let through while the limiter failed) gives back nothing.
   * @throws {TypeError} If `units` is not a number, or the limiter has no `refund`.
   * @throws {RangeError} If `units` is NaN, negative or infinite.
   */
  refund(request: Handle, units?: number): void;
  /**
   * Takes `units` more under the request's key (the real cost was higher: an LLM answer
   * longer than expected) and returns the limiter's decision. When they do not fit, nothing
   * is taken (a limiter never goes over its limit): to always count the real cost, take the
   * most it can be as `cost` and give the rest back with {@link refund}. `undefined` for a
   * request the middleware did not charge.
   * @throws {TypeError} If `units` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(request: Handle, units: number): Decision | PromiseLike<Decision> | undefined;
  /**
   * Settles the request's charge once its real cost is known: the safe way to count a cost
   * known only at the end (charge the most it can be as `cost`, settle after). Gives back
   * what it took beyond `actualUnits` ({@link refund}), or takes what it cost beyond what it
   * took ({@link charge}, whose decision it returns). `undefined` when it gave back, or for
   * a request the middleware did not charge. See docs/http.md#refunds-and-charges-after-the-response.
   * @throws {TypeError} If `actualUnits` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  settle(request: Handle, actualUnits: number): Decision | PromiseLike<Decision> | undefined;
}

/** Own properties only: a prototype's (or Object.prototype's) value is no handle's. */
const hasOwn = Object.prototype.hasOwnProperty;

/**
 * A value kept for each request handle (the request, or the framework's context) as long as the
 * handle lives: on the handle, under a symbol of this slot's own, or, for a handle that takes
 * no new property (frozen, sealed, or a host object that refuses), in a `WeakMap`. Not a
 * `WeakMap` for every request: an entry per request makes the garbage collector trace an
 * ephemeron per request (about 1 µs of CPU a request on node:http, and in some processes a
 * path about 3 µs slower for good); a property of one name is one hidden-class transition
 * that every request shares.
 */
export class HandleSlot<T> {
  /** @internal */
  private readonly name: symbol;
  /** @internal Handles that refused the property. */
  private refused: WeakMap<object, T> | undefined;

  constructor(description: string) {
    this.name = Symbol(description);
  }

  /** Keeps `value` for `handle`, replacing any value it had. */
  set(handle: object, value: T): void {
    const name = this.name;
    try {
      // A handle frozen after its first value still has the property: not a new one.
      if (Object.isExtensible(handle) || hasOwn.call(handle, name)) {
        (handle as Record<symbol, T>)[name] = value;
        // A proxy may take the property and keep nothing, or read back something else.
        if (hasOwn.call(handle, name) && (handle as Record<symbol, T>)[name] === value) {
          if (this.refused !== undefined) this.refused.delete(handle);
          return;
        }
      }
    } catch {
      // A proxy or host object that refuses the property: kept aside instead.
    }
    (this.refused ??= new WeakMap()).set(handle, value);
  }

  /**
   * The value kept for `handle`, or undefined: never one its prototype holds (an object
   * made by `Object.create(request)` is not that request), nor for null or undefined.
   */
  get(handle: object): T | undefined {
    const refused = this.refused;
    if (refused !== undefined) {
      const aside = refused.get(handle);
      if (aside !== undefined) return aside;
    }
    try {
      const name = this.name;
      return hasOwn.call(handle, name) ? (handle as Record<symbol, T>)[name] : undefined;
    } catch {
      return undefined; // null, undefined, or a proxy that throws: nothing kept
    }
  }
}

/** What one charged request took, by its handle (the request, or the framework's context). */
interface Ticket {
  readonly key: string;
  /** The receipts of its charges (its cost, then what `charge` added); empty without receipts. */
  readonly receipts: Receipt[];
  /** Units taken and not given back (without receipts: what a keyless refund may give). */
  taken: number;
  /** True once the response is over (`refundIf` asked, or not for an aborted request). */
  settled: boolean;
}

/** One middleware's after-response side: the tickets of its charged requests, by handle. */
export class AfterResponse<Handle extends object> {
  /** @internal */
  private readonly tickets = new HandleSlot<Ticket>("tollgate ticket");
  /** @internal */
  private readonly limiter: KeyedConsumer;

  constructor(
    private readonly where: string,
    private readonly config: CommonConfig,
    private readonly refundIf: ((status: number, request: Handle) => boolean) | undefined,
    private readonly refundAborted = false,
  ) {
    this.limiter = config.limiter as KeyedConsumer;
    if (refundIf !== undefined && typeof this.limiter.refund !== "function") {
      throw new TypeError(
        `${where}: refundIf needs a limiter with refund(key, cost) (a KeyedLimiter, or an unkeyed tollgate limiter), got ${describe(config.limiter)}`,
      );
    }
  }

  /**
   * Keeps the ticket of a request the limiter charged (`'pass'` with a decision); true when
   * `refundIf` is set, so its status is needed (given the node response `res`, it watches it).
   */
  open(handle: Handle, outcome: Outcome, res?: ServerResponse): boolean {
    if (outcome.decision === undefined || outcome.key === undefined) return false;
    const receipts = outcome.receipt === undefined ? [] : [outcome.receipt];
    this.tickets.set(handle, { key: outcome.key, receipts, taken: outcome.cost, settled: false });
    if (this.refundIf !== undefined && res !== undefined) {
      watchNodeResponse(res, (status, aborted) => this.settle(handle, status, aborted));
    }
    return this.refundIf !== undefined;
  }

  /**
   * The response of `handle` is over with `status` (`aborted`: the connection closed first).
   * Asks `refundIf`, once, and gives back what the request still holds when it says so; an
   * aborted request is asked only with `refundAborted`, then with {@link ABORTED_STATUS}.
   */
  settle(handle: Handle, status: number, aborted = false): void {
    const ticket = this.tickets.get(handle);
    if (ticket === undefined || ticket.settled) return;
    ticket.settled = true;
    if (aborted && !this.refundAborted) return;
    let refund: boolean;
    try {
      refund = this.refundIf!(aborted ? ABORTED_STATUS : status, handle) === true;
    } catch (error) {
      report(this.config, error, ticket.key, "programming");
      return;
    }
    if (refund) this.giveBack(ticket, ticket.taken);
  }

  /** See {@link RequestCharges.refund}; `units` already checked (by {@link requestCharges}). */
  refund(handle: Handle, units?: number): void {
    if (typeof this.limiter.refund !== "function") {
      throw new TypeError(
        `${this.where}.refund: the limiter has no refund(key, cost) (use a KeyedLimiter)`,
      );
    }
    const ticket = this.tickets.get(handle);
    if (ticket === undefined) return;
    this.giveBack(ticket, units === undefined || units > ticket.taken ? ticket.taken : units);
  }

  /** See {@link RequestCharges.settle}; `actual` already checked. */
  settleCost(handle: Handle, actual: number): Decision | PromiseLike<Decision> | undefined {
    const ticket = this.tickets.get(handle);
    if (ticket === undefined) return undefined;
    if (actual < ticket.taken) {
      this.refund(handle, ticket.taken - actual);
      return undefined;
    }
    return actual > ticket.taken ? this.charge(handle, actual - ticket.taken) : undefined;
  }

  /** See {@link RequestCharges.charge}; `u` already checked. */
  charge(handle: Handle, u: number): Decision | PromiseLike<Decision> | undefined {
    const ticket = this.tickets.get(handle);
    if (ticket === undefined) return undefined;
    const limiter = this.limiter;
    const receipted = typeof limiter.charge === "function";
    const result = receipted ? limiter.charge!(ticket.key, u) : limiter.consume(ticket.key, u);
    const taken = (decision: Decision) => {
      if (decision.allowed) {
        ticket.taken += u;
        if (receipted) ticket.receipts.push(decision as Receipt);
      }
      return decision;
    };
    return isThenable(result) ? Promise.resolve(result).then(taken) : taken(result);
  }

  /**
   * @internal Gives back `units` (> 0, at most what the ticket holds): through its receipts,
   * newest first, each at most what it still holds; else by a refund of the key.
   */
  private giveBack(ticket: Ticket, units: number): void {
    if (!(units > 0)) return;
    ticket.taken -= units;
    const receipts = ticket.receipts;
    if (receipts.length === 0) {
      this.send(ticket, ticket.key, units);
      return;
    }
    let left = units;
    for (let i = receipts.length - 1; i >= 0 && left > 0; i--) {
      const r = receipts[i]!;
      const holds = r.units - r.refunded;
      const ask = holds < left ? holds : left;
      if (ask > 0) this.send(ticket, r, ask);
      left -= ask;
    }
  }

  /** @internal One refund call (of the key, or through a receipt); a failure is reported. */
  private send(ticket: Ticket, target: string | Receipt, units: number): void {
    try {
      const refund = this.limiter.refund as (t: string | Receipt, u: number) => unknown;
      const result = refund.call(this.limiter, target, units);
      if (isThenable(result)) {
        Promise.resolve(result).then(undefined, (error: unknown) =>
          report(this.config, error, ticket.key, "outage"),
        );
      }
    } catch (error) {
      report(this.config, error, ticket.key, "programming");
    }
  }
}

/**
 * Calls `done` once with a node response's status when it is over: its `finish` (all handed to
 * the OS), or its `close` first (the connection went away, or it was destroyed: `aborted`).
 */
export function watchNodeResponse(
  res: ServerResponse,
  done: (status: number, aborted: boolean) => void,
): void {
  let called = false;
  const over = (aborted: boolean) => {
    if (called) return;
    called = true;
    res.off("finish", finish);
    res.off("close", close);
    done(aborted ? ABORTED_STATUS : res.statusCode, aborted);
  };
  const finish = () => over(false);
  const close = () => over(!res.writableFinished);
  res.once("finish", finish);
  res.once("close", close);
}

/**
 * The per-request handle of middleware `where`, bound to its {@link AfterResponse}, or to the
 * one `after` finds for a request (a Fastify route's). The units are checked (a finite number
 * >= 0) for every request, charged or not, so that a bad call never goes unseen.
 */
export function requestCharges<Handle extends object>(
  where: string,
  after: AfterResponse<Handle> | ((handle: Handle) => AfterResponse<Handle> | undefined),
): RequestCharges<Handle> {
  const afterOf = typeof after === "function" ? after : () => after;
  const check = (name: string, units: number, what = "units") =>
    checkNumber(`${where}.${name}`, what, units, 0, true);
  return {
    refund: (request, units) => {
      if (units !== undefined) check("refund", units);
      afterOf(request)?.refund(request, units);
    },
    charge: (request, units) => {
      const u = check("charge", units);
      return afterOf(request)?.charge(request, u);
    },
    settle: (request, actual) => {
      const u = check("settle", actual, "actualUnits");
      return afterOf(request)?.settleCost(request, u);
    },
  };
}
