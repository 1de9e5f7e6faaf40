import { checkCost } from "../core/errors.js";
import { type Decision, type Receipt, UnkeyedLimiterBase } from "../core/limiter.js";
import { type ChargeReceipt, checkReceipt } from "../core/receipt.js";
import {
  checkSnapshot,
  checkStateAt,
  encodeNumber,
  encodeState,
  type LimiterSnapshot,
  SNAPSHOT_VERSION,
} from "./snapshot.js";
import { checkTimeMs } from "./time.js";

/**
 * An algorithm's kernel, the one seam between its rules and its state: one limiter's state in a
 * slot of a `Float64Array` (`doubles` from offset `s`; a log also keeps a ring by `slot`, its bytes
 * accounted through {@link bind}), and the rules at an explicit time (decide, take, refund with
 * receipt marks, retune, trace, idle). One per algorithm, beside its class, with the algorithm's
 * free functions. The class is a shell over one slot of its own kernel, `allOf` drives its parts'
 * kernels and `KeyedLimiter` runs the same kernels over the slab engine, so the three decide alike
 * by construction. Every `now` is at least every earlier one for the slot. The trace methods let
 * the engine drop a key in use without granting it anything: docs/keyed.md#bounds. @internal
 */
export interface Kernel {
  /** Doubles per slot. */
  readonly doubles: number;
  /** Accounted bytes per key beyond its slot doubles (a log's fixed part). */
  readonly keyExtraBytes: number;
  /** The most units one request can ever take (the smallest limit of the parts). */
  readonly limit: number;
  /** Writes the state of a key that was never used. */
  init(st: Float64Array, s: number, slot: number, now: number): void;
  /** True when the slot's state is fresh again: dropping it changes no decision. */
  isIdle(st: Float64Array, s: number, slot: number, now: number): boolean;
  /**
   * The clock reading by which the slot is fresh again without further traffic (its
   * `now + resetAfterMs`), rounded up; `Infinity` when never (a rate of 0).
   */
  idleAtMs(st: Float64Array, s: number, slot: number, now: number): number;
  /**
   * How used the slot is, as a share of its limit (0 fresh, 1 used up): of keys idle equally
   * soon, the least used is pushed out, so its trace costs a colliding key the least.
   */
  usage(st: Float64Array, s: number, slot: number, now: number): number;
  /** Numbers per trace-table entry: `doubles` (a bucket, a window), 2 (a log), the parts' sum. */
  readonly traceWidth: number;
  /**
   * What the trace table keeps for a key in use that is dropped, written to
   * `out[o .. o + traceWidth)`: numbers that only grow as the state is more used (see
   * each layout), `-Infinity` first for none.
   */
  traceValue(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void;
  /**
   * Joins the trace at `fresh[f ..]` into the entry at `table[o ..]` (which may no longer
   * apply at `now`): the entry then bounds every key that wrote it.
   */
  traceCombine(table: Float64Array, o: number, fresh: Float64Array, f: number, now: number): void;
  /** True when the entry at `table[o ..]` applies at `now`: the state it holds is not fresh yet. */
  traceApplies(table: Float64Array, o: number, now: number): boolean;
  /**
   * A clock reading from which the entry at `table[o ..]` no longer applies, or later
   * (`-Infinity`: none): the engine skips the table once every entry's has passed.
   */
  traceExpiresMs(table: Float64Array, o: number): number;
  /**
   * Writes the most-used state the entry at `table[o ..]` bounds (a fresh state where it no
   * longer applies at `now`): a state that allows no request a state that wrote it would deny.
   */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void;
  /** True when `cost` fits the slot now (as `allowAt` would answer), changing nothing. */
  fitsAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean;
  /** Takes `cost` (> 0) from the slot now, unchecked (`allOf` checked every part first). */
  takeAt(st: Float64Array, s: number, slot: number, now: number, cost: number): void;
  /** `allow(cost)` of the slot: takes `cost` when it fits. */
  allowAt(st: Float64Array, s: number, slot: number, now: number, cost: number): boolean;
  /**
   * Gives back `cost` (> 0) units taken earlier, by the algorithm's refund rule without a
   * receipt (docs/semantics.md#refunds): never past the fresh state. Writes what leaf `i`
   * gave back into `given[o + i]`; returns the most a bucket leaf gave back (what the key's
   * receipts must count as refill), 0 for none.
   */
  refundAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    given: Float64Array,
    o: number,
  ): number;
  /** False when a refund without a receipt is refused (a fixed window, or an `allOf` with one). */
  readonly refundsWithoutReceipt: boolean;
  /** Leaves a slot decides for: 1, or the number of an `allOf`'s parts. */
  readonly leafCount: number;
  /**
   * Right after an allowed charge at `now`: each leaf's receipt mark (a bucket's full time,
   * a fixed window's end, a counter's window index, a log entry's leave time) into
   * `marks[o ..]`. Returns the latest clock reading at which any of them can give back.
   */
  markReceipt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    o: number,
  ): number;
  /**
   * A refund through a receipt at `now` (docs/semantics.md#refunds): leaf `i` gives back up
   * to `asked[o + i]` by its mark `marks[o + i]`, a bucket leaf at most its refill not yet
   * repaid less `creditSince` (the units the key's refunds credited since the charge), and
   * writes what it gave back into `given[o + i]`. Returns the most a bucket leaf gave back.
   */
  refundMarkedAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    marks: Float64Array,
    asked: Float64Array,
    creditSince: number,
    given: Float64Array,
    o: number,
  ): number;
  /** `consume` (`take`) or `peek` of the slot. */
  decideAt(
    st: Float64Array,
    s: number,
    slot: number,
    now: number,
    cost: number,
    take: boolean,
  ): Decision;
  /**
   * `reconfigure`: rewrites the state of a kept key at `st[s ..]` from this layout's
   * numbers to those of `next` (a layout of the same class, made from the reconfigured
   * policy), as the algorithm's own `reconfigure` carries its state over
   * (docs/semantics.md#changing-limits-live); a fresh state stays fresh. Before {@link adopt}.
   */
  retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void;
  /**
   * `reconfigure`: rewrites the trace entry at `table[o ..]` so that, read with the numbers of
   * `next`, it bounds what the keys that wrote it would hold had they been kept (each carried over
   * as {@link retuneSlot} does; the carry-over is monotone, so the entry still bounds every one of
   * them: never fresher); an entry that no longer applies is cleared. Before {@link adopt}.
   */
  retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void;
  /** `reconfigure`: takes the numbers of `next` (same class); every state was retuned first. */
  adopt(next: Kernel): void;
  /**
   * Numbers per key in a snapshot: `doubles` for a state held in the slot alone; 0 for one
   * whose size varies (a log's entries), whose snapshot says its own length.
   */
  readonly savedWidth: number;
  /** The slot's state as plain numbers, for a snapshot (docs/semantics.md#snapshots). */
  saveSlot(st: Float64Array, s: number, slot: number): number[];
  /**
   * Writes a state {@link saveSlot} returned into the slot (a log's ring made and accounted
   * as it grows), replacing what it held.
   * @throws {TypeError} For a state of another shape (its length), changing nothing.
   */
  loadSlot(st: Float64Array, s: number, slot: number, values: readonly number[]): void;
  /** The engine whose bytes a layout that keeps more per key (a log) accounts; called once by it. */
  bind(sink: { addBytes(delta: number, slot?: number): void }): void;
  /** Frees what the layout keeps for `slot` beyond its doubles (a log), through `bytes`. */
  release(slot: number, bytes: { addBytes(delta: number): void }): void;
  /** The engine grew to `slots` slots. */
  grow(slots: number): void;
}

