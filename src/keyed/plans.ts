import { CATALOG } from "../algorithms/catalog.js";
import { AllOf } from "../composite/all-of.js";
import { checkOptionNames, describe } from "../core/errors.js";
import type { Limiter } from "../core/limiter.js";
import { PINNED, type SlabEngine } from "./engine.js";
import { leavesOf, type Slab, slabOf } from "./layouts/index.js";
import { PlanLayout } from "./layouts/plans.js";
import { WHERE } from "./options.js";
import type { KeyedPlans } from "./plan-options.js";

/** The option names of {@link KeyedPlans}. */
const PLANS_OPTIONS = ["plans", "plan"] as const;
/** The registry's own options, given beside the plans: they go in the second argument. */
const REGISTRY_OPTION_HINTS: Readonly<Record<string, string>> = Object.fromEntries(
  ["maxKeys", "maxBytes", "maxKeyLength", "maxWaiters", "whenFull", "sweepIntervalMs"].map(
    (name) => [
      name,
      `a registry option: pass it as the second argument, new KeyedLimiter({ plans, plan }, { ${name} })`,
    ],
  ),
);
/** Most plans: a plan id is one byte per slot. */
export const MAX_PLANS = 255;

/** True when `policy` is meant as plans (`{ plans, plan }`, either named), not a limiter or a function. */
export function isPlans(policy: unknown): policy is KeyedPlans {
  return (
    typeof policy === "object" &&
    policy !== null &&
    ("plans" in policy || "plan" in policy) &&
    typeof (policy as { consume?: unknown }).consume !== "function"
  );
}

/** The algorithm of a built-in policy, as written in messages: `TokenBucket`, `allOf(TokenBucket, FixedWindow)`. */
function shapeOf(policy: Limiter): string {
  if (Object.getPrototypeOf(policy) === AllOf.prototype) {
    return `allOf(${(policy as AllOf).parts.map(shapeOf).join(", ")})`;
  }
  // The catalog's name, not `constructor.name`, which a bundler may rename (`_FixedWindow`).
  const proto: unknown = Object.getPrototypeOf(policy);
  const row = CATALOG.find((r) => r.Class.prototype === proto);
  return row?.className ?? (proto as { constructor: { name: string } }).constructor.name;
}

/**
 * The plans of a plan registry, checked: names, policies, each plan's slab, the plan
 * function, and the shared slab (a {@link PlanLayout} over the plans' layouts). @internal
 */
export class PlanTable {
  readonly names: readonly string[];
  /** The policy of each plan, by id; `reconfigure` replaces one. */
  readonly policies: Limiter[];
  /** The slab of each plan, by id. */
  readonly slabs: Slab[];
  readonly layout: PlanLayout;
  /** The engine, once made (its keys tell the plan of a slot). */
  engine: SlabEngine | undefined;
  private readonly ids = new Map<string, number>();
  private readonly planOf: (key: string) => unknown;
  /** @internal The key last asked about, and its plan id: a call asks once. */
  private lastKey: string | undefined;
  private lastId = 0;

  constructor(
    names: string[],
    policies: Limiter[],
    slabs: Slab[],
    planOf: (key: string) => unknown,
  ) {
    this.names = names;
    this.policies = policies;
    this.slabs = slabs;
    this.planOf = planOf;
    for (const [id, name] of names.entries()) this.ids.set(name, id);
    // A new key asks its plan (the registry selected it first, so the answer is cached); a
    // pinned key re-initialised by a reset or a clear keeps the plan it has.
    this.layout = new PlanLayout(
      slabs.map((s) => s.layout),
      (slot) => {
        const e = this.engine!;
        return (e.flags[slot]! & PINNED) !== 0 ? -1 : this.idOf(e.keys[slot]!);
      },
    );
  }

