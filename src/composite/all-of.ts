import type { KernelPart } from "../algorithms/kernel.js";
import {
  checkSnapshot,
  decodeNumber,
  encodeNumber,
  encodeState,
  type LimiterSnapshot,
  SNAPSHOT_VERSION,
  type SnapshotNumber,
} from "../algorithms/snapshot.js";
import { checkTimeMs } from "../algorithms/time.js";
import { checkCost, describe, mustBe } from "../core/errors.js";
import type { Receipt } from "../core/limiter.js";
import {
  type Clock,
  type Decision,
  type Limiter,
  UnkeyedLimiterBase,
  type WaitOptions,
} from "../core/limiter.js";
import { ChargeReceipt, checkReceipt } from "../core/receipt.js";
import { type ApplyReconfigure, isReconfigurable } from "../core/reconfigure.js";
import { jittered, WaitQueue } from "../core/wait.js";

const WHERE = "allOf";

/** A limiter made of several parts, all of which must allow: see {@link allOf}. */
export class AllOf extends UnkeyedLimiterBase implements Limiter {
  /** The parts, in the order given. */
  readonly parts: readonly Limiter[];
  /**
   * @internal The limiters that decide, in order: the parts, with every exact `AllOf` part replaced
   * by its own leaves (a subclass of `AllOf` is one leaf). Deciding over the leaves gives the same
   * {@link combine}d decision as deciding over the parts.
   */
  private readonly leaves: readonly Limiter[];
  /** @internal Each built-in leaf as a {@link KernelPart}; undefined for a custom leaf. */
  private readonly drivers: readonly (KernelPart | undefined)[];
  /**
   * @internal `timeOf` of each built-in leaf (and `fitsAt`, `takeAt` below), called through
   * these references, not as methods, so each part's code is optimized on its own with its
   * kernel inlined. As methods of three or more classes, V8 inlined every kernel into `allow`,
   * ran out of inlining budget and boxed the numbers at the calls left (16 to 96 bytes a call).
   */
  private readonly timeOfs: readonly (KernelPart["timeOf"] | undefined)[];
  /** @internal See {@link timeOfs}. */
  private readonly fitsAts: readonly (KernelPart["fitsAt"] | undefined)[];
  /** @internal See {@link timeOfs}. */
  private readonly takeAts: readonly (KernelPart["takeAt"] | undefined)[];
  /** @internal Indexes of the custom leaves, in order. */
  private readonly custom: readonly number[];
  /** @internal See {@link PartGroup.final}: the last custom leaf, or -1. */
  readonly final: number;
  /** @internal See {@link PartGroup.takeOrder}: the other custom leaves, then the built-in ones. */
  readonly takeOrder: readonly number[];
  /** @internal The receipts of the `charge` under way, for {@link decidePart}. */
  private receipts: (ChargeReceipt | undefined)[] | undefined;
  /** @internal Each built-in leaf's time for the call under way (read once per call). */
  private readonly timesMs: Float64Array;
  /** @internal */
  private queue: WaitQueue | undefined;
  /** @internal The explicit time of the `…At` call under way; NaN for a clock reading. */
  private atMs = Number.NaN;

  /**
   * @throws {TypeError} When `parts` is not an array, or a part is not a limiter.
   * @throws {RangeError} With no parts, or when a limiter is given twice anywhere in the
   *   tree of parts (an `AllOf` part's own parts count too: `allOf(a, allOf(a, b))` would
   *   charge `a` twice for one request).
   */
  constructor(parts: readonly Limiter[]) {
    super();
    if (!Array.isArray(parts))
      throw mustBe(WHERE, "parts", "an array of limiters", parts, TypeError);
    if (parts.length === 0) {
      throw new RangeError(`${WHERE}: needs at least one limiter, got none`);
    }
    // Each limiter in the tree of parts, with the top-level part it came from (see @throws).
    const seen = new Map<Limiter, number>();
    parts.forEach((part, i) => {
      if (!isLimiter(part)) {
        throw new TypeError(
          `${WHERE}: part ${i} must be a Limiter, got ${describe(part)}${notLimiterHint(part)}`,
        );
      }
      const first = parts.indexOf(part);
      if (first !== i) {
        throw new RangeError(`${WHERE}: part ${i} is the same limiter as part ${first}`);
      }
      for (const limiter of tree(part)) {
        const j = seen.get(limiter);
        if (j !== undefined) {
          throw new RangeError(
            `${WHERE}: part ${i} and part ${j} share a limiter (nested allOf parts must be distinct too)`,
          );
        }
        seen.set(limiter, i);
      }
    });
    this.parts = [...parts];
    const leaves = this.parts.flatMap((part) =>
      Object.getPrototypeOf(part) === AllOf.prototype ? (part as unknown as AllOf).leaves : [part],
    );
    this.leaves = leaves;
    this.drivers = leaves.map(kernelPartOf);
    this.timeOfs = this.drivers.map((d) => d?.timeOf);
    this.fitsAts = this.drivers.map((d) => d?.fitsAt);
    this.takeAts = this.drivers.map((d) => d?.takeAt);
    this.custom = leaves.flatMap((_, i) => (this.drivers[i] === undefined ? [i] : []));
    this.final = this.custom.length > 0 ? this.custom[this.custom.length - 1]! : -1;
    const builtIn = leaves.flatMap((_, i) => (this.drivers[i] !== undefined ? [i] : []));
    this.takeOrder = [...this.custom.slice(0, -1), ...builtIn];
    this.timesMs = new Float64Array(leaves.length);
  }

