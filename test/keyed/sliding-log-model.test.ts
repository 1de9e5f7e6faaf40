/**
 * A keyed SlidingWindowLog (one arena for every key's ring: blocks grown in place, freed,
 * compacted) against a plain array of `(leaveAt, units)` per key, driven by fast-check.
 * Integer costs and a limit within the exact entries: no granules, so every decision
 * must match the model exactly.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { SlidingWindowLog } from "../../src/algorithms/sliding-window-log.js";
import { NEXT_UP } from "../../src/algorithms/window-math.js";
import type { Receipt } from "../../src/core/limiter.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import "../support/fast-check-seed.js";

interface Entry {
  leaveAt: number;
  units: number;
}
interface ModelReceipt {
  real: Receipt;
  entry: Entry;
  left: number;
  key: string;
  epoch: number;
}

class Model {
  logs = new Map<string, Entry[]>();
  epochs = new Map<string, number>();
  /** Per key: when the empty entries a refund took from the tail leave (the real log's tombstone). */
  tombs = new Map<string, number>();
  constructor(
    public limit: number,
    public windowMs: number,
  ) {}
  log(key: string, now: number): Entry[] {
    let l = this.logs.get(key);
    if (l === undefined) {
      l = [];
      this.logs.set(key, l);
    }
    while (l.length > 0 && l[0]!.leaveAt <= now) l.shift();
    if ((this.tombs.get(key) ?? Number.NEGATIVE_INFINITY) <= now) this.tombs.delete(key);
    return l;
  }
  sum(l: Entry[]): number {
    let s = 0;
    for (const e of l) s += e.units;
    return s;
  }
  decide(key: string, now: number, cost: number, take: boolean) {
    const l = this.log(key, now);
    const used = this.sum(l);
    const allowed = cost === 0 || used + cost <= this.limit;
    let entry: Entry | undefined;
    if (allowed && take && cost > 0) {
      let leaveAt = now + this.windowMs;
      const tomb = this.tombs.get(key);
      if (tomb !== undefined && tomb >= leaveAt) leaveAt = tomb + Math.abs(tomb) * NEXT_UP;
      this.tombs.delete(key);
      const last = l[l.length - 1];
      // Same stamp, or a newest entry leaving later (logged before a shorter window).
      if (last !== undefined && last.leaveAt >= leaveAt && last.units > 0) {
        last.units += cost;
        entry = last;
      } else {
        entry = { leaveAt, units: cost };
        l.push(entry);
      }
    }
    return { allowed, remaining: Math.max(0, this.limit - used - (allowed ? cost : 0)), entry };
  }
  refund(key: string, now: number, cost: number): number {
    const l = this.log(key, now);
    let left = cost;
    for (let i = l.length - 1; i >= 0 && left > 0; i--) {
      const e = l[i]!;
      const g = Math.min(e.units, left);
      e.units -= g;
      left -= g;
    }
    this.popEmpty(key, l);
    return cost - left;
  }
  popEmpty(key: string, l: Entry[]): void {
    while (l.length > 0 && l[l.length - 1]!.units === 0) {
      const gone = l.pop()!.leaveAt;
      if (gone > (this.tombs.get(key) ?? Number.NEGATIVE_INFINITY)) this.tombs.set(key, gone);
    }
  }
}

type Op =
  | { kind: "consume" | "peek" | "charge"; key: number; cost: number; dt: number }
  | { kind: "refund"; key: number; cost: number; dt: number }
  | { kind: "refundReceipt"; pick: number; units: number | undefined; dt: number }
  | { kind: "reset"; key: number; dt: number }
  | { kind: "copy"; key: number; to: number; dt: number }
  | { kind: "reconfigure"; limit: number; windowMs: number; dt: number };

const KEYS = 40;
const dt = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: 30 }),
  fc.integer({ min: 0, max: 400 }),
);
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constantFrom("consume" as const, "peek" as const, "charge" as const),
      key: fc.nat(KEYS - 1),
      cost: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 70 })),
      dt,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("refund" as const),
      key: fc.nat(KEYS - 1),
      cost: fc.integer({ min: 0, max: 20 }),
      dt,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("refundReceipt" as const),
      pick: fc.nat(),
      units: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
      dt,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("reset" as const), key: fc.nat(KEYS - 1), dt }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("copy" as const),
      key: fc.nat(KEYS - 1),
      to: fc.nat(KEYS - 1),
      dt,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("reconfigure" as const),
      limit: fc.integer({ min: 1, max: 64 }),
      windowMs: fc.integer({ min: 50, max: 2000 }),
      dt,
    }),
  },
);