/**
 * How a `KeyedLimiter` keeps the keys of a built-in class on its slab: a kernel with the
 * class's numbers, how clock readings are checked (a window's float-step bound; `Infinity`
 * for buckets, with the class named in the error), and for a bucket how its keys wait.
 * Each class says it (`keyedForm()`), so a new algorithm adds no row in the keyed engine. @internal
 */
export interface KeyedForm {
  readonly kernel: Kernel;
  readonly clockBoundMs: number;
  readonly clockWhere: string;
  readonly windowMs: number;
  /** A bucket's waiting numbers; `undefined`: a window's first-in, first-out queue. */
  readonly bucket:
    | { readonly capacity: number; readonly ratePerSecond: number; readonly shaping: boolean }
    | undefined;
}

/**
 * A built-in limiter as `allOf` (src/composite/all-of.ts) drives it: its kernel over its own
 * slot at a time of the caller's choosing, so that `allOf` reads every clock, then checks
 * every part, then charges all (see `AllOf.allow`). The same steps back each class's public
 * methods and their `…At` forms. `nowMs` is always a value `timeOf` returned; `cost` is checked.
 * @internal
 */
export interface KernelPart {
  /**
   * The time the limiter would decide at now: its clock read and checked, at least the
   * latest time it has seen. Keeps nothing.
   * @throws {TypeError} When the reading is not a number.
   * @throws {RangeError} When it is NaN or infinite, or past a window's float-step bound.
   */
  timeOf(): number;
  /**
   * The time the limiter would decide at for the explicit time `timeMs` (a finite number):
   * the later of it and the latest time seen, checked as a reading is. Keeps nothing.
   * @throws {RangeError} When past a window's float-step bound.
   */
  timeAt(timeMs: number): number;
  /** True when `cost` fits at `nowMs`, taking nothing (may move state on as `peek` does). */
  fitsAt(nowMs: number, cost: number): boolean;
  /** Takes `cost` at `nowMs`, where `fitsAt` just said it fits; a cost of 0 takes nothing. */
  takeAt(nowMs: number, cost: number): void;
  /** `consume(cost)` (`take` true) or `peek(cost)` at `nowMs`. */
  decideAt(nowMs: number, cost: number, take: boolean): Decision;
  /** `charge(cost)` at `nowMs`: `consume` with its receipt. */
  chargeAt(nowMs: number, cost: number): ChargeReceipt;
  /**
   * A refund at `nowMs` of `units` (checked; through `receipt`, at most what it still
   * holds), or without a receipt when `receipt` is undefined; returns the units given back.
   */
  refundAt(nowMs: number, units: number, receipt: ChargeReceipt | undefined): number;
  /** False when `refund(cost)` without a receipt refuses (a fixed window). */
  readonly refundsWithoutReceipt: boolean;
}