  /**
   * A fresh composite of fresh copies of every part (for `KeyedLimiter`), of the same
   * class (`new this.constructor(parts)`: a subclass is cloned as itself; one whose
   * constructor takes other arguments must override `clone()`).
   * @throws {TypeError} When a part has no `clone()`.
   */
  clone(): AllOf {
    const Class = this.constructor as new (parts: readonly Limiter[]) => AllOf;
    return new Class(
      this.parts.map((part, i) => {
        const clone = (part as { clone?: unknown }).clone;
        if (typeof clone !== "function") {
          throw new TypeError(`${WHERE}: part ${i} has no clone(), so it cannot be copied`);
        }
        return clone.call(part) as Limiter;
      }),
    );
  }

  /**
   * `consume(cost).allowed`: true, and every part charged, only when every part allows.
   * All or nothing even when a part throws: see {@link allOf}.
   */
  allow(cost?: number): boolean {
    const c = cost === undefined ? 1 : checkCost(WHERE, cost);
    const leaves = this.leaves;
    const drivers = this.drivers;
    const times = this.timesMs;
    const n = leaves.length;
    // Every built-in part's clock first: a reading that throws leaves every part as it was.
    const { timeOfs, fitsAts, takeAts, atMs } = this;
    for (let i = 0; i < n; i++) {
      const d = drivers[i];
      if (d !== undefined) times[i] = !Number.isNaN(atMs) ? d.timeAt(atMs) : timeOfs[i]!.call(d);
    }
    for (let i = 0; i < n; i++) {
      const d = drivers[i];
      if (d !== undefined && !fitsAts[i]!.call(d, times[i]!, c)) return false;
    }
    // Custom parts are charged before any built-in one, which cannot throw or deny now.
    if (this.custom.length > 0 && !this.allowCustom(c)) return false;
    for (let i = 0; i < n; i++) {
      const d = drivers[i];
      if (d !== undefined) takeAts[i]!.call(d, times[i]!, c);
    }
    return true;
  }

  /**
   * `consume(cost).allowed` as of `timeMs` (milliseconds, every part deciding at the later of it
   * and the latest time it has seen), Go's `AllowN(t, n)`: see docs/semantics.md#explicit-time. A
   * custom part must have `allowAt`, `consumeAt` and `peekAt` of its own.
   * @throws {TypeError} If `timeMs` or `cost` is not a number, or a custom part cannot decide at an
   *   explicit time. {RangeError} If either is NaN or infinite, `cost` negative, or `timeMs` past a
   *   window part's float-step bound.
   */
  allowAt(timeMs: number, cost?: number): boolean {
    const c = this.startAt("allowAt", timeMs, cost);
    try {
      return this.allow(c);
    } finally {
      this.atMs = Number.NaN;
    }
  }

  /** `consume(cost)` as of `timeMs`: see {@link allowAt} for the time. */
  consumeAt(timeMs: number, cost?: number): Decision {
    return this.decideAtTime("consumeAt", timeMs, cost, true);
  }

  /** `peek(cost)` as of `timeMs`: see {@link allowAt} for the time. */
  peekAt(timeMs: number, cost?: number): Decision {
    return this.decideAtTime("peekAt", timeMs, cost, false);
  }

