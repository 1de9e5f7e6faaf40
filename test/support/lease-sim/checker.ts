import type { LeasedDecision } from "../../../src/redis/leased/leased-token-bucket.js";
import type { LocalShare } from "../../../src/redis/leased/local-share.js";

/**
 * The lease simulator's invariants (docs/distributed.md#invariants), checked after every
 * step. Safety is checked per key over every window [a, b] of the run, in O(1) per
 * admission: the bound is a sum of terms that grow with time (prefixes, `P`) plus terms
 * read at the window's start (`S`), so a window is within it iff
 * `A(b) - P(b) <= capacity + min over a of (A(a) - P(a) + S(a))`, A the units admitted;
 * the minimum is kept from the points where A or S changes (before each decision on the
 * key, after each answer that carried it). Fewer start points only loosen the check.
 *
 * Two bounds, each with `capacity + refillPerSecond x T`, the units admitted on credit in
 * the window, the tokens the processes held in leases at its start (`held`), and a full
 * bucket per `FLUSHALL` in it:
 * - **exact**: plus every fallback bucket's budget (what it started with: its share of
 *   the level last seen, and its refill while it lived) — every admission is accounted for;
 * - **formula** (the docs' outage allowance): plus `capacity` per outage of the key (a
 *   time when some process had a fallback bucket for it) in the window and
 *   `refillPerSecond` over its outage time — that is, N processes' shares add up to one
 *   bucket.
 * @module
 */

/** One fallback bucket the checker follows. */
interface ShareTrack {
  readonly owner: number;
  readonly share: LocalShare;
  /** Its most tokens (`capacity / N`), and its refill per ms. */
  readonly cap: number;
  readonly perMs: number;
}

/** The checker's state of one key. */
interface KeyTrack {
  readonly key: string;
  admitted: number;
  creditAdmitted: number;
  leaseAdmitted: number;
  /** Units refunds gave back (they come off `admitted`: admitted minus refunded is bounded). */
  refunded: number;
  /** Units refunds put into leases (or on their way to the store): lease tokens they funded. */
  refundedIntoLeases: number;
  /** Fallback buckets alive (at last look). */
  shares: ShareTrack[];
  /** Sum of `cap` of every fallback bucket made so far. */
  shareCaps: number;
  /** Integral of the alive buckets' refill (tokens) up to `atMs`. */
  shareRefill: number;
  /** Outage time of the key (some fallback bucket alive) up to `atMs`. */
  outageMs: number;
  /** Outages of the key so far. */
  outages: number;
  atMs: number;
  /** min over start points of A - P + S, exact and formula. */
  minExact: number;
  minFormula: number;
}

/** Where the checker reads a process's state (the simulation's processes). */
export interface Observed {
  readonly owner: number;
  /** Closed: it admits nothing more, so its fallback buckets are gone (they stay in its table). */
  readonly closed: boolean;
  /** Tokens held for `key` now (0 without an entry). */
  held(key: string): number;
  /** The key's fallback bucket now, if any. */
  fallback(key: string): LocalShare | undefined;
  /** Tokens in that bucket now (on the process's own clock). */
  level(share: LocalShare): number;
}

/** The configuration the bounds are made of. */
export interface CheckedConfig {
  readonly capacity: number;
  readonly refillPerSecond: number;
  /** Safety is not checked under `'open'` (it admits beyond any bound by design). */
  readonly bounded: boolean;
}

export class Checker {
  readonly violations: string[] = [];
  private readonly keys = new Map<string, KeyTrack>();
  private flushes = 0;
  /** Worst excess seen of the formula's terms over the exact ones (diagnostics). */
  worstFormulaSlack = Number.POSITIVE_INFINITY;

  constructor(
    private readonly config: CheckedConfig,
    private readonly processes: () => readonly Observed[],
    /** Tokens of `key` given back and not yet in its bucket (on the network). */
    private readonly giving: (key: string) => number = () => 0,
    /**
     * Tokens of `key` given back a second time by calls run again after a flush forgot
     * their first run: `G` of the bound (docs/distributed.md).
     */
    private readonly givenAgain: (key: string) => number = () => 0,
  ) {}

  /** Records a violation (the first few of each kind are kept). */
  fail(message: string): void {
    if (this.violations.length < 20) this.violations.push(message);
  }

