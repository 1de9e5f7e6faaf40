import { BlockTable } from "../../core/blocks.js";
import type { LeaseBlockChange, LeaseGrant } from "./exchange.js";

/**
 * The blocks of a `LeasedTokenBucket` (docs/redis.md#blocks-shared-by-every-process): the
 * one {@link BlockTable} every decision consults first, on the process clock, and what keeps
 * it in step with the key's block in the store: the changes this process made and has not
 * sent yet, the last one sent, and when the store was last asked about a blocked key.
 * @module
 */

/**
 * The longest block (or lift's mark) sent to the store, ms: a year. Longer ones are sent as
 * this, and again by the processes that hold them once the store's has ended (Redis takes
 * no expiry of 1e300 ms: the script would fail on every exchange of the key).
 */
export const MAX_STORE_BLOCK_MS = 31_622_400_000;

/** A blocked key asked again is checked with the store at most this often (ms), for a lift made elsewhere. */
export const BLOCK_CHECK_MS = 1000;

/** Links a new one looks at for one with nothing left to do, when every slot is taken. */
export const LINK_RECLAIM = 8;

/** What an answer asks of the limiter: bit flags. */
export const BLOCKED = 1;
/** The key has a change to send: queue it for the next batch. */
export const SEND = 2;

type Op = LeaseBlockChange["op"];

/** One key's link to the store. */
interface BlockSync {
  /** A change of this process still to send, and its end (a block's, or a lift's mark's), local ms. */
  op: Op | undefined;
  untilMs: number;
  /** A block set after a lift still to send: it goes after the lift. */
  after: { op: Op; untilMs: number } | undefined;
  /** The last change sent and not yet answered. */
  sent: LeaseBlockChange | undefined;
  /** Ask the store about the key with the next batch (a blocked key asked again). */
  probe: boolean;
  /** When the store was last asked about the key (local ms). */
  askedAtMs: number;
}

/**
 * The block table of one leased limiter and its link to the store. Bounded: at most
 * `maxKeys` blocked keys (a block of one more is refused here and counted, and sent to the
 * store all the same) and `2 x maxKeys` links (one per key blocked here, or with a change
 * to send; a change past that is dropped); ended blocks and links with nothing left to do
 * go when looked at, or by {@link sweep}. No call costs a pass over the links: a new link
 * looks at a few old ones for room ({@link LINK_RECLAIM}).
 */
export class LeaseBlocks {
  readonly table: BlockTable;
  private readonly sync = new Map<string, BlockSync>();
  private cursor: Iterator<[string, BlockSync]> | undefined;

  constructor(private readonly maxKeys: number) {
    this.table = new BlockTable(maxKeys);
  }

  /** Keys with a link to the store (blocked here, or with a change to send). */
  get size(): number {
    return this.sync.size;
  }

  /**
   * Blocks `key` here for `ms` from `nowMs` (`once`: unless it is blocked already) and keeps
   * the change to send. Returns the ms it is blocked here from now (0: the table is full;
   * the change is sent all the same).
   */
  set(key: string, ms: number, once: boolean, nowMs: number): number {
    const left = this.table.blockedMs(key, nowMs);
    if (once && left > 0) return left;
    this.table.block(key, nowMs + ms, nowMs);
    this.keep(key, once ? "once" : "block", nowMs + ms, nowMs);
    return this.table.blockedMs(key, nowMs);
  }

  /** Lifts the block of `key` here and keeps the lift to send; true when it was blocked here. */
  lift(key: string, nowMs: number): boolean {
    const until = this.table.untilOf(key, nowMs);
    const was = this.table.unblock(key, nowMs);
    this.keep(key, "lift", until > nowMs ? until : nowMs, nowMs);
    return was;
  }

  /** True when `key` has a change to send. */
  pending(key: string): boolean {
    return this.sync.get(key)?.op !== undefined;
  }

  /** Keys with a change to send (for `close()`). */
  *pendingKeys(): Generator<string> {
    for (const [key, s] of this.sync) if (s.op !== undefined) yield key;
  }

  /**
   * What `key`'s next exchange carries: a change (now in flight), `null` to ask without one
   * (a probe), or undefined for nothing.
   */
  outgoing(key: string, nowMs: number): LeaseBlockChange | null | undefined {
    const s = this.sync.get(key);
    if (s === undefined) return undefined;
    let change: LeaseBlockChange | undefined;
    const op = s.op;
    if (op !== undefined) {
      const left = s.untilMs - nowMs;
      const ms = left < MAX_STORE_BLOCK_MS ? left : MAX_STORE_BLOCK_MS;
      if (op === "lift") change = { op, ms: ms > 0 ? ms : 0 };
      else if (ms > 0) change = { op, ms };
      s.op = s.after?.op;
      s.untilMs = s.after?.untilMs ?? 0;
      s.after = undefined;
    }
    if (change === undefined && !s.probe) return undefined;
    s.probe = false;
    s.askedAtMs = nowMs;
    if (change === undefined) return null;
    s.sent = change;
    return change;
  }