/** What a built-in class tells its base: its name, catalog id and option names. @internal */
export interface ShellSpec {
  /** The class name, for messages (`TokenBucket`, ...). */
  readonly where: string;
  /** The catalog id, a snapshot's `algorithm`. */
  readonly id: string;
  /** The constructor's option names, in its order: all but `clock` are a snapshot's fingerprint. */
  readonly options: readonly string[];
}

/**
 * What the algorithm classes (through `BucketBase` and `WindowBase`) share around their
 * {@link KernelPart} steps over one slot of their kernel: the latest time seen, deciding at an
 * explicit time, the receipt epoch and snapshots. Not exported from the package; its internal
 * members are marked so. Each class keeps its constructor (validation), public fields, docs,
 * `clone()` and `allow()` (the hot path, written out per class so it stays monomorphic).
 */
export abstract class KernelShell extends UnkeyedLimiterBase {
  /** @internal Latest time seen (clock readings and explicit times); earlier ones count as it. */
  protected seenMs = Number.NEGATIVE_INFINITY;
  /** @internal Moved by `reset`, `reconfigure` and `restore`: receipts from before give nothing back. */
  protected receiptEpoch = 0;
  /** @internal The class's name, catalog id and option names. */
  protected abstract readonly spec: ShellSpec;
  /** @internal The kernel deciding {@link state}. */
  protected abstract readonly kernel: Kernel;
  /** @internal The limiter's slot (offset 0, slot 0 of its kernel). */
  protected abstract readonly state: Float64Array;
  /** @internal A kernel with the limiter's numbers now. */
  protected abstract makeKernel(): Kernel;
  /** @internal See {@link KernelPart.timeAt}. */
  abstract timeAt(timeMs: number): number;
  /** @internal See {@link KernelPart.fitsAt}. */
  abstract fitsAt(now: number, cost: number): boolean;
  /** @internal See {@link KernelPart.takeAt}. */
  abstract takeAt(now: number, cost: number): void;
  /** @internal See {@link KernelPart.decideAt}. */
  abstract decideAt(now: number, cost: number, take: boolean): Decision;
  /** @internal See {@link KernelPart.refundAt}. */
  abstract refundAt(now: number, units: number, receipt: ChargeReceipt | undefined): number;
  /** @internal Reads the clock; a reading behind the latest one counts as the latest one. */
  protected abstract now(): number;
  /** See each class's `refund`. */
  abstract refund(cost?: number): number;

