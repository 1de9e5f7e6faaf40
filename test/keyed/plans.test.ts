import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  allOf,
  type CloneableLimiter,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from "../../src/index.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { settleLog, timerClock } from "../support/timer-clock.js";

/**
 * Per-key plans on the fast path: `new KeyedLimiter({ plans, plan })` decides every key as
 * one KeyedLimiter per plan would, in one slab under one bound.
 */

const NO_SWEEP = { sweepIntervalMs: Number.POSITIVE_INFINITY } as const;
const planOf = (key: string) => (key.startsWith("pro:") ? "pro" : "free");

describe("a full registry of plans", () => {
  test("maxKeys 4 with a plan function admits 20 new clients and keeps a limited client limited", () => {
    const clock = manualClock(1_000_000);
    const keyed = new KeyedLimiter(
      {
        plans: {
          free: new TokenBucket({ capacity: 2, refillPerSecond: 0.01, clock }),
          pro: new TokenBucket({ capacity: 10, refillPerSecond: 0.1, clock }),
        },
        plan: planOf,
      },
      { ...NO_SWEEP, maxKeys: 4 },
    );
    // A free client uses up its plan; a pro client takes part of its own.
    expect([keyed.allow("free:abuser"), keyed.allow("free:abuser")]).toEqual([true, true]);
    expect(keyed.allow("free:abuser")).toBe(false);
    for (let i = 0; i < 5; i++) expect(keyed.allow("pro:steady")).toBe(true);
    let admitted = 0;
    for (let i = 0; i < 20; i++) {
      clock.advance(1);
      if (keyed.allow(i % 2 === 0 ? `free:new-${i}` : `pro:new-${i}`)) admitted++;
      expect(keyed.size).toBeLessThanOrEqual(4);
    }
    expect(admitted).toBe(20);
    // Pushed out by the flood, neither comes back fresher than it left.
    expect(keyed.allow("free:abuser")).toBe(false);
    expect(keyed.consume("pro:steady", 6).allowed).toBe(false);
    expect(keyed.consume("pro:steady", 5).allowed).toBe(true);
    expect(keyed.stats.evictedLossy).toBeGreaterThan(0);
  });

  test("a key of each plan decides by its own plan's numbers", () => {
    const clock = manualClock(0);
    const keyed = new KeyedLimiter({
      plans: {
        free: new FixedWindow({ limit: 2, windowMs: 1000, clock }),
        pro: new FixedWindow({ limit: 5, windowMs: 1000, clock }),
      },
      plan: planOf,
    });
    expect(keyed.consume("free:a")).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
    expect(keyed.consume("pro:a")).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    expect(keyed.peek("pro:never")).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    expect(keyed.size).toBe(2);
  });
});

