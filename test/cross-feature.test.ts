// The features together (docs/semantics.md#the-shared-invariant): random sequences of
// consume, refund (with and without receipts), block, unblock, reconfigure, reserve, cancel,
// wait, abort and clock steps, over every algorithm, allOf, KeyedLimiter under a key bound
// and the HTTP pipeline, against the reference model of the one invariant: over any
// interval the units admitted and still counted stay within the policy's bound; a denial or
// a throw changes nothing; a blocked key is denied. Seeds are fixed (SEED=n replays one).
import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import type { Clock } from "../src/core/limiter.js";
import { AfterResponse } from "../src/http/after-response.js";
import { checkAdapterOptions } from "../src/http/core.js";
import { Outcome, Pipeline } from "../src/http/pipeline.js";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  type Receipt,
  type Reservation,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../src/index.js";
import { type Act, breach, type Policy, widest } from "./support/invariant.js";
import { timerClock } from "./support/timer-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

const SEED = Number(process.env.SEED ?? 20_261_201);
const RUNS = Number(process.env.CROSS_RUNS ?? 60);

/** A limiter under test with the policies (one per part) its acts are checked against. */
interface Target {
  readonly name: string;
  make(clock: Clock): Limiter & Charging;
  readonly policies: readonly Policy[];
  /** `reconfigure` options that double the size (and the rate), or one per part. */
  readonly bigger: object | readonly (object | undefined)[];
  readonly biggerPolicies: readonly Policy[];
  /** True for a bucket (it reserves). */
  readonly bucket: boolean;
  /** False when a refund without a receipt is refused (a fixed window in it). */
  readonly keyless: boolean;
}

type Charging = {
  charge(cost?: number): Receipt;
  refund(receipt: Receipt, units?: number): number;
  reconfigure(options: unknown): void;
  reserve?(cost?: number): Reservation;
};

const tb = (capacity: number, rate: number): Policy => ({
  kind: "bucket",
  capacity,
  ratePerSecond: rate,
});
const win = (kind: "fixed" | "log" | "counter", limit: number, windowMs: number): Policy => ({
  kind,
  limit,
  windowMs,
});

const TARGETS: readonly Target[] = [
  {
    name: "TokenBucket",
    make: (clock) => new TokenBucket({ capacity: 4, refillPerSecond: 10, clock }),
    policies: [tb(4, 10)],
    bigger: { capacity: 8, refillPerSecond: 20 },
    biggerPolicies: [tb(8, 20)],
    bucket: true,
    keyless: true,
  },
  {
    name: "LeakyBucket",
    make: (clock) => new LeakyBucket({ capacity: 4, leakPerSecond: 10, clock }),
    policies: [tb(4, 10)],
    bigger: { capacity: 8, leakPerSecond: 20 },
    biggerPolicies: [tb(8, 20)],
    bucket: true,
    keyless: true,
  },
  {
    name: "FixedWindow",
    make: (clock) => new FixedWindow({ limit: 4, windowMs: 400, clock }),
    policies: [win("fixed", 4, 400)],
    bigger: { limit: 8 },
    biggerPolicies: [win("fixed", 8, 400)],
    bucket: false,
    keyless: false,
  },
  {
    name: "SlidingWindowLog",
    make: (clock) => new SlidingWindowLog({ limit: 4, windowMs: 400, clock }),
    policies: [win("log", 4, 400)],
    bigger: { limit: 8 },
    biggerPolicies: [win("log", 8, 400)],
    bucket: false,
    keyless: true,
  },
  {
    name: "SlidingWindowCounter",
    make: (clock) => new SlidingWindowCounter({ limit: 4, windowMs: 400, clock }),
    policies: [win("counter", 4, 400)],
    bigger: { limit: 8 },
    biggerPolicies: [win("counter", 8, 400)],
    bucket: false,
    keyless: true,
  },
  {
    name: "allOf(TokenBucket, FixedWindow)",
    make: (clock) =>
      allOf(
        new TokenBucket({ capacity: 4, refillPerSecond: 10, clock }),
        new FixedWindow({ limit: 6, windowMs: 400, clock }),
      ) as unknown as Limiter & Charging,
    policies: [tb(4, 10), win("fixed", 6, 400)],
    bigger: [{ capacity: 8 }, { limit: 12 }],
    biggerPolicies: [tb(8, 10), win("fixed", 12, 400)],
    bucket: false,
    keyless: false,
  },
];