  /** A `FLUSHALL` (or a restart): every bucket is full again. */
  flushed(): void {
    this.flushes++;
  }

  private track(key: string, nowMs: number): KeyTrack {
    let t = this.keys.get(key);
    if (t === undefined) {
      t = {
        key,
        admitted: 0,
        creditAdmitted: 0,
        leaseAdmitted: 0,
        refunded: 0,
        refundedIntoLeases: 0,
        shares: [],
        shareCaps: 0,
        shareRefill: 0,
        outageMs: 0,
        outages: 0,
        atMs: nowMs,
        minExact: Number.POSITIVE_INFINITY,
        minFormula: Number.POSITIVE_INFINITY,
      };
      this.keys.set(key, t);
    }
    return t;
  }

  /** Moves the key's continuous terms to `nowMs`. */
  private advance(t: KeyTrack, nowMs: number): void {
    const dt = nowMs - t.atMs;
    if (dt > 0 && t.shares.length > 0) {
      let perMs = 0;
      for (const s of t.shares) perMs += s.perMs;
      t.shareRefill += perMs * dt;
      t.outageMs += dt;
    }
    if (nowMs > t.atMs) t.atMs = nowMs;
  }

  /** The prefixes P at now (exact, formula). */
  private prefixes(t: KeyTrack, nowMs: number): [number, number] {
    const { capacity, refillPerSecond: r } = this.config;
    const common =
      (r * nowMs) / 1000 + t.creditAdmitted + capacity * this.flushes + this.givenAgain(t.key);
    return [
      common + t.shareCaps + t.shareRefill,
      common + capacity * t.outages + (r * t.outageMs) / 1000,
    ];
  }

  /**
   * Looks at `key` in every process now: fallback buckets made or gone, and a start point
   * (tokens held, buckets alive) for the windows that begin here.
   */
  observe(key: string, nowMs: number): void {
    const t = this.track(key, nowMs);
    this.advance(t, nowMs);
    const processes = this.processes();
    // Buckets gone (cleared, or their process died or closed: a closed process admits
    // nothing, so its bucket ends the outage it belonged to, though its table keeps it).
    if (t.shares.length > 0) {
      t.shares = t.shares.filter((s) => {
        const p = processes.find((x) => x.owner === s.owner);
        return p !== undefined && !p.closed && p.fallback(key) === s.share;
      });
    }
    let held = this.giving(key);
    for (const p of processes) {
      held += p.held(key);
      const share = p.closed ? undefined : p.fallback(key);
      if (share !== undefined && !t.shares.some((s) => s.share === share))
        this.made(t, p.owner, share);
    }
    let alive = 0;
    for (const s of t.shares) {
      const level = processes.find((x) => x.owner === s.owner)?.level(s.share) ?? 0;
      alive += level > 0 ? level : 0;
    }
    const [pe, pf] = this.prefixes(t, nowMs);
    const exact = t.admitted - pe + held + alive;
    const formula = t.admitted - pf + held + (t.shares.length > 0 ? this.config.capacity : 0);
    if (exact < t.minExact) t.minExact = exact;
    if (formula < t.minFormula) t.minFormula = formula;
  }

  /**
   * A process closed or died at `nowMs`: its fallback buckets end now, not at the next
   * look at their keys (the outage time, and so the formula's refill, stops with them).
   */
  stopped(nowMs: number): void {
    for (const [key, t] of this.keys) if (t.shares.length > 0) this.observe(key, nowMs);
  }

  /** A fallback bucket was made for the key. */
  private made(t: KeyTrack, owner: number, share: LocalShare): void {
    const { capacity, refillPerSecond: r } = this.config;
    // Its budget: what it started with (its share of the level last seen), and its refill.
    const cap = share.startTokens > 0 ? share.startTokens : 0;
    if (t.shares.length === 0) t.outages++;
    t.shares.push({ owner, share, cap, perMs: (share.capacity / capacity) * (r / 1000) });
    t.shareCaps += cap;
  }