describe("waiting, receipts and blocks on plans", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test.each([
    {
      name: "TokenBucket",
      free: (clock: () => number) => new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }),
      pro: (clock: () => number) => new TokenBucket({ capacity: 1, refillPerSecond: 10, clock }),
    },
    {
      name: "LeakyBucket",
      // A leaky bucket queues a waiter behind the level: room for one.
      free: (clock: () => number) => new LeakyBucket({ capacity: 2, leakPerSecond: 1, clock }),
      pro: (clock: () => number) => new LeakyBucket({ capacity: 2, leakPerSecond: 10, clock }),
    },
    {
      name: "FixedWindow",
      free: (clock: () => number) => new FixedWindow({ limit: 1, windowMs: 1000, clock }),
      pro: (clock: () => number) => new FixedWindow({ limit: 1, windowMs: 100, clock }),
    },
  ])("$name: a key waits by its own plan's numbers", async ({ free, pro }) => {
    const { clock, advance } = timerClock();
    const keyed = new KeyedLimiter(
      { plans: { free: free(clock), pro: pro(clock) }, plan: planOf },
      NO_SWEEP,
    );
    expect(keyed.allow("free:a")).toBe(true);
    expect(keyed.allow("pro:a")).toBe(true);
    const { log, track } = settleLog(clock);
    const done = Promise.all([
      track("free", keyed.wait("free:a")),
      track("pro", keyed.wait("pro:a")),
      track("pro-new", keyed.wait("pro:b", 3)),
    ]);
    await advance(1000);
    await done;
    expect(log).toEqual(["pro-new!RangeError@0", "pro@100", "free@1000"]);
  });

  test("reconfigure of one plan re-plans its waiters and leaves the other plan's as they were", async () => {
    const { clock, advance } = timerClock();
    const keyed = new KeyedLimiter(
      {
        plans: {
          free: new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
          pro: new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
        },
        plan: planOf,
      },
      NO_SWEEP,
    );
    keyed.consume("free:a", 2);
    keyed.consume("pro:a", 2);
    const { log, track } = settleLog(clock);
    const done = Promise.all([
      track("free", keyed.wait("free:a", 2)),
      track("pro", keyed.wait("pro:a", 2)),
    ]);
    await advance(500);
    keyed.reconfigure("pro", { refillPerSecond: 3 }); // 0.5 token, then 1.5 more at 3/s
    await advance(1500);
    await done;
    expect(log).toEqual(["pro@1000", "free@2000"]);
    expect(keyed.peek("pro:new", 0)).toMatchObject({ limit: 2, remaining: 2 });
  });

  test("a waiting key reset or cleared keeps its plan, without asking the plan function again", async () => {
    const { clock, advance } = timerClock();
    const asked: string[] = [];
    const keyed = new KeyedLimiter(
      {
        plans: {
          free: new FixedWindow({ limit: 1, windowMs: 1000, clock }),
          pro: new FixedWindow({ limit: 3, windowMs: 1000, clock }),
        },
        plan: (key) => {
          asked.push(key);
          return planOf(key);
        },
      },
      NO_SWEEP,
    );
    keyed.consume("pro:a", 3);
    const waiting = keyed.wait("pro:a", 3);
    keyed.allow("free:b"); // another key asked last
    keyed.reset("pro:a");
    keyed.clear();
    expect(asked).toEqual(["pro:a", "free:b"]);
    expect(keyed.stats.plans).toEqual({ free: 0, pro: 1 });
    await advance(1000);
    await expect(waiting).resolves.toMatchObject({ allowed: true, limit: 3 });
    expect(keyed.peek("pro:a", 0)).toMatchObject({ limit: 3, remaining: 0 });
  });

  test("charge and refund through a receipt, and a block, keep to the key's plan", () => {
    const clock = manualClock(0);
    const keyed = new KeyedLimiter({
      plans: {
        free: new TokenBucket({ capacity: 2, refillPerSecond: 0, clock }),
        pro: new TokenBucket({ capacity: 5, refillPerSecond: 0, clock }),
      },
      plan: planOf,
    });
    const receipt = keyed.charge("pro:a", 4);
    expect(receipt.remaining).toBe(1);
    expect(keyed.refund(receipt, 3)).toBe(3);
    expect(keyed.peek("pro:a", 0).remaining).toBe(4);
    expect(keyed.refund("pro:a", 9)).toBe(1);
    keyed.block("free:b", 1000);
    expect(keyed.consume("free:b")).toMatchObject({ allowed: false, limit: 2, retryAfterMs: 1000 });
    clock.advance(1000);
    expect(keyed.consume("free:b")).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
  });
});