  /** @internal {@link consumeAt} (`take`) or {@link peekAt}. */
  private decideAtTime(method: string, timeMs: number, cost: unknown, take: boolean): Decision {
    const c = this.startAt(method, timeMs, cost);
    try {
      return this.decide(c, take);
    } finally {
      this.atMs = Number.NaN;
    }
  }

  /** @internal Checks an `…At` call's arguments and sets its time; returns the cost. */
  private startAt(method: string, timeMs: unknown, cost: unknown): number {
    const where = `${WHERE}.${method}`;
    const t = checkTimeMs(where, timeMs);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    this.atMs = t;
    return c;
  }

  /**
   * @internal Checks and charges the custom leaves through their public methods, by the rule
   * of {@link decideAll} (those charged before a denial stay charged); false when one denies.
   */
  private allowCustom(c: number): boolean {
    const leaves = this.leaves;
    const custom = this.custom;
    const last = custom.length - 1;
    const at = this.atMs;
    for (let j = 0; j < last; j++)
      if (!decideLeaf(leaves[custom[j]!]!, c, false, at).allowed) return false;
    if (!allowLeaf(leaves[custom[last]!]!, c, at)) return false;
    for (let j = 0; j < last; j++) if (!allowLeaf(leaves[custom[j]!]!, c, at)) return false;
    return true;
  }