/** One caller action after `gapMs`. */
const op = fc.record({
  gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 150 })),
  kind: fc.constantFrom(
    "charge",
    "charge",
    "charge",
    "refundReceipt",
    "refundKeyless",
    "reserve",
    "cancel",
    "wait",
    "abort",
    "reconfigure",
    "bad",
  ),
  cost: fc.constantFrom(0, 0.5, 1, 1, 2, 3),
  pick: fc.nat({ max: 50 }),
  units: fc.option(fc.constantFrom(0.5, 1, 2, 5), { nil: undefined }),
});

/**
 * What part `k` of `n` gave back through `receipt` so far: an `allOf`'s receipt keeps one
 * receipt per part (`parts`), a keyed one what each leaf gave (`refundedBy`); internal
 * fields, read here so that each policy's acts are checked by what its part did.
 */
function refundedOf(receipt: Receipt, k: number, n: number): number {
  if (n === 1) return receipt.refunded;
  const r = receipt as unknown as {
    parts?: readonly ({ refunded: number } | undefined)[];
    refundedBy?: Float64Array;
  };
  return r.refundedBy?.[k] ?? r.parts?.[k]?.refunded ?? receipt.refunded;
}

/** What a limiter says of itself at a few costs: equal before and after a call that must change nothing. */
function snapshot(limiter: Limiter): string {
  return JSON.stringify([0, 1, 4].map((c) => limiter.peek(c)));
}

describe("one limiter: every feature at once, against the shared invariant", () => {
  for (const target of TARGETS) {
    test(target.name, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), async (ops) => {
          const { clock, advance } = timerClock();
          try {
            const limiter = target.make(clock);
            let policies = target.policies;
            const n = policies.length;
            const acts: Act[][] = policies.map(() => []);
            const push = (atMs: number, units: number) =>
              acts.map((list) => {
                const act = { atMs, units };
                list.push(act);
                return act;
              });
            const receipts: { receipt: Receipt; act: Act[]; had: number[] }[] = [];
            const reservations: { r: Reservation; act: Act; cancelled: boolean }[] = [];
            const waits: { controller: AbortController; done: boolean }[] = [];
            for (const [i, o] of ops.entries()) {
              await advance(o.gapMs);
              const now = clock();
              const where = `op ${i} ${o.kind}(${o.cost}) at ${now}`;
              if (o.kind === "charge") {
                const before = snapshot(limiter);
                const receipt = limiter.charge(o.cost);
                if (!receipt.allowed) expect(snapshot(limiter), `${where}: a denial`).toBe(before);
                else if (receipt.units > 0) {
                  receipts.push({ receipt, act: push(now, receipt.units), had: acts.map(() => 0) });
                }
              } else if (o.kind === "refundReceipt" && receipts.length > 0) {
                const entry = receipts[o.pick % receipts.length]!;
                const given = limiter.refund(entry.receipt, o.units);
                expect(given, where).toBeLessThanOrEqual(entry.receipt.units);
                // Each part gives back by its own rule: what each gave, from its own receipt.
                for (let k = 0; k < n; k++) {
                  const now = refundedOf(entry.receipt, k, n);
                  entry.act[k]!.units -= now - entry.had[k]!;
                  entry.had[k] = now;
                }
              } else if (o.kind === "refundKeyless") {
                if (!target.keyless) {
                  const before = snapshot(limiter);
                  expect(() => (limiter as Limiter).refund!(o.cost), where).toThrow(TypeError);
                  expect(snapshot(limiter), `${where}: a throw`).toBe(before);
                } else {
                  const given = (limiter as Limiter).refund!(o.cost);
                  if (given > 0) push(now, -given);
                }
              } else if (o.kind === "reserve" && target.bucket) {
                const r = limiter.reserve!(o.cost);
                if (r.ok && o.cost > 0) {
                  const [act] = push(now + r.delayMs, o.cost);
                  reservations.push({ r, act: act!, cancelled: false });
                }
              } else if (o.kind === "cancel" && reservations.length > 0) {
                const entry = reservations[o.pick % reservations.length]!;
                if (!entry.cancelled && clock() <= entry.act.atMs) entry.act.units = 0;
                entry.cancelled = true;
                entry.r.cancel();
              } else if (o.kind === "wait") {
                const controller = new AbortController();
                const w = { controller, done: false };
                waits.push(w);
                const cost = o.cost;
                limiter.wait(cost, { signal: controller.signal }).then(
                  () => {
                    w.done = true;
                    if (cost > 0) push(clock(), cost);
                  },
                  () => {
                    w.done = true;
                  },
                );
              } else if (o.kind === "abort" && waits.length > 0) {
                waits[o.pick % waits.length]!.controller.abort();
              } else if (o.kind === "reconfigure") {
                limiter.reconfigure(target.bigger);
                policies = policies.map((p, k) => widest(p, target.biggerPolicies[k]!));
              } else if (o.kind === "bad") {
                const before = snapshot(limiter);
                expect(() => limiter.consume(-1), where).toThrow(RangeError);
                expect(() => limiter.charge(Number.NaN), where).toThrow(RangeError);
                expect(snapshot(limiter), `${where}: a throw`).toBe(before);
              }
            }
            for (const w of waits) w.controller.abort();
            await advance(10_000);
            policies.forEach((p, k) => {
              expect(breach(p, acts[k]!), JSON.stringify(acts[k])).toBeUndefined();
            });
          } finally {
            vi.useRealTimers();
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
    });
  }
});