describe("checking plans", () => {
  const clock = manualClock(0);
  const other = manualClock(0);
  const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 1, clock });
  const custom: Limiter = {
    allow: () => true,
    consume: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
    peek: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }),
    reset: () => {},
    isIdle: () => true,
    wait: () => Promise.reject(new Error("no")),
  } as unknown as Limiter;
  test.each([
    {
      name: "an unknown option, with a hint",
      plans: { plans: { free: bucket }, plan: planOf, plam: 1 },
      message:
        'KeyedLimiter: unknown option "plam" (did you mean "plan"?); known options: plans, plan',
    },
    {
      name: "a missing plan function",
      plans: { plans: { free: bucket } },
      message: /^KeyedLimiter: missing option "plan"; for example: new KeyedLimiter\(\{ plans:/,
    },
    {
      name: "a plan function without plans",
      plans: { plan: planOf },
      message: /^KeyedLimiter: missing option "plans"; for example:/,
    },
    {
      name: "plans as a Map",
      plans: { plans: new Map([["free", bucket]]), plan: planOf },
      message:
        "KeyedLimiter: plans must be an object of named limiters ({ free: limiter }), got a Map",
    },
    {
      name: "a plan that is not a function",
      plans: { plans: { free: bucket }, plan: "free" },
      message: 'KeyedLimiter: plan must be a function (key) => plan name, got "free" (string)',
    },
    {
      name: "no plans",
      plans: { plans: {}, plan: planOf },
      message: "KeyedLimiter: plans must name at least one plan, got none",
    },
    {
      name: "a custom limiter",
      plans: { plans: { free: bucket, pro: custom }, plan: planOf },
      message:
        /^KeyedLimiter: plans\.pro must be a built-in limiter .* a custom limiter takes the generic path/,
    },
    {
      name: "plans of two algorithms",
      plans: {
        plans: { free: bucket, pro: new FixedWindow({ limit: 5, windowMs: 1000, clock }) },
        plan: planOf,
      },
      message:
        "KeyedLimiter: plans.pro is a FixedWindow but plans.free a TokenBucket: every plan must be of one algorithm (one slab holds one layout); give each algorithm its own KeyedLimiter",
    },
    {
      name: "plans on two clocks",
      plans: {
        plans: {
          free: bucket,
          pro: new TokenBucket({ capacity: 5, refillPerSecond: 1, clock: other }),
        },
        plan: planOf,
      },
      message:
        "KeyedLimiter: plans.pro has another clock than plans.free: every plan must share one clock (one reading serves a call)",
    },
    {
      name: "every problem in one message",
      plans: {
        plans: {
          free: bucket,
          pro: custom,
          team: new SlidingWindowLog({ limit: 1, windowMs: 1, clock }),
        },
        plan: 3,
      },
      message:
        /^KeyedLimiter: 3 problems with the plans:\n {2}- plan must be a function .*\n {2}- plans\.pro must be a built-in limiter .*\n {2}- plans\.team is a SlidingWindowLog but plans\.free a TokenBucket/,
    },
  ])("$name is a TypeError naming it", ({ plans, message }) => {
    expect(() => new KeyedLimiter(plans as never)).toThrow(
      typeof message === "string" ? new TypeError(message) : message,
    );
    try {
      new KeyedLimiter(plans as never);
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
    }
  });

  test("a plan function that answers an unknown name throws for that call and keeps nothing", () => {
    const keyed = new KeyedLimiter({
      plans: { free: bucket },
      plan: (key) => (key === "gold:a" ? ("gold" as "free") : "free"),
    });
    expect(() => keyed.allow("gold:a")).toThrow(
      new TypeError(
        'KeyedLimiter: plan(key) must return one of "free", got "gold" (string) for key "gold:a"',
      ),
    );
    expect(() => keyed.consume("gold:a")).toThrow(TypeError);
    expect(() => keyed.peek("gold:a")).toThrow(TypeError);
    expect(keyed.size).toBe(0);
    expect(keyed.allow("free:a")).toBe(true);
  });

  test("reconfigure names a plan on a plan registry, and only there", () => {
    const keyed = new KeyedLimiter({ plans: { free: bucket }, plan: () => "free" });
    expect(() => keyed.reconfigure({ capacity: 3 })).toThrow(
      new TypeError(
        'KeyedLimiter.reconfigure: a registry built from plans changes one plan at a time: reconfigure(plan, options), with plan one of "free"',
      ),
    );
    expect(() => keyed.reconfigure("pro", { capacity: 3 })).toThrow(
      new TypeError('KeyedLimiter.reconfigure: plan must be one of "free", got "pro" (string)'),
    );
    expect(() => keyed.reconfigure("free", { capacity: -1 })).toThrow(RangeError);
    expect(() => new KeyedLimiter(bucket).reconfigure("free", { capacity: 3 })).toThrow(
      new TypeError(
        "KeyedLimiter.reconfigure: reconfigure(plan, options) is for a registry built from plans ({ plans, plan }); this one has one policy: reconfigure(options)",
      ),
    );
    // The template is never changed.
    expect(bucket.capacity).toBe(2);
  });
});

/** One algorithm under the plan property: two plans of it, and options to reconfigure one with. */
interface PlanCase {
  readonly name: string;
  readonly make: (clock: ManualClock, size: number) => CloneableLimiter;
  readonly retune: (size: number) => object | readonly (object | undefined)[];
}

const cases: readonly PlanCase[] = [
  {
    name: "TokenBucket",
    make: (clock, n) => new TokenBucket({ capacity: n, refillPerSecond: n / 4, clock }),
    retune: (n) => ({ capacity: n, refillPerSecond: n / 2 }),
  },
  {
    name: "LeakyBucket",
    make: (clock, n) => new LeakyBucket({ capacity: n, leakPerSecond: n / 4, clock }),
    retune: (n) => ({ capacity: n }),
  },
  {
    name: "FixedWindow",
    make: (clock, n) => new FixedWindow({ limit: n, windowMs: 1000, clock }),
    retune: (n) => ({ limit: n }),
  },
  {
    name: "SlidingWindowLog",
    make: (clock, n) => new SlidingWindowLog({ limit: n, windowMs: 1000, clock }),
    retune: (n) => ({ limit: n, windowMs: 500 * n }),
  },
  {
    name: "SlidingWindowCounter",
    make: (clock, n) => new SlidingWindowCounter({ limit: n, windowMs: 1000, clock }),
    retune: (n) => ({ limit: n }),
  },
  {
    name: "allOf(TokenBucket, FixedWindow)",
    make: (clock, n) =>
      allOf(
        new TokenBucket({ capacity: n, refillPerSecond: n, clock }),
        new FixedWindow({ limit: 2 * n, windowMs: 2000, clock }),
      ),
    retune: (n) => [{ capacity: n }, undefined],
  },
];

