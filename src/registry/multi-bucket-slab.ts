import { bucketDecision, msToRefill, tokensAfter, tokensAt } from "../algorithms/bucket-math.js";
import { combine } from "../composite.js";
import type { Decision } from "../limiter.js";
import { fits } from "../numeric.js";
import { BucketSlab } from "./bucket-slab.js";

/** Doubles per bucket in a slot: tokens, then anchorMs. */
const STRIDE = 2;

/**
 * The fast path of {@link KeyedLimiter} for an `allOf` of buckets (`TokenBucket` or
 * `LeakyBucket` parts sharing one clock), such as 10 per second AND 1000 per hour: each key's
 * buckets side by side in one slot of the slab, one clock reading per call, no object per
 * key. Decisions are those of `allOf` over one bucket per part: every bucket is decided by
 * the shared bucket arithmetic and the results combined by `allOf`'s own `combine`, so an
 * allowed request takes from every bucket and a denied one from none.
 *
 * `params` holds `[seenMs, capacity0, rate0, capacity1, rate1, ...]`; a slot holds
 * `[tokens0, anchorMs0, tokens1, anchorMs1, ...]`.
 * @internal
 */
export class MultiBucketSlab extends BucketSlab {
  /** Number of buckets per key. */
  private get parts(): number {
    return this.stride / STRIDE;
  }

  /** Tokens of bucket `i` of the slot starting at `s` (a fresh bucket when `s < 0`). */
  private tokensOf(s: number, i: number, now: number): number {
    const p = this.params;
    const capacity = p[1 + STRIDE * i]!;
    if (s < 0) return capacity;
    const st = this.state;
    const b = s + STRIDE * i;
    return tokensAt(st[b]!, st[b + 1]!, now, capacity, p[2 + STRIDE * i]!);
  }

  /** The slot's first double, or -1 for a key without state. */
  private offsetOf(key: string): number {
    const slot = key === this.lastKey ? this.lastSlot : this.index.get(key);
    if (slot === undefined) return -1;
    this.lastKey = key;
    this.lastSlot = slot;
    return slot * this.stride;
  }

  /** Takes `cost` from every bucket (all of which fit), creating the key's slot if needed. */
  private take(key: string, s: number, cost: number, now: number): void {
    const n = this.parts;
    const offset = s < 0 ? this.insert(key, now) * this.stride : s;
    const st = this.state;
    for (let i = 0; i < n; i++) {
      // A new slot starts full: tokensOf(-1) is the capacity.
      const tokens = this.tokensOf(s, i, now);
      st[offset + STRIDE * i] = tokensAfter(tokens, cost);
      st[offset + STRIDE * i + 1] = now;
    }
  }

  override allow(key: string, cost: number): boolean {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    const s = this.offsetOf(key);
    const n = this.parts;
    // A free probe is allowed even in an overdraft (tokens a hair below 0).
    for (let i = 0; i < n; i++) if (!fits(cost, this.tokensOf(s, i, now))) return cost === 0;
    if (cost > 0) this.take(key, s, cost, now);
    return true;
  }

  override consume(key: string, cost: number): Decision {
    return this.decideAll(key, cost, true);
  }

  override peek(key: string, cost: number): Decision {
    return this.decideAll(key, cost, false);
  }

  private decideAll(key: string, cost: number, take: boolean): Decision {
    const now = this.now();
    if (--this.countdown === 0) this.stepNow();
    const s = this.offsetOf(key);
    const n = this.parts;
    const p = this.params;
    const decisions: Decision[] = [];
    let allowed = true;
    for (let i = 0; i < n; i++) {
      const tokens = this.tokensOf(s, i, now);
      const d = bucketDecision(cost, tokens, p[1 + STRIDE * i]!, p[2 + STRIDE * i]!);
      if (!d.allowed) allowed = false;
      decisions.push(d);
    }
    if (allowed) {
      if (take && cost > 0) this.take(key, s, cost, now);
    } else {
      // Nothing is taken: buckets that would allow report their state without the cost.
      for (let i = 0; i < n; i++) {
        if (decisions[i]!.allowed) {
          const tokens = this.tokensOf(s, i, now);
          decisions[i] = bucketDecision(0, tokens, p[1 + STRIDE * i]!, p[2 + STRIDE * i]!);
        }
      }
    }
    return combine(allowed, decisions);
  }

  /** True when every bucket of the slot is full again (keys with waiters are not in the slab). */
  protected override isIdle(slot: number, now: number): boolean {
    const s = slot * this.stride;
    const n = this.parts;
    for (let i = 0; i < n; i++) {
      if (this.tokensOf(s, i, now) < this.params[1 + STRIDE * i]!) return false;
    }
    return true;
  }

  /** Milliseconds until every bucket of the slot is full: its `resetAfterMs`. */
  protected override untilIdle(slot: number, now: number): number {
    const s = slot * this.stride;
    const n = this.parts;
    const p = this.params;
    let ms = 0;
    for (let i = 0; i < n; i++) {
      const capacity = p[1 + STRIDE * i]!;
      const until = msToRefill(capacity - this.tokensOf(s, i, now), p[2 + STRIDE * i]!);
      if (until > ms) ms = until;
    }
    return ms;
  }
}