  /** After a decision on `key` by process `owner` (observe(key) ran just before it). */
  decided(
    owner: number,
    key: string,
    cost: number,
    took: boolean,
    d: LeasedDecision,
    nowMs: number,
    label: string,
  ): void {
    const where = () => `${label} t=${nowMs.toFixed(3)} p${owner} ${key} cost ${cost}`;
    const { capacity } = this.config;
    if (d.limit !== capacity) this.fail(`${where()}: limit ${d.limit}, capacity ${capacity}`);
    if (!(Number.isInteger(d.remaining) && d.remaining >= 0 && d.remaining <= d.limit)) {
      this.fail(`${where()}: remaining ${d.remaining}`);
    }
    if (d.allowed && d.retryAfterMs !== 0)
      this.fail(`${where()}: allowed with retryAfterMs ${d.retryAfterMs}`);
    if (!d.allowed && !(d.retryAfterMs > 0)) {
      this.fail(`${where()}: denied (${d.source}) with retryAfterMs ${d.retryAfterMs}`);
    }
    if (d.source === "pending" && (d.allowed || d.remaining !== 0)) {
      this.fail(`${where()}: pending ${JSON.stringify(d)}`);
    }
    if ((d.source === "full" || d.source === "stopped") && d.allowed) {
      this.fail(`${where()}: ${d.source} allowed`);
    }
    if (d.source === "credit" && !d.allowed) this.fail(`${where()}: credit denied`);
    if (!took || !d.allowed || cost === 0 || d.source === "open") return;
    const t = this.track(key, nowMs);
    t.admitted += cost;
    if (d.source === "credit") t.creditAdmitted += cost;
    if (d.source === "lease") t.leaseAdmitted += cost;
    if (!this.config.bounded) return;
    this.advance(t, nowMs);
    // Fallback buckets made by this very decision count from now.
    const p = this.processes().find((x) => x.owner === owner);
    const share = p?.fallback(key);
    if (share !== undefined && !t.shares.some((s) => s.share === share)) this.made(t, owner, share);
    const [pe, pf] = this.prefixes(t, nowMs);
    const scale = Math.max(1, capacity + (this.config.refillPerSecond * nowMs) / 1000);
    const tol = 1e-7 * scale;
    const overExact = t.admitted - pe - capacity - t.minExact;
    const overFormula = t.admitted - pf - capacity - t.minFormula;
    if (overExact > tol) {
      this.fail(
        `${where()}: ${d.source} admission passes the exact bound by ${overExact} (admitted ${t.admitted}, credit ${t.creditAdmitted}, lease ${t.leaseAdmitted}, shares ${t.shareCaps} + ${t.shareRefill}, flushes ${this.flushes}, min start ${t.minExact})`,
      );
    }
    if (overFormula > tol) {
      this.fail(
        `${where()}: ${d.source} admission passes the outage allowance formula by ${overFormula}`,
      );
    }
  }

  /**
   * A refund of `key` gave back `given` units, `intoLeases` of them into the processes'
   * leases (the change of what they hold): they come off the units admitted, so admitted
   * minus refunded stays within the bounds, and those put into leases count as lease
   * tokens handed out. A refund that adds more than it says passes a bound.
   */
  refunded(key: string, given: number, intoLeases: number, nowMs: number): void {
    if (!(given > 0) && intoLeases === 0) return;
    const t = this.track(key, nowMs);
    this.advance(t, nowMs);
    t.admitted -= given;
    t.refunded += given;
    t.refundedIntoLeases += intoLeases;
    if (intoLeases > given + 1e-9 * Math.max(1, given)) {
      this.fail(`t=${nowMs.toFixed(3)} ${key}: a refund of ${given} put ${intoLeases} into leases`);
    }
  }

  /**
   * Lease tokens are conserved: what the processes admitted from leases of `key`, plus what
   * they hold, never passes what the store handed out (taken - given back).
   */
  conserved(key: string, taken: number, given: number, nowMs: number): void {
    const t = this.keys.get(key);
    if (t === undefined) return;
    let held = 0;
    for (const p of this.processes()) held += p.held(key);
    const over = t.leaseAdmitted + held - (taken - given) - t.refundedIntoLeases;
    if (over > 1e-7 * Math.max(1, taken)) {
      this.fail(
        `t=${nowMs.toFixed(3)} ${key}: lease admissions ${t.leaseAdmitted} + held ${held} pass taken ${taken} - given ${given} by ${over}`,
      );
    }
  }

  /** Units admitted per key (for reports). */
  admittedOf(key: string): number {
    return this.keys.get(key)?.admitted ?? 0;
  }
}