const KEYS = ["free:a", "free:b", "pro:a", "pro:b", "team:a"] as const;
const planOf3 = (key: string) => key.slice(0, key.indexOf(":")) as "free" | "pro" | "team";

type Step =
  | {
      kind: "call";
      advanceMs: number;
      key: number;
      cost: number;
      method: "allow" | "consume" | "peek";
    }
  | { kind: "flood"; advanceMs: number; burst: number }
  | { kind: "reconfigure"; plan: "free" | "pro" | "team"; size: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("call" as const),
      advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1500 })),
      key: fc.integer({ min: 0, max: KEYS.length - 1 }),
      cost: fc.integer({ min: 0, max: 7 }),
      method: fc.constantFrom("allow" as const, "consume" as const, "peek" as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("flood" as const),
      advanceMs: fc.integer({ min: 0, max: 100 }),
      burst: fc.integer({ min: 1, max: 12 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("reconfigure" as const),
      plan: fc.constantFrom("free" as const, "pro" as const, "team" as const),
      size: fc.integer({ min: 1, max: 6 }),
    }),
  },
);

describe.each(cases)("plans of $name", (c) => {
  /** The plan registry and one KeyedLimiter per plan, from the same templates. */
  function make(clock: ManualClock, maxKeys: number) {
    const plans = { free: c.make(clock, 2), pro: c.make(clock, 5), team: c.make(clock, 3) };
    const keyed = new KeyedLimiter({ plans, plan: planOf3 }, { ...NO_SWEEP, maxKeys });
    const own = {
      free: new KeyedLimiter(plans.free, { ...NO_SWEEP, maxKeys: 10_000 }),
      pro: new KeyedLimiter(plans.pro, { ...NO_SWEEP, maxKeys: 10_000 }),
      team: new KeyedLimiter(plans.team, { ...NO_SWEEP, maxKeys: 10_000 }),
    };
    return { keyed, own };
  }

  test("a plan registry decides exactly as one KeyedLimiter per plan, through reconfigure", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 60 }), (steps) => {
        const clock = manualClock(1_700_000_000_000);
        const { keyed, own } = make(clock, 10_000);
        let flood = 0;
        steps.forEach((step, i) => {
          if (step.kind === "reconfigure") {
            keyed.reconfigure(step.plan, c.retune(step.size));
            own[step.plan].reconfigure(c.retune(step.size));
            return;
          }
          clock.advance(step.advanceMs);
          const keys =
            step.kind === "flood"
              ? Array.from(
                  { length: step.burst },
                  () => `${["free", "pro", "team"][flood % 3]}:flood-${flood++}`,
                )
              : [KEYS[step.key]!];
          for (const key of keys) {
            const ref = own[planOf3(key)];
            const where = `step ${i}: ${key}`;
            if (step.kind === "call" && step.method === "allow") {
              expect(keyed.allow(key, step.cost), where).toBe(ref.allow(key, step.cost));
            } else if (step.kind === "call" && step.method === "peek") {
              expect(keyed.peek(key, step.cost), where).toEqual(ref.peek(key, step.cost));
            } else {
              const cost = step.kind === "call" ? step.cost : 1;
              expect(keyed.consume(key, cost), where).toEqual(ref.consume(key, cost));
            }
          }
        });
        expect(keyed.size).toBe(own.free.size + own.pro.size + own.team.size);
        expect(keyed.stats.plans).toEqual({
          free: own.free.size,
          pro: own.pro.size,
          team: own.team.size,
        });
      }),
      { numRuns: 60 },
    );
  });

  test("at the bound, a flood never makes it allow what its plan would deny (eviction and reconfigure)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.array(stepArb, { minLength: 1, maxLength: 60 }),
        (maxKeys, steps) => {
          const clock = manualClock(1_700_000_000_000);
          const { keyed, own } = make(clock, maxKeys);
          let flood = 0;
          steps.forEach((step, i) => {
            if (step.kind === "reconfigure") {
              keyed.reconfigure(step.plan, c.retune(step.size));
              own[step.plan].reconfigure(c.retune(step.size));
              return;
            }
            clock.advance(step.advanceMs);
            const keys =
              step.kind === "flood"
                ? Array.from(
                    { length: step.burst },
                    () => `${["free", "pro", "team"][flood % 3]}:flood-${flood++}`,
                  )
                : [KEYS[step.key]!];
            for (const key of keys) {
              // The reference is fed only what the bounded registry let through.
              const ref = own[planOf3(key)];
              const cost = step.kind === "call" ? step.cost : 1;
              const where = `step ${i}: ${key} cost ${cost}, maxKeys ${maxKeys}`;
              const unbounded = ref.peek(key, cost).allowed;
              const allowed =
                step.kind === "call" && step.method === "peek"
                  ? keyed.peek(key, cost).allowed
                  : keyed.consume(key, cost).allowed;
              if (allowed) {
                expect(unbounded, `${where}: allowed, but its plan denies it`).toBe(true);
                if (!(step.kind === "call" && step.method === "peek")) ref.consume(key, cost);
              }
              if (keyed.stats.evictedLossy === 0) {
                expect(allowed, `${where}: nothing lost yet, so exactly its plan's answer`).toBe(
                  unbounded,
                );
              }
              expect(keyed.size, where).toBeLessThanOrEqual(maxKeys);
              const perPlan = keyed.stats.plans!;
              expect(perPlan.free! + perPlan.pro! + perPlan.team!, where).toBe(keyed.size);
            }
          });
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("snapshots of a plan registry", () => {
  test("restore(snapshot(key)) decides as the key did, each key by its own plan", () => {
    const clock = manualClock();
    const make = () =>
      new KeyedLimiter({
        plans: {
          free: new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
          pro: new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
        },
        plan: (key: string) => (key.startsWith("pro:") ? "pro" : "free"),
      });
    const a = make();
    for (let i = 0; i < 3; i++) a.consume("free:1");
    for (let i = 0; i < 4; i++) a.consume("pro:1");
    const all = JSON.parse(JSON.stringify(a.snapshotAll()));
    const one = JSON.parse(JSON.stringify(a.snapshot("pro:1")));
    const b = make();
    b.restoreAll(all);
    const c = make();
    c.restore("pro:1", one);
    clock.advance(700);
    for (const key of ["free:1", "pro:1"]) {
      expect(b.peek(key), key).toEqual(a.peek(key));
    }
    expect(c.peek("pro:1")).toEqual(a.peek("pro:1"));
    expect(b.consume("pro:1")).toEqual(a.consume("pro:1"));
  });

  test("regression: a snapshot of a key not kept held the fresh state of the plan used last", () => {
    const clock = manualClock();
    const keyed = new KeyedLimiter({
      plans: {
        free: new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
        pro: new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }),
      },
      plan: planOf,
    });
    keyed.consume("free:1"); // the free plan is the one used last
    expect(keyed.snapshot("pro:new").state[0]).toBe(5); // pro's fresh bucket, not free's 2
    keyed.consume("pro:1");
    expect(keyed.snapshot("free:new").state[0]).toBe(2);
  });

  test("a snapshot of other plans is refused, naming the plan that differs", () => {
    const clock = manualClock();
    const make = (pro: number) =>
      new KeyedLimiter({
        plans: {
          free: new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }),
          pro: new TokenBucket({ capacity: pro, refillPerSecond: 1, clock }),
        },
        plan: (key: string) => (key.startsWith("pro:") ? "pro" : "free"),
      });
    const a = make(5);
    a.consume("pro:1");
    const b = make(6);
    expect(() => b.restoreAll(a.snapshotAll())).toThrow(
      /part 1 capacity is 5 in the snapshot, 6 here/,
    );
    expect(b.peek("pro:1")).toMatchObject({ limit: 6, remaining: 5 }); // untouched: 6 less the peeked 1
  });
});

test("regression: maxKeys beside the plans said only 'unknown option'; it says to pass it second", () => {
  const plans = { free: new TokenBucket({ capacity: 2, refillPerSecond: 1 }) };
  expect(
    () =>
      new KeyedLimiter({
        plans,
        plan: () => "free",
        maxKeys: 5,
      } as unknown as ConstructorParameters<typeof KeyedLimiter>[0]),
  ).toThrow(
    'unknown option "maxKeys" (a registry option: pass it as the second argument, new KeyedLimiter({ plans, plan }, { maxKeys }))',
  );
  expect(new KeyedLimiter({ plans, plan: () => "free" }, { maxKeys: 5 }).allow("a")).toBe(true);
});