describe("KeyedLimiter under a key bound: every feature at once, per key", () => {
  for (const target of TARGETS) {
    test(target.name, () => {
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 150 })),
              key: fc.constantFrom("a", "b", "c", "d", "e"),
              kind: fc.constantFrom(
                "charge",
                "charge",
                "charge",
                "refundReceipt",
                "refundKeyless",
                "block",
                "unblock",
                "reset",
                "reconfigure",
                "bad",
              ),
              cost: fc.constantFrom(0, 0.5, 1, 1, 2, 3),
              pick: fc.nat({ max: 50 }),
            }),
            { minLength: 1, maxLength: 60 },
          ),
          (ops) => {
            let now = 0;
            const clock = () => now;
            // At most 3 keys of 5: the others are pushed out, their traces kept.
            const keyed = new KeyedLimiter(target.make(clock) as never, { maxKeys: 3 });
            let policies = target.policies;
            const n = policies.length;
            const acts = new Map<string, Act[][]>();
            const push = (key: string, atMs: number, units: number): Act[] => {
              const lists = acts.get(key) ?? policies.map((): Act[] => []);
              acts.set(key, lists);
              return lists.map((list) => {
                const act = { atMs, units };
                list.push(act);
                return act;
              });
            };
            const receipts: { receipt: Receipt; act: Act[]; had: number[] }[] = [];
            const blockedUntil = new Map<string, number>();
            for (const [i, o] of ops.entries()) {
              now += o.gapMs;
              const where = `op ${i} ${o.kind}(${o.key}, ${o.cost}) at ${now}`;
              const key = o.key;
              const blocked = (blockedUntil.get(key) ?? Number.NEGATIVE_INFINITY) > now;
              if (o.kind === "charge") {
                const receipt = keyed.charge(key, o.cost);
                if (blocked) expect(receipt.allowed, `${where}: blocked`).toBe(false);
                if (receipt.allowed && receipt.units > 0) {
                  const act = push(key, now, receipt.units);
                  receipts.push({ receipt, act, had: policies.map(() => 0) });
                }
              } else if (o.kind === "refundReceipt" && receipts.length > 0) {
                const entry = receipts[o.pick % receipts.length]!;
                keyed.refund(entry.receipt);
                for (let k = 0; k < n; k++) {
                  const got = refundedOf(entry.receipt, k, n);
                  entry.act[k]!.units -= got - entry.had[k]!;
                  entry.had[k] = got;
                }
              } else if (o.kind === "refundKeyless" && target.keyless) {
                const given = keyed.refund(key, o.cost);
                if (given > 0) push(key, now, -given);
              } else if (o.kind === "block") {
                keyed.block(key, 300);
                blockedUntil.set(key, Math.max(blockedUntil.get(key) ?? 0, now + 300));
              } else if (o.kind === "unblock") {
                keyed.unblock(key);
                blockedUntil.delete(key);
              } else if (o.kind === "reset") {
                // A reset forgets the key's usage: the bound holds from it on.
                keyed.reset(key);
                blockedUntil.delete(key);
                acts.set(
                  key,
                  policies.map(() => []),
                );
              } else if (o.kind === "reconfigure") {
                keyed.reconfigure(target.bigger as object);
                policies = policies.map((p, k) => widest(p, target.biggerPolicies[k]!));
              } else if (o.kind === "bad") {
                expect(() => keyed.consume(key, -1), where).toThrow(RangeError);
              }
              if ((blockedUntil.get(key) ?? Number.NEGATIVE_INFINITY) > now) {
                expect(keyed.peek(key, 0).allowed, `${where}: a blocked key`).toBe(false);
              }
            }
            for (const [key, lists] of acts) {
              policies.forEach((p, k) => {
                expect(breach(p, lists[k]!), `${key}: ${JSON.stringify(lists[k])}`).toBeUndefined();
              });
            }
          },
        ),
        { numRuns: RUNS, seed: SEED },
      );
    });
  }
});