  /**
   * Takes `cost` from every part when all allow, from none otherwise (also when a part
   * throws: see {@link allOf}).
   */
  consume(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), true);
  }

  /**
   * Changes the parts' options live, all or none: `options[i]` is what `parts[i].reconfigure` takes
   * (an array again for a nested `allOf`), or `undefined` to keep part `i` as it is. Every entry is
   * checked (and every clock read) before any part changes, so a bad option anywhere throws and
   * changes nothing. Each part carries its state over by its own rule
   * (docs/semantics.md#changing-limits-live); waiters on the composite are re-planned: one whose
   * cost is now above a part's limit is rejected with the `RangeError` a fresh `wait` gets.
   * @example
   * const both = allOf([perSecond, perDay])
   * both.reconfigure([undefined, { limit: 20_000 }]) // only the daily quota changes
   * @throws {TypeError} If `options` is not an array of one entry per part, or names options for a
   *   part that cannot be reconfigured (a custom limiter), or as the part's own `reconfigure`
   *   throws; nothing changes.
   * @throws {RangeError} As the part's own `reconfigure`; nothing changes.
   */
  reconfigure(options: readonly (object | undefined)[]): void {
    this.planReconfigure(options)();
  }

  /** @internal Checks every part's options (reading their clocks); the result applies them all. */
  planReconfigure(options: unknown): ApplyReconfigure {
    if (!Array.isArray(options) || options.length !== this.parts.length) {
      throw new TypeError(
        `${WHERE}.reconfigure: options must be an array of ${this.parts.length} entries (one per part, undefined to keep it), got ${describe(options)}${Array.isArray(options) ? ` of ${options.length}` : ""}`,
      );
    }
    const applies: ApplyReconfigure[] = [];
    this.parts.forEach((part, i) => {
      const o: unknown = options[i];
      if (o === undefined) return;
      if (!isReconfigurable(part)) {
        throw new TypeError(
          `${WHERE}.reconfigure: part ${i} (${describe(part)}) has no reconfigure; pass undefined for it`,
        );
      }
      applies.push(part.planReconfigure(o));
    });
    return () => {
      for (const apply of applies) apply();
      this.queue?.replan();
    };
  }

  /** What `consume(cost)` would answer now; changes nothing. */
  peek(cost?: number): Decision {
    return this.decide(cost === undefined ? 1 : checkCost(WHERE, cost), false);
  }

  /**
   * `consume(cost)` with a {@link Receipt}: every part charged (or none), each keeping its
   * own receipt inside the composite's, for a refund through it later. Its
   * `refundableUntilMs` is the latest of the parts'.
   * @throws {TypeError} If `cost` is not a number. {RangeError} If it is NaN, negative or infinite.
   */
  charge(cost?: number): Receipt {
    const c = cost === undefined ? 1 : checkCost(`${WHERE}.charge`, cost);
    const receipts: (ChargeReceipt | undefined)[] = new Array(this.leaves.length);
    const decision = this.decide(c, true, receipts);
    const taken = decision.allowed && c > 0;
    let until = Number.NEGATIVE_INFINITY;
    let atMs = Number.NaN;
    for (let i = 0; i < receipts.length; i++) {
      const r = receipts[i];
      if (r === undefined) continue;
      if (Number.isNaN(atMs)) atMs = r.atMs;
      if (r.refundableUntilMs > until) until = r.refundableUntilMs;
    }
    if (Number.isNaN(atMs)) atMs = this.timesMs[0] ?? 0;
    const parts = taken ? receipts : undefined;
    if (!taken) until = atMs;
    return new ChargeReceipt(decision, undefined, taken ? c : 0, atMs, until, this, 0, 0, 0, parts);
  }

  /**
   * Gives back units to every part and returns the least any part gave back: through the
   * receipt of a {@link charge}, each part by its own receipt's rule (at most what the
   * charge took from it, nothing once its units no longer count there); without one, `cost`
   * units (default 1) to each part by its own rule. Every part's clock is read first, and
   * every part checked, so a bad reading or a part that cannot refund gives nothing back
   * anywhere. Then wakes the composite's waiters. See docs/semantics.md#refunds.
   * @throws {TypeError} If `cost` or `units` is not a number, a part has no `refund()`, a
   *   part refunds only through a receipt (a `FixedWindow`) and none is given, or the
   *   receipt is another limiter's: then no part is refunded. {RangeError} If it is NaN,
   *   negative or infinite; as a part's clock reading.
   */
  refund(receipt: Receipt, units?: number): number;
  refund(cost?: number): number;
  refund(cost?: number | Receipt, units?: number): number {
    const where = `${WHERE}.refund`;
    const viaReceipt = typeof cost === "object" && cost !== null;
    const r = viaReceipt ? checkReceipt(where, cost, this, units) : undefined;
    const receipt = r?.receipt;
    const u = r !== undefined ? r.units : cost === undefined ? 1 : checkCost(where, cost);
    const leaves = this.leaves;
    const drivers = this.drivers;
    const times = this.timesMs;
    const n = leaves.length;
    for (let i = 0; i < n; i++) {
      const d = drivers[i];
      if (d === undefined) {
        if (typeof leaves[i]!.refund !== "function") {
          throw new TypeError(`${where}: part ${i} has no refund(), so no part is refunded`);
        }
      } else if (receipt === undefined && !d.refundsWithoutReceipt) {
        throw new TypeError(
          `${where}: part ${i} (${describe(leaves[i])}) gives back only through a receipt: charge() the composite and refund(receipt); no part is refunded`,
        );
      }
    }
    this.readTimes(); // a reading that throws leaves every part as it was
    const parts = receipt?.parts;
    if (receipt !== undefined && parts === undefined) return 0; // a denial took nothing
    let least = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      const d = drivers[i];
      const part = parts?.[i];
      const ask = part === undefined || u < part.left ? u : part.left;
      let given: number;
      if (d !== undefined) given = d.refundAt(times[i]!, ask, part);
      else {
        const got = ask > 0 ? leaves[i]!.refund!(ask) : 0;
        given = typeof got === "number" ? got : ask;
        if (part !== undefined) part.refunded += given;
      }
      if (given < least) least = given;
    }
    if (receipt !== undefined && parts !== undefined) {
      let refunded = Number.POSITIVE_INFINITY;
      for (const part of parts)
        if (part !== undefined && part.refunded < refunded) refunded = part.refunded;
      receipt.refunded = refunded === Number.POSITIVE_INFINITY ? 0 : refunded;
    }
    this.queue?.wake();
    return least === Number.POSITIVE_INFINITY ? 0 : least;
  }

  /**
   * The state of every part as plain, JSON-safe data (docs/semantics.md#snapshots): its
   * `algorithm` names the parts (`all-of(token-bucket,fixed-window)`), its `options` are
   * theirs in order, its `state` each part's after its length, and `latestMs` the latest of
   * theirs. What `KeyedLimiter.snapshot(key)` writes for an `allOf` policy, too.
   * @throws {TypeError} When a part has no `snapshot()` (a custom limiter). {RangeError} As
   *   a part's `snapshot()`.
   */
  snapshot(): LimiterSnapshot {
    const parts = this.leaves.map((leaf, i) => {
      const snapshot = (leaf as { snapshot?: unknown }).snapshot;
      if (typeof snapshot !== "function") {
        throw new TypeError(`${WHERE}.snapshot: part ${i} (${describe(leaf)}) has no snapshot()`);
      }
      return snapshot.call(leaf) as LimiterSnapshot;
    });
    let latestMs = Number.NEGATIVE_INFINITY;
    const state: SnapshotNumber[] = [];
    for (const part of parts) {
      const at = decodeNumber(`${WHERE}.snapshot`, part.latestMs);
      if (at > latestMs) latestMs = at;
      state.push(part.state.length, ...part.state);
    }
    return {
      version: SNAPSHOT_VERSION,
      algorithm: `all-of(${parts.map((p) => p.algorithm).join(",")})`,
      options: parts.map((p) => p.options as Readonly<Record<string, number>>),
      latestMs: encodeNumber(latestMs),
      state,
    };
  }

  /**
   * Replaces every part's state with one {@link snapshot} returned, of an `allOf` of the same
   * algorithms and options in the same order, all or none (every part checked first).
   * @throws {TypeError} For something that is not such a snapshot, naming what differs.
   *   {RangeError} As a part's `restore`. Either way nothing changes.
   */
  restore(snapshot: LimiterSnapshot): void {
    const where = `${WHERE}.restore`;
    const mine = this.snapshot();
    const { state } = checkSnapshot(where, snapshot, mine.algorithm, mine.options);
    const ids = mine.algorithm.slice("all-of(".length, -1).split(",");
    const options = mine.options as readonly Readonly<Record<string, number>>[];
    const plans: (() => void)[] = [];
    let at = 0;
    this.leaves.forEach((leaf, i) => {
      const n = state[at] ?? -1;
      if (!Number.isInteger(n) || n < 0 || at + 1 + n > state.length) {
        throw new TypeError(`${where}: the state does not split into ${ids.length} parts`);
      }
      const part: LimiterSnapshot = {
        version: SNAPSHOT_VERSION,
        algorithm: ids[i]!,
        options: options[i]!,
        latestMs: snapshot.latestMs,
        state: encodeState(state.slice(at + 1, at + 1 + n)),
      };
      plans.push((leaf as unknown as { planRestore(s: unknown): () => void }).planRestore(part));
      at += 1 + n;
    });
    if (at !== state.length) throw new TypeError(`${where}: the state has numbers past the parts`);
    for (const plan of plans) plan();
    this.queue?.wake();
  }

  /** Resets every part. */
  reset(): void {
    for (const part of this.parts) part.reset();
  }

  /** True when every part is idle and nobody waits on the composite. */
  isIdle(): boolean {
    if (this.queue !== undefined && this.queue.size > 0) return false;
    for (const part of this.parts) if (!part.isIdle()) return false;
    return true;
  }

  /**
   * Waits first-in, first-out until every part allows `cost` at once, then takes it from all (one
   * timer for the composite, polling the head's `retryAfterMs`). Waiting holds nothing, so a plain
   * `consume` may take free units meanwhile (the head then waits longer), and the parts decide as
   * meters: a `TokenBucket` part does not go into debt and a `LeakyBucket` part does not shape
   * (wait on the bucket itself for that). `maxWaitMs` refuses at once a wait the head would already
   * exceed; a waiter queued behind others is rejected with a `RateLimitError` if not granted
   * `maxWaitMs` after the call (on the first part's clock). See {@link Limiter.wait}.
   */
  wait(cost?: number, options?: WaitOptions): Promise<Decision> {
    try {
      const c = checkCost(`${WHERE}.wait`, cost);
      // A part whose limit is below the cost makes the wait endless, whatever the others say.
      for (const part of this.parts) {
        const d = part.peek(c);
        if (d.retryAfterMs === Number.POSITIVE_INFINITY && c > d.limit) {
          throw new RangeError(`${WHERE}.wait: cost ${c} exceeds limit ${d.limit}`);
        }
      }
    } catch (error) {
      return Promise.reject(error);
    }
    const clock = (this.parts[0] as { clock?: unknown }).clock;
    this.queue ??= new WaitQueue(
      WHERE,
      this,
      typeof clock === "function" ? (clock as Clock) : undefined,
    );
    const queue = this.queue;
    return jittered(
      options,
      () => queue.wait(cost, options),
      () => this.refund(cost),
    );
  }

  /**
   * @internal `consume` (`take` true) or `peek` by {@link decideAll}, once every built-in
   * leaf's time is read; with `receipts`, a `charge`: each part's receipt at its index.
   */
  private decide(cost: number, take: boolean, receipts?: (ChargeReceipt | undefined)[]): Decision {
    this.readTimes();
    this.receipts = receipts;
    return decideAll(this, this.drivers.length, cost, take);
  }

  /** @internal Reads every built-in leaf's time for the call under way into {@link timesMs}. */
  private readTimes(): void {
    const { drivers, timesMs: times, atMs } = this;
    for (let i = 0; i < drivers.length; i++) {
      const d = drivers[i];
      if (d !== undefined) times[i] = !Number.isNaN(atMs) ? d.timeAt(atMs) : d.timeOf();
    }
  }

  /**
   * @internal Leaf `i`'s `consume` (`take`) or `peek` for {@link decideAll}. Taking for a
   * `charge`, a built-in leaf charges; a custom one gets a receipt of the composite's, which
   * only counts what was given back.
   */
  decidePart(i: number, cost: number, take: boolean): Decision {
    const d = this.drivers[i];
    const out = take ? this.receipts : undefined; // a charge's receipts
    if (d !== undefined) {
      if (out === undefined) return d.decideAt(this.timesMs[i]!, cost, take);
      return (out[i] = d.chargeAt(this.timesMs[i]!, cost));
    }
    const own = decideLeaf(this.leaves[i]!, cost, take, this.atMs);
    const u = Number.POSITIVE_INFINITY;
    if (out !== undefined && own.allowed)
      out[i] = new ChargeReceipt(own, undefined, cost, Number.NaN, u, this, 0, 0, 0, undefined);
    return own;
  }
}