  /**
   * `consume(cost).allowed` as of `timeMs` (milliseconds on this limiter's clock) rather
   * than a clock reading, Go's `AllowN(t, n)`: for replaying a log or deciding a batch at
   * one reading. A time behind the latest one seen (by the clock or an earlier call) counts
   * as that latest one: docs/semantics.md#explicit-time.
   * @throws {TypeError} If `timeMs` or `cost` is not a number. {RangeError} If either is NaN
   *   or infinite, `cost` is negative, or `timeMs` is past a window's float-step bound.
   */
  allowAt(timeMs: number, cost?: number): boolean {
    const c = this.keepAt("allowAt", timeMs, cost);
    if (!this.fitsAt(this.seenMs, c)) return false;
    this.takeAt(this.seenMs, c);
    return true;
  }

  /** `consume(cost)` as of `timeMs`: see {@link allowAt} for the time. */
  consumeAt(timeMs: number, cost?: number): Decision {
    const c = this.keepAt("consumeAt", timeMs, cost);
    return this.decideAt(this.seenMs, c, true);
  }

  /** `peek(cost)` as of `timeMs`: see {@link allowAt} for the time. */
  peekAt(timeMs: number, cost?: number): Decision {
    const c = this.keepAt("peekAt", timeMs, cost);
    return this.decideAt(this.seenMs, c, false);
  }

  /** @internal Checks `method`'s arguments, keeps a later time in `seenMs`, returns the cost. */
  protected keepAt(method: string, timeMs: number, cost: number | undefined): number {
    const where = `${this.where}.${method}`;
    const t = checkTimeMs(where, timeMs);
    const c = cost === undefined ? 1 : checkCost(where, cost);
    this.seenMs = this.timeAt(t);
    return c;
  }

  /** @internal Class name for messages (`TokenBucket`, ...). */
  protected get where(): string {
    return this.spec.where;
  }

  /** @internal `refund(receipt, units)` or `refund(cost)`: checks them, then refunds now. */
  protected refundOf(cost: number | Receipt | undefined, units: number | undefined): number {
    const where = `${this.where}.refund`;
    if (typeof cost === "object" && cost !== null) {
      const r = checkReceipt(where, cost, this, units);
      return this.refundAt(this.now(), r.units, r.receipt);
    }
    const c = cost === undefined ? 1 : checkCost(where, cost);
    if (!this.kernel.refundsWithoutReceipt) throw this.receiptOnly(where);
    return this.refundAt(this.now(), c, undefined);
  }

  /** @internal The error of a refund without a receipt where only receipts give back. */
  protected receiptOnly(where: string): TypeError {
    return new TypeError(`${where}: give the receipt of the charge (refund(receipt, units))`);
  }