  /**
   * The store's answer for `key` (`carried`: the change its request carried): records a block the
   * store holds; lifts one here that the store says was lifted since; sends again one the store
   * lost (a `FLUSHALL`, an eviction, a restart). Returns {@link BLOCKED} and {@link SEND} flags.
   */
  answered(
    key: string,
    carried: LeaseBlockChange | undefined,
    grant: LeaseGrant,
    nowMs: number,
  ): number {
    const blockedMs = grant.blockedMs;
    if (blockedMs === undefined || (blockedMs === 0 && this.sync.size === 0)) return 0;
    let s = this.sync.get(key);
    if (s !== undefined && carried !== undefined && s.sent === carried) s.sent = undefined;
    const more = s?.op !== undefined ? SEND : 0;
    if (blockedMs > 0) {
      // A lift of ours on its way comes after this answer: the block it lifts stays lifted here.
      if (s !== undefined && (s.op === "lift" || s.sent?.op === "lift")) return more;
      this.table.block(key, nowMs + blockedMs, nowMs);
      if (s === undefined && this.table.untilOf(key, nowMs) > nowMs) {
        s = this.link(key, nowMs, nowMs);
      }
      if (s !== undefined) s.askedAtMs = nowMs;
      return BLOCKED | more;
    }
    if (s === undefined) return 0;
    // A change of ours still on its way: the store's answer predates it.
    if (s.op !== undefined || s.sent !== undefined) return more;
    const until = this.table.untilOf(key, nowMs);
    if (!(until > nowMs)) {
      this.sync.delete(key);
      return 0;
    }
    if ((grant.liftedAgoMs ?? Number.POSITIVE_INFINITY) < Number.POSITIVE_INFINITY) {
      // Lifted in the store after this process learned or set it (its block was there then).
      this.table.unblock(key, nowMs);
      this.sync.delete(key);
      return 0;
    }
    // The store lost it: set it again, keeping a block in place there as it is.
    this.keep(key, "once", until, nowMs);
    return SEND;
  }

  /**
   * The exchange that carried `carried` for `key` failed (`late`: it reached the store after
   * its deadline and wrote nothing). A block is sent again (twice sets the same end); a lift
   * only when nothing was written (it may have been applied, and sent again it could lift a
   * block set since). True when there is a change to send.
   */
  failed(key: string, carried: LeaseBlockChange, late: boolean, nowMs: number): boolean {
    const s = this.sync.get(key);
    if (s === undefined) return false;
    if (s.sent === carried) s.sent = undefined;
    if (s.op === undefined) {
      if (carried.op === "lift") {
        if (late) this.keep(key, "lift", nowMs + carried.ms, nowMs);
      } else {
        // Its end as this process knows it (the table may have refused the block: then the
        // end it was sent with, counted from now, a little later than sent).
        const until = this.table.untilOf(key, nowMs);
        this.keep(key, carried.op, until > nowMs ? until : nowMs + carried.ms, nowMs);
      }
    }
    return s.op !== undefined;
  }

  /**
   * A blocked key was asked: true when the store should be asked about it again (at most
   * every {@link BLOCK_CHECK_MS}, nothing of ours on its way), so that a lift made in
   * another process reaches this one.
   */
  probe(key: string, nowMs: number): boolean {
    const s = this.sync.get(key) ?? this.link(key, nowMs, nowMs - BLOCK_CHECK_MS);
    if (s === undefined || s.op !== undefined || s.sent !== undefined || s.probe) return false;
    if (nowMs - s.askedAtMs < BLOCK_CHECK_MS) return false;
    s.probe = true;
    return true;
  }

  /** Drops up to `count` links with nothing left to do (no block here, nothing to send). */
  sweep(nowMs: number, count: number): void {
    for (let i = 0; i < count && this.sync.size > 0; i++) {
      let next = this.cursor?.next();
      if (next === undefined || next.done === true) {
        this.cursor = this.sync.entries();
        next = this.cursor.next();
        if (next.done === true) return;
      }
      const [key, s] = next.value;
      if (s.op !== undefined || s.sent !== undefined || s.probe) continue;
      if (!(this.table.untilOf(key, nowMs) > nowMs)) this.sync.delete(key);
    }
  }

  /** Keeps a change of this process to send, merged with one waiting. */
  private keep(key: string, op: Op, untilMs: number, nowMs: number): void {
    const s = this.sync.get(key) ?? this.link(key, nowMs, nowMs);
    if (s === undefined) return; // every slot is taken: the change is dropped
    if (op === "lift") {
      // A lift supersedes what waits; its mark is kept at least as long as either.
      s.untilMs = s.op === "lift" && s.untilMs > untilMs ? s.untilMs : untilMs;
      s.op = "lift";
      s.after = undefined;
    } else if (s.op === "lift") {
      const a = s.after;
      s.after = {
        op: a?.op === "block" ? "block" : op,
        untilMs: Math.max(a?.untilMs ?? 0, untilMs),
      };
    } else {
      // Merged with a change waiting: a block outranks a once, and the later end stays.
      if (s.op === undefined || untilMs > s.untilMs) s.untilMs = untilMs;
      if (s.op === undefined || op === "block") s.op = op;
    }
  }

  /** A new link for `key`, or undefined when every slot is taken (after looking at a few for room). */
  private link(key: string, nowMs: number, askedAtMs: number): BlockSync | undefined {
    if (this.sync.size >= 2 * this.maxKeys) {
      this.sweep(nowMs, LINK_RECLAIM);
      if (this.sync.size >= 2 * this.maxKeys) return undefined;
    }
    const s: BlockSync = {
      op: undefined,
      untilMs: 0,
      after: undefined,
      sent: undefined,
      probe: false,
      askedAtMs,
    };
    this.sync.set(key, s);
    return s;
  }
}