  /** Keys kept now per plan, by name. */
  sizes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, name] of this.names.entries()) out[name] = this.layout.sizes[id]!;
    return out;
  }

  /**
   * The plan id of `key` (asking the plan function at most once per new key in a row).
   * @throws {TypeError} When the function answers a name that is not a plan.
   */
  idOf(key: string): number {
    if (key === this.lastKey) return this.lastId;
    const id = this.idOfName(WHERE, this.planOf(key), key);
    this.lastKey = key;
    this.lastId = id;
    return id;
  }

  /** Makes `key` the one calls without a slot are about (a new key, its trace). */
  select(key: string): void {
    this.layout.current = this.idOf(key);
  }

  /** The plans' names, quoted, for messages: `"free", "pro"`. */
  get quoted(): string {
    return this.names.map((n) => JSON.stringify(n)).join(", ");
  }

  /**
   * The id of the plan named `name` (given, or answered by the plan function for `key`).
   * @throws {TypeError} For a name that is not a plan.
   */
  idOfName(where: string, name: unknown, key?: string): number {
    const id = typeof name === "string" ? this.ids.get(name) : undefined;
    if (id !== undefined) return id;
    const got = `one of ${this.quoted}, got ${describe(name)}`;
    throw new TypeError(
      key === undefined
        ? `${where}: plan must be ${got}`
        : `${where}: plan(key) must return ${got} for key ${JSON.stringify(key)}`,
    );
  }
}

/**
 * Checks a plans object (`{ plans, plan }`) and returns its table. Every problem is listed
 * in one message: unknown or missing options, a plan that is not a built-in limiter (a
 * custom one takes the generic path: a function `(key) => Limiter`), plans of different
 * algorithms (one slab holds one layout), plans on different clocks (one reading per call).
 * @throws {TypeError} Naming every problem.
 */
export function checkPlans(value: KeyedPlans): PlanTable {
  checkOptionNames(WHERE, value, PLANS_OPTIONS, REGISTRY_OPTION_HINTS, {
    names: PLANS_OPTIONS,
    example:
      'new KeyedLimiter({ plans: { free: new TokenBucket(...), pro: new TokenBucket(...) }, plan: (key) => (key.startsWith("pro:") ? "pro" : "free") })',
  });
  const problems: string[] = [];
  const { plans, plan } = value;
  if (typeof plan !== "function")
    problems.push(`plan must be a function (key) => plan name, got ${describe(plan)}`);
  const names: string[] = [];
  const policies: Limiter[] = [];
  const slabs: Slab[] = [];
  if (typeof plans !== "object" || plans === null || Array.isArray(plans) || plans instanceof Map) {
    const what = plans instanceof Map ? "a Map" : describe(plans);
    problems.push(`plans must be an object of named limiters ({ free: limiter }), got ${what}`);
  } else {
    const entries = Object.entries(plans as Record<string, unknown>);
    if (entries.length === 0) problems.push("plans must name at least one plan, got none");
    if (entries.length > MAX_PLANS) {
      problems.push(`plans must name at most ${MAX_PLANS} plans, got ${entries.length}`);
    }
    let first: { name: string; shape: string; leaves: string; slab: Slab } | undefined;
    for (const [name, policy] of entries) {
      const slab = slabOf(policy);
      if (slab === undefined) {
        problems.push(
          `plans.${name} must be a built-in limiter (TokenBucket, LeakyBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter) or an allOf of them on one clock, got ${describe(policy)}; a custom limiter takes the generic path: new KeyedLimiter((key) => limiter)`,
        );
        continue;
      }
      const shape = shapeOf(policy as Limiter);
      const leaves = leavesOf(policy as Limiter)
        .map(shapeOf)
        .join(","); // as the slab keeps them
      if (first === undefined) first = { name, shape, leaves, slab };
      else if (leaves !== first.leaves) {
        problems.push(
          `plans.${name} is a ${shape} but plans.${first.name} a ${first.shape}: every plan must be of one algorithm (one slab holds one layout); give each algorithm its own KeyedLimiter`,
        );
        continue;
      } else if (slab.clock !== first.slab.clock) {
        problems.push(
          `plans.${name} has another clock than plans.${first.name}: every plan must share one clock (one reading serves a call)`,
        );
        continue;
      }
      names.push(name);
      policies.push(policy as Limiter);
      slabs.push(slab);
    }
  }
  if (problems.length === 1) throw new TypeError(`${WHERE}: ${problems[0]}`);
  if (problems.length > 1) {
    throw new TypeError(
      [
        `${WHERE}: ${problems.length} problems with the plans:`,
        ...problems.map((line) => `  - ${line}`),
      ].join("\n"),
    );
  }
  return new PlanTable(names, policies, slabs, plan as (key: string) => unknown);
}