  /** @internal See {@link KernelPart.refundsWithoutReceipt}. */
  get refundsWithoutReceipt(): boolean {
    return this.kernel.refundsWithoutReceipt;
  }

  /** @internal The options that decide, in the constructor's order (a snapshot's fingerprint). */
  protected get snapshotOptions(): Readonly<Record<string, number>> {
    const options: Record<string, number> = {};
    const self = this as unknown as Readonly<Record<string, number>>;
    for (const name of this.spec.options) if (name !== "clock") options[name] = self[name]!;
    return options;
  }

  /** @internal Throws while the state cannot leave the process (a bucket's held units). */
  protected checkNothingHeld(_where: string): void {}

  /** @internal After a restore (a window's waiters are re-checked); by default nothing. */
  protected restored(): void {}

  /**
   * The limiter's state as plain, JSON-safe data: its kernel slot, the latest time it has
   * seen, the algorithm and the options that decide (docs/semantics.md#snapshots). Waiters
   * are not part of it.
   * @throws {RangeError} For a bucket, while units are held for waiters or reservations
   *   (they cannot leave the process): snapshot once they are served or cancelled.
   */
  snapshot(): LimiterSnapshot {
    this.checkNothingHeld(`${this.where}.snapshot`);
    return {
      version: SNAPSHOT_VERSION,
      algorithm: this.spec.id,
      options: this.snapshotOptions,
      latestMs: encodeNumber(this.seenMs),
      state: encodeState(this.kernel.saveSlot(this.state, 0, 0)),
    };
  }

  /**
   * Replaces the state with one {@link snapshot} returned, of a limiter of this class and
   * options: it then decides exactly as that limiter did. The latest time seen becomes the
   * later of both; receipts from before give nothing back; a window's waiters are re-checked.
   * @throws {TypeError} For something that is not a snapshot, or one of another format
   *   version, algorithm or option, naming what differs. {RangeError} For a bucket, while
   *   units are held for waiters or reservations. Either way nothing changes.
   */
  restore(snapshot: LimiterSnapshot): void {
    this.planRestore(snapshot)();
  }

  /** @internal Checks `snapshot`; the returned function restores it. */
  planRestore(snapshot: unknown): () => void {
    const where = `${this.where}.restore`;
    const { state, latestMs } = checkSnapshot(where, snapshot, this.spec.id, this.snapshotOptions);
    this.checkNothingHeld(where);
    const kernel = this.makeKernel();
    const probe = new Float64Array(this.state.length);
    checkStateAt(where, () => kernel.loadSlot(probe, 0, -1, state)); // its shape
    // A latest time a window cannot decide at is refused here, as KeyedLimiter refuses it,
    // not kept to make every later call throw.
    if (latestMs > this.seenMs) this.timeAt(latestMs);
    return () => {
      this.kernel.loadSlot(this.state, 0, 0, state);
      if (latestMs > this.seenMs) this.seenMs = latestMs;
      this.receiptEpoch++;
      this.restored();
    };
  }
}

/** The public methods a driver bypasses: an instance that has its own is not driven. */
const DRIVEN_METHODS = ["allow", "consume", "peek"] as const;

/**
 * `limiter` as a {@link KernelPart} when it is exactly one of the built-in classes (an
 * instance whose prototype's prototype is `base`, the window or bucket base, which only
 * the built-in classes extend: a user's subclass, whose overrides the kernel would bypass,
 * is not) without an `allow`, `consume` or `peek` of its own (a spy or a patch). @internal
 */
export function exactPart(limiter: KernelPart, base: object): KernelPart | undefined {
  // (Typed as a KernelPart, so the classes that pass themselves are checked to be one: their
  // declarations cannot say `implements KernelPart`, an internal type the .d.ts leaves out.)
  if (Object.getPrototypeOf(Object.getPrototypeOf(limiter)) !== base) return undefined;
  for (const name of DRIVEN_METHODS) if (Object.hasOwn(limiter, name)) return undefined;
  return limiter;
}