/** Parts deciding by {@link decideAll}: `AllOf`'s leaves, `AllOfLayout`'s kernels. @internal */
export interface PartGroup {
  /** The part decided after the others, taking only when they all allow; -1 for none. */
  readonly final: number;
  /** Every part but `final`, in the order they take: those that may deny or throw first. */
  readonly takeOrder: readonly number[];
  /** Part `i`'s `consume` (`take`) or `peek`: on the layout's slot, or (`AllOf`) at its own time. */
  decidePart(i: number, cost: number, take: boolean): Decision;
}

/**
 * The all-or-nothing rule of `allOf`, once for `AllOf` and the keyed `AllOfLayout`: the `n`
 * parts peeked but `final`, which then decides, taking only when all others allow (its
 * denial or throw takes nothing); then, when all allow and `take`, the others take in
 * `takeOrder` until one denies (a custom part: those before it stay taken). When denied,
 * parts that would allow answer without the cost, as {@link combine} needs. @internal
 */
export function decideAll(group: PartGroup, n: number, cost: number, take: boolean): Decision {
  const decisions: Decision[] = new Array(n);
  const final = group.final;
  let allowed = true;
  for (let i = 0; i < n; i++) {
    if (i === final) continue;
    const d = (decisions[i] = group.decidePart(i, cost, false));
    if (!d.allowed) allowed = false;
  }
  if (final >= 0) {
    const d = (decisions[final] = group.decidePart(final, cost, allowed && take));
    if (!d.allowed) allowed = false;
  }
  const order = group.takeOrder;
  for (let j = 0; allowed && take && j < order.length; j++) {
    const d = (decisions[order[j]!] = group.decidePart(order[j]!, cost, true));
    if (!d.allowed) allowed = false;
  }
  for (let i = 0; !allowed && i < n; i++) {
    if (decisions[i]!.allowed) decisions[i] = group.decidePart(i, 0, false);
  }
  return combine(allowed, decisions);
}