function run(
  limit: number,
  windowMs: number,
  ops: Op[],
  withReconfigure: boolean,
  tight = false,
  keys = 1,
): void {
  let now = 1000;
  const clock = () => now;
  const keyed = new KeyedLimiter(new SlidingWindowLog({ limit, windowMs, clock }), {
    sweepIntervalMs: Number.POSITIVE_INFINITY,
    ...(tight ? { maxBytes: 2 ** 16 } : {}),
  });
  // At maxBytes the registry may merge, evict (keeping a trace) or refuse: never more
  // permissive than the model, which then logs what the registry admitted.
  const same = (got: number | boolean, want: number | boolean, where: string) => {
    if (!tight) expect(got, where).toBe(want);
    else expect(got <= want, `${where}: got ${got}, the model ${want}`).toBe(true);
  };
  const model = new Model(limit, windowMs);
  const receipts: ModelReceipt[] = [];
  const epochOf = (k: string) => model.epochs.get(k) ?? 0;
  const bump = (k: string) => model.epochs.set(k, epochOf(k) + 1);
  let globalEpoch = 0;
  for (const [i, o] of ops.entries()) {
    now += o.dt;
    const where = `op ${i} ${JSON.stringify(o)} at ${now}`;
    switch (o.kind) {
      case "consume":
      case "peek":
      case "charge": {
        const k = `k${o.key}:${i % keys}`;
        const d =
          o.kind === "charge"
            ? keyed.charge(k, o.cost)
            : o.kind === "consume"
              ? keyed.consume(k, o.cost)
              : keyed.peek(k, o.cost);
        const take = o.kind !== "peek" && (!tight || d.allowed);
        const want = model.decide(k, now, o.cost, take);
        same(d.allowed, want.allowed, where);
        if (d.allowed) same(d.remaining, want.remaining, where);
        if (o.kind === "charge" && want.entry !== undefined && d.allowed)
          receipts.push({
            real: d as Receipt,
            entry: want.entry,
            left: o.cost,
            key: k,
            epoch: epochOf(k) + globalEpoch * 1e6,
          });
        break;
      }
      case "refund": {
        const k = `k${o.key}:${i % keys}`;
        const got = keyed.refund(k, o.cost);
        const want = model.refund(k, now, tight ? got : o.cost);
        expect(got, where).toBe(want);
        break;
      }
      case "refundReceipt": {
        if (receipts.length === 0) break;
        const r = receipts[o.pick % receipts.length]!;
        const l = model.log(r.key, now);
        const valid = r.epoch === epochOf(r.key) + globalEpoch * 1e6 && l.includes(r.entry);
        const ask = o.units === undefined ? r.left : Math.min(o.units, r.left);
        const want = valid ? Math.min(ask, r.entry.units) : 0;
        const got = keyed.refund(r.real, o.units);
        same(got, want, `${where} receipt of ${r.key} ${JSON.stringify(r.entry)}`);
        r.entry.units -= got;
        r.left -= got;
        model.popEmpty(r.key, l);
        break;
      }
      case "reset": {
        const k = `k${o.key}:${i % keys}`;
        keyed.reset(k);
        model.logs.set(k, []);
        model.tombs.delete(k);
        bump(k);
        break;
      }
      case "copy": {
        const from = `k${o.key}:${i % keys}`;
        const to = `k${o.to}:${i % keys}`;
        if (tight) break;
        const snap = keyed.snapshot(from);
        keyed.restore(to, snap);
        const l = model.log(from, now).map((e) => ({ ...e }));
        // A restored log holds no empty entries the model would not.
        model.logs.set(to, l);
        const tomb = model.tombs.get(from);
        if (tomb === undefined) model.tombs.delete(to);
        else model.tombs.set(to, tomb);
        bump(to);
        break;
      }
      case "reconfigure": {
        if (!withReconfigure || tight) break;
        keyed.reconfigure({ limit: o.limit, windowMs: o.windowMs });
        const grow = o.windowMs - model.windowMs;
        for (const [k] of model.logs) {
          const l = model.log(k, now);
          if (grow > 0) for (const e of l) e.leaveAt += grow;
          const tomb = model.tombs.get(k);
          if (grow > 0 && tomb !== undefined) model.tombs.set(k, tomb + grow);
        }
        model.limit = o.limit;
        model.windowMs = o.windowMs;
        globalEpoch++;
        break;
      }
    }
  }
}

describe("keyed SlidingWindowLog against a model log per key", () => {
  test("every decision and refund matches", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 50, max: 2000 }),
        fc.array(op, { minLength: 1, maxLength: 400, size: "max" }),
        (limit, windowMs, ops) => run(limit, windowMs, ops, false),
      ),
      { numRuns: 300 },
    );
  });
  test("with reconfigure", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 50, max: 2000 }),
        fc.array(op, { minLength: 1, maxLength: 400, size: "max" }),
        (limit, windowMs, ops) => run(limit, windowMs, ops, true),
      ),
      { numRuns: 300 },
    );
  });
  test("at maxBytes: never more permissive than the model", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 16, max: 64 }),
        fc.integer({ min: 500, max: 5000 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(op, { minLength: 1, maxLength: 2000, size: "max" }),
        (limit, windowMs, keys, ops) => run(limit, windowMs, ops, false, true, keys),
      ),
      { numRuns: 200 },
    );
  });
});