describe("the HTTP pipeline (framework-neutral): refunds, aborts and blocks together", () => {
  test("handlers started for a key within a window stay within the limit plus the completed requests refunded; a blocked key gets none", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<(status: number) => boolean>(
          () => true,
          (s) => s >= 400,
          (s) => s < 400,
        ),
        fc.array(
          fc.record({
            gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 300 })),
            key: fc.constantFrom("a", "b"),
            kind: fc.constantFrom("request", "request", "complete", "abort", "block"),
            status: fc.constantFrom(200, 401, 500),
            pick: fc.nat({ max: 30 }),
          }),
          { minLength: 1, maxLength: 50 },
        ),
        async (rule, ops) => {
          let now = 0;
          const limiter = new KeyedLimiter(
            new FixedWindow({ limit: 3, windowMs: 1000, clock: () => now }),
          );
          const refunded = new Map<string, number>(); // "key@window" → completed and refunded
          const started = new Map<string, number>();
          const blockedUntil = new Map<string, number>();
          interface Req {
            readonly key: string;
            readonly window: number;
          }
          const { config, hooks } = checkAdapterOptions(
            "test",
            { limiter, key: (req: Req) => req.key } as never,
            ["key"],
          );
          const pipeline = new Pipeline<Req>("test", config, hooks as never, {
            peer: () => "127.0.0.1",
            header: () => undefined,
            untrusted: () => {},
          });
          // refundIf as the adapters call it; a refund counts for its window only while it
          // lasts (a receipt gives nothing back to the next one).
          const after = new AfterResponse<Req>("test", config, (status, req) => {
            const yes = rule(status);
            const w = `${req.key}@${req.window}`;
            if (yes && Math.floor(now / 1000) === req.window) {
              refunded.set(w, (refunded.get(w) ?? 0) + 1);
            }
            return yes;
          });
          const open: Req[] = [];
          for (const [i, o] of ops.entries()) {
            now += o.gapMs;
            const where = `op ${i} ${o.kind} ${o.key} at ${now}`;
            if (o.kind === "request") {
              const req: Req = { key: o.key, window: Math.floor(now / 1000) };
              const result = pipeline.run(req, undefined);
              const outcome = result instanceof Outcome ? result : await result;
              const blocked = (blockedUntil.get(o.key) ?? Number.NEGATIVE_INFINITY) > now;
              if (blocked) expect(outcome.kind, `${where}: blocked`).toBe("limited");
              if (outcome.kind !== "pass") continue;
              const w = `${req.key}@${req.window}`;
              started.set(w, (started.get(w) ?? 0) + 1);
              after.open(req, outcome);
              open.push(req);
              expect(started.get(w)!, where).toBeLessThanOrEqual(3 + (refunded.get(w) ?? 0));
            } else if ((o.kind === "complete" || o.kind === "abort") && open.length > 0) {
              const [req] = open.splice(o.pick % open.length, 1);
              after.settle(req!, o.kind === "abort" ? 499 : o.status, o.kind === "abort");
            } else if (o.kind === "block") {
              limiter.block(o.key, 500);
              blockedUntil.set(o.key, Math.max(blockedUntil.get(o.key) ?? 0, now + 500));
            }
          }
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  });
});