/**
 * The composite {@link Decision} of the parts' decisions, field by field: least remaining
 * (and the limit of that part, the first on a tie), largest retryAfterMs and resetAfterMs.
 * Denied parts' decisions are as peeked; when the composite is denied, allowed parts'
 * decisions must be taken without the cost (`peek(0)`). Shared with the keyed slab store. @internal
 */
export function combine(allowed: boolean, decisions: readonly Decision[]): Decision {
  let least = decisions[0]!;
  let retryAfterMs = 0;
  let resetAfterMs = 0;
  for (const d of decisions) {
    if (d.remaining < least.remaining) least = d;
    if (d.retryAfterMs > retryAfterMs) retryAfterMs = d.retryAfterMs;
    if (d.resetAfterMs > resetAfterMs) resetAfterMs = d.resetAfterMs;
  }
  return {
    allowed,
    limit: least.limit,
    remaining: least.remaining,
    retryAfterMs: allowed ? 0 : retryAfterMs,
    resetAfterMs,
  };
}

/**
 * `consume` (`take` true) or `peek` of a custom leaf, as of `atMs` unless it is NaN.
 * @throws {TypeError} For an explicit time and a leaf without `consumeAt`/`peekAt`.
 */
function decideLeaf(leaf: Limiter, cost: number, take: boolean, atMs: number): Decision {
  if (Number.isNaN(atMs)) return take ? leaf.consume(cost) : leaf.peek(cost);
  return leafAt(leaf, take ? "consumeAt" : "peekAt").call(leaf, atMs, cost) as Decision;
}