/**
 * What a kernel whose state is a fixed number of doubles shares (the buckets, the fixed
 * window, the sliding counter): its numbers in `params` as raw doubles (V8 keeps the
 * arithmetic unboxed), the first its `limit`, taken from `next` by `adopt`; its snapshot the
 * slot's doubles as they are; its trace entry the slot's state itself (rolled to now by
 * {@link roll}), restored exactly; nothing kept beyond the slot. @internal
 */
export abstract class DoublesKernel {
  abstract readonly doubles: number;
  readonly keyExtraBytes = 0;
  readonly leafCount = 1;
  readonly refundsWithoutReceipt: boolean = true;
  limit: number;
  /** @internal The kernel's numbers, `limit` first. */
  protected readonly params: Float64Array;

  /**
   * @param params The kernel's numbers, `limit` (a bucket's capacity) first.
   * @param counts Indexes of the slot's counts, which a snapshot may not hold negative.
   */
  constructor(
    params: readonly number[],
    private readonly counts: readonly number[] = [],
  ) {
    this.params = new Float64Array(params);
    this.limit = params[0]!;
  }

  abstract init(st: Float64Array, s: number, slot: number, now: number): void;
  abstract traceApplies(table: Float64Array, o: number, now: number): boolean;
  abstract retuneSlot(next: Kernel, st: Float64Array, s: number, slot: number, now: number): void;

  /** @internal Brings the slot's state to `now` where the kernel keeps it rolled; by default nothing. */
  protected roll(_st: Float64Array, _s: number, _now: number): void {}

  get traceWidth(): number {
    return this.doubles;
  }

  /** The slot's state, rolled to now. */
  traceValue(
    st: Float64Array,
    s: number,
    _slot: number,
    now: number,
    out: Float64Array,
    o: number,
  ): void {
    this.roll(st, s, now);
    for (let i = 0; i < this.doubles; i++) out[o + i] = st[s + i]!;
  }

  /** The entry's state, rolled to now (fresh where it no longer applies). */
  restore(
    st: Float64Array,
    s: number,
    slot: number,
    table: Float64Array,
    o: number,
    now: number,
  ): void {
    if (!this.traceApplies(table, o, now)) {
      this.init(st, s, slot, now);
      return;
    }
    for (let i = 0; i < this.doubles; i++) st[s + i] = table[o + i]!;
    this.roll(st, s, now);
  }

  /** An entry is a state: carried over as one. */
  retuneTrace(next: Kernel, table: Float64Array, o: number, now: number): void {
    this.retuneSlot(next, table, o, -1, now);
  }

  adopt(next: Kernel): void {
    this.params.set((next as unknown as DoublesKernel).params);
    this.limit = next.limit;
  }

  get savedWidth(): number {
    return this.doubles;
  }

  saveSlot(st: Float64Array, s: number, _slot?: number): number[] {
    return Array.from(st.subarray(s, s + this.doubles));
  }

  /**
   * Writes exactly `doubles` values into the slot. A negative count would admit past the
   * limit (a tampered snapshot granting a burst), so it is refused before anything changes.
   * @throws {TypeError} For another count of values. {RangeError} For a count that is not a
   *   finite number at least 0, naming its place (the caller names itself: `checkStateAt`).
   */
  loadSlot(st: Float64Array, s: number, _slot: number, values: readonly number[]): void {
    for (const i of this.counts) {
      const v = values[i];
      if (v !== undefined && !(v >= 0 && v - v === 0)) {
        throw new RangeError(
          `snapshot.state[${i}] is a count, which must be a finite number at least 0, got ${v}`,
        );
      }
    }
    const n = this.doubles;
    if (values.length !== n) {
      throw new TypeError(`snapshot.state has ${values.length} numbers, this algorithm keeps ${n}`);
    }
    for (let i = 0; i < n; i++) st[s + i] = values[i]!;
  }

  bind(): void {}

  release(): void {}

  grow(): void {}
}