describe("LeasedTokenBucket on MemoryLeaseStore: receipts, refunds and blocks at once", () => {
  // Two processes on one shared bucket (docs/distributed.md#invariants): over any interval,
  // the units admitted from leases and fallbacks, less those refunds gave back, stay within
  // capacity + refill + the leases held at its start (N x the lease cap); credit is its own
  // term (each new entry's, charged to the shared bucket). A key blocked in a process is
  // denied there on every method; a refund gives back at most what its receipt took, and
  // nothing after a reset; a throwing call changes nothing.
  const leaseOp = fc.record({
    gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 120 })),
    process: fc.constantFrom(0, 1),
    key: fc.constantFrom("a", "b"),
    kind: fc.constantFrom(
      "charge",
      "charge",
      "charge",
      "consume",
      "refundReceipt",
      "refundKeyless",
      "block",
      "unblock",
      "reset",
      "bad",
    ),
    cost: fc.constantFrom(0, 0.5, 1, 1, 2),
    pick: fc.nat({ max: 40 }),
    units: fc.option(fc.constantFrom(0.5, 1, 2), { nil: undefined }),
  });

  test("two processes: within the lease bound; blocked keys denied; refunds at most their units", async () => {
    const { LeasedTokenBucket, MemoryLeaseStore } = await import("../src/redis/index.js");
    const { manualClock } = await import("./support/manual-clock.js");
    const { manualScheduler } = await import("./support/manual-scheduler.js");
    const capacity = 5;
    const rate = 20;
    const leaseCap = 0.4 * capacity;
    await fc.assert(
      fc.asyncProperty(fc.array(leaseOp, { minLength: 1, maxLength: 30 }), async (steps) => {
        const clock = manualClock(1_000_000);
        const timers = manualScheduler(clock);
        const store = new MemoryLeaseStore({
          capacity,
          refillPerSecond: rate,
          clock,
          scheduler: timers.schedule,
        });
        const procs = [0, 1].map(
          () =>
            new LeasedTokenBucket({
              capacity,
              refillPerSecond: rate,
              store,
              clock,
              scheduler: timers.schedule,
              batchWindowMs: 5,
              initialCredit: 1,
              maxLeaseShare: 0.4,
            }),
        );
        const acts = new Map<string, Act[]>();
        const act = (key: string, atMs: number, units: number) =>
          acts.set(key, [...(acts.get(key) ?? []), { atMs, units }]);
        const receipts: { p: number; receipt: Receipt; resets: number }[] = [];
        const resets = [new Map<string, number>(), new Map<string, number>()];
        for (const [i, s] of steps.entries()) {
          await timers.advance(s.gapMs);
          const now = clock();
          const p = procs[s.process]!;
          const where = `op ${i} p${s.process} ${s.kind}(${s.key}, ${s.cost}) at ${now}`;
          const blockedHere = p.blockedMs(s.key) > 0;
          if (s.kind === "charge" || s.kind === "consume") {
            const r = s.kind === "charge" ? p.charge(s.key, s.cost) : undefined;
            const d = r ?? p.consume(s.key, s.cost);
            if (blockedHere) expect(d.allowed, `${where}: a blocked key`).toBe(false);
            if (blockedHere) expect(p.allow(s.key, 0), `${where}: allow`).toBe(false);
            if (d.allowed && s.cost > 0 && d.source !== "credit") act(s.key, now, s.cost);
            if (r !== undefined && r.units > 0) {
              receipts.push({
                p: s.process,
                receipt: r,
                resets: resets[s.process]!.get(s.key) ?? 0,
              });
            }
          } else if (s.kind === "refundReceipt" && receipts.length > 0) {
            const held = receipts[s.pick % receipts.length]!;
            const r = held.receipt;
            const before = r.refunded;
            const given = procs[held.p]!.refund(r, s.units);
            const most = Math.min(s.units ?? Number.POSITIVE_INFINITY, r.units - before);
            expect(given, where).toBeLessThanOrEqual(most + 1e-9);
            expect(given, where).toBeGreaterThanOrEqual(0);
            if ((resets[held.p]!.get(r.key as string) ?? 0) !== held.resets) {
              expect(given, `${where}: after a reset`).toBe(0);
            }
            act(r.key as string, now, -given);
          } else if (s.kind === "refundKeyless") {
            const given = p.refund(s.key, s.cost);
            expect(given, where).toBeLessThanOrEqual(s.cost + 1e-9);
            act(s.key, now, -given);
          } else if (s.kind === "block") {
            expect(p.block(s.key, 200), where).toBeGreaterThanOrEqual(200);
            expect(p.consume(s.key).source, where).toBe("blocked");
          } else if (s.kind === "unblock") {
            p.unblock(s.key);
          } else if (s.kind === "reset") {
            p.reset(s.key);
            resets[s.process]!.set(s.key, (resets[s.process]!.get(s.key) ?? 0) + 1);
          } else if (s.kind === "bad") {
            const before = JSON.stringify([p.peek(s.key, 1), p.blockedMs(s.key), p.stats]);
            const held = receipts[s.pick % Math.max(1, receipts.length)];
            expect(() => p.charge(s.key, -1), where).toThrow(RangeError);
            expect(() => p.block(s.key, 0), where).toThrow(RangeError);
            expect(() => p.refund(s.key, Number.NaN), where).toThrow(RangeError);
            if (held !== undefined && held.p === s.process) {
              expect(() => p.refund(held.receipt, -1), where).toThrow(RangeError);
            } else if (held !== undefined) {
              expect(() => p.refund(held.receipt), where).toThrow(TypeError); // another's
            }
            expect(JSON.stringify([p.peek(s.key, 1), p.blockedMs(s.key), p.stats]), where).toBe(
              before,
            );
          }
        }
        for (const [key, list] of acts) {
          expect(
            breach(
              { kind: "bucket", capacity: capacity + 2 * leaseCap, ratePerSecond: rate },
              list,
            ),
            `${key}: ${JSON.stringify(list)}`,
          ).toBeUndefined();
        }
        for (const p of procs) await p.close();
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });
});