/** `allow` of a custom leaf, as of `atMs` unless it is NaN (see {@link decideLeaf}). */
function allowLeaf(leaf: Limiter, cost: number, atMs: number): boolean {
  if (Number.isNaN(atMs)) return leaf.allow(cost);
  return leafAt(leaf, "allowAt").call(leaf, atMs, cost) as boolean;
}

/** A custom leaf's explicit-time method `name`. @throws {TypeError} When it has none. */
function leafAt(
  leaf: Limiter,
  name: "allowAt" | "consumeAt" | "peekAt",
): (this: Limiter, timeMs: number, cost: number) => unknown {
  const at = (leaf as Partial<Record<typeof name, unknown>>)[name];
  if (typeof at !== "function") {
    throw new TypeError(
      `${WHERE}: part ${describe(leaf)} has no ${name}, so it cannot decide at an explicit time`,
    );
  }
  return at as (this: Limiter, timeMs: number, cost: number) => unknown;
}

/** `leaf` as a {@link KernelPart} when it is exactly a built-in algorithm; else undefined. */
function kernelPartOf(leaf: Limiter): KernelPart | undefined {
  const part = (leaf as { kernelPart?: unknown }).kernelPart;
  return typeof part === "function" ? (part.call(leaf) as KernelPart | undefined) : undefined;
}

/** `limiter` and, for an `AllOf`, every limiter inside it (its parts are validated already). */
function tree(limiter: Limiter): Limiter[] {
  return limiter instanceof AllOf ? [limiter, ...limiter.parts.flatMap(tree)] : [limiter];
}

/** True for an object with every method of {@link Limiter} (also `KeyedLimiter`'s check). @internal */
export function isLimiter(value: unknown): value is Limiter {
  if (typeof value !== "object" || value === null) return false;
  const o = value as Record<string, unknown>;
  return ["allow", "consume", "peek", "reset", "isIdle", "wait"].every(
    (m) => typeof o[m] === "function",
  );
}

/** What to do instead, for an array of limiters given as one argument or an options object. */
function notLimiterHint(part: unknown): string {
  if (Array.isArray(part))
    return "; pass the limiters as arguments: allOf(a, b), not allOf([a, b])";
  if (typeof part !== "object" || part === null) return "";
  const proto = Object.getPrototypeOf(part);
  return proto === Object.prototype || proto === null
    ? "; allOf takes no options: give each limiter its own"
    : "";
}

/**
 * A limiter that allows a request only when every one of `limiters` allows it, then takes
 * the cost from all of them; when any part denies, none is charged. For layered limits
 * such as 10 per second AND 1000 per hour. All or nothing also when a part's clock throws;
 * with two or more custom parts, those charged before a throw stay charged. `remaining` and
 * `limit` come from the part with the least `remaining`, `retryAfterMs`/`resetAfterMs` are
 * the largest. Parts must be distinct, used only through it: docs/keyed.md#alloflimiters.
 * @example
 * const perKey = new KeyedLimiter(allOf(
 *   new TokenBucket({ capacity: 10, refillPerSecond: 10 }),
 *   new FixedWindow({ limit: 1000, windowMs: 3_600_000 }),
 * ))
 * @throws {RangeError} With no limiters, or one limiter twice anywhere in the tree of parts.
 * @throws {TypeError} When an argument is not a limiter (an array or an options object).
 */
export function allOf(...limiters: Limiter[]): AllOf {
  return new AllOf(limiters);
}
