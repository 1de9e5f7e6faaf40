import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { type AlgorithmDescriptor, CATALOG, descriptorOf } from "../src/algorithms/catalog.js";
import { HELP, parseCommand, REPLAY_OPTION_NAMES } from "../src/cli/args.js";
import {
  ALGORITHMS,
  buildLimiter,
  comparePolicies,
  flagsUsage,
  limitPerMinute,
  POLICY_FLAGS,
  singlePolicy,
  UsageError,
} from "../src/cli/policy.js";
import { ALGORITHM_COLORS } from "../src/cli/svg.js";
import * as tollgate from "../src/index.js";

const src = join(import.meta.dirname, "..", "src");
const ROWS: readonly AlgorithmDescriptor[] = CATALOG;
const clock = () => 0;

/** Valid options for `d`'s constructor: 10 for every option that has a flag. */
function sampleOptions(d: AlgorithmDescriptor): Record<string, number> {
  return Object.fromEntries(Object.keys(d.cli.flags).map((name) => [name, 10]));
}

/** The flags `d` must be given. */
const required = (d: AlgorithmDescriptor) =>
  Object.entries(d.cli.flags)
    .filter(([name]) => !(d.cli.optional ?? []).includes(name))
    .map(([, flag]) => flag);

/** `, and optionally --initial-tokens` for an algorithm with optional flags, else "". */
const optional = (d: AlgorithmDescriptor) => {
  const flags = Object.entries(d.cli.flags)
    .filter(([name]) => (d.cli.optional ?? []).includes(name))
    .map(([, flag]) => flag);
  return flags.length === 0 ? "" : `, and optionally ${flags.join(" ")}`;
};

/** The `known options:` list of an unknown-option TypeError, as an array. */
function knownOptionsOf(make: () => unknown): string[] {
  let message = "";
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    message = (error as Error).message;
  }
  const match = /; known options: (.*)$/.exec(message);
  expect(match, `an unknown-option TypeError, got ${JSON.stringify(message)}`).not.toBeNull();
  return match![1]!.split(", ");
}

/** `TokenBucket` -> `token-bucket`. */
const kebab = (name: string) => name.replace(/(?<!^)([A-Z])/g, "-$1").toLowerCase();

/** The names `export { A, type B } from "./algorithms/..."` lines of src/index.ts export. */
function algorithmExportsOfIndex(): string[] {
  const text = readFileSync(join(src, "index.ts"), "utf8");
  const names: string[] = [];
  for (const m of text.matchAll(/export\s*\{([^}]*)\}\s*from\s*"\.\/algorithms\/[^"]+"/g)) {
    for (const part of m[1]!.split(",")) {
      const name = part.trim();
      if (name !== "" && !name.startsWith("type ")) names.push(name);
    }
  }
  return names;
}

describe("the catalog and the package index", () => {
  test("the classes src/index.ts exports from src/algorithms/ are exactly the catalog's", () => {
    expect(algorithmExportsOfIndex().sort()).toEqual(CATALOG.map((d) => d.className).sort());
  });

  test.each(ROWS)("$className is the class tollgate exports under that name", (d) => {
    expect((tollgate as Record<string, unknown>)[d.className]).toBe(d.Class);
    expect(d.Class.name).toBe(d.className);
  });

  test("every other class tollgate exports is known not to be an algorithm", () => {
    // A new exported class must either get a catalog row or be named here.
    const notAlgorithms = [
      "ConcurrencyLimiter",
      "KeyedConcurrencyLimiter",
      "KeyedLimiter",
      "RateLimitError",
    ];
    const classes = Object.entries(tollgate)
      .filter(([name, value]) => typeof value === "function" && /^[A-Z]/.test(name))
      .map(([name]) => name);
    const rows = new Set<string>(CATALOG.map((d) => d.className));
    expect(classes.filter((name) => !rows.has(name)).sort()).toEqual(notAlgorithms);
  });

  test("ids and class names are unique, and each id is its class name in kebab-case", () => {
    expect(new Set(CATALOG.map((d) => d.id)).size).toBe(CATALOG.length);
    expect(new Set(CATALOG.map((d) => d.className)).size).toBe(CATALOG.length);
    for (const d of ROWS) expect(d.id).toBe(kebab(d.className));
  });

  test("descriptorOf finds each row by id and nothing else", () => {
    for (const d of ROWS) expect(descriptorOf(d.id)).toBe(d);
    expect(descriptorOf("gcra")).toBeUndefined();
    expect(descriptorOf("constructor")).toBeUndefined();
  });

  test("no algorithm file imports the catalog (a bundle of one must leave the others out)", () => {
    const dir = join(src, "algorithms");
    for (const file of readdirSync(dir)) {
      const text = readFileSync(join(dir, file), "utf8");
      expect(text, file).not.toMatch(/from\s+"\.\.\/catalog(\/[^"]*)?\.js"/);
    }
  });
});

describe("each descriptor's options", () => {
  test.each(ROWS)("$id: the options are the names its constructor checks", (d) => {
    const known = knownOptionsOf(
      () => new d.Class({ ...sampleOptions(d), clock, notAnOption: 1 } as never),
    );
    expect(known).toEqual([...d.options]);
  });

  test.each(ROWS)("$id: every option but clock has a flag, and the flags suffice", (d) => {
    expect([...Object.keys(d.cli.flags), "clock"].sort()).toEqual([...d.options].sort());
    expect(new d.Class({ ...sampleOptions(d), clock } as never)).toBeInstanceOf(d.Class);
  });

  test.each(ROWS)("$id: its measure names options it takes", (d) => {
    const needed =
      d.measure.kind === "bucket" ? ["capacity", d.measure.rate] : ["limit", "windowMs"];
    for (const name of needed) expect(d.options).toContain(name);
  });
});

describe("the CLI reads the catalog", () => {
  test("--algorithm accepts the catalog's ids, in its order", () => {
    expect([...ALGORITHMS]).toEqual(CATALOG.map((d) => d.id));
  });

  test("a flag names one option for every algorithm that takes it", () => {
    const optionOfFlag = new Map<string, string>();
    for (const d of ROWS) {
      for (const [name, flag] of Object.entries(d.cli.flags)) {
        expect(optionOfFlag.get(flag) ?? name, `${d.id} ${flag}`).toBe(name);
        optionOfFlag.set(flag, name);
        expect(POLICY_FLAGS.get(name as never)).toBe(flag);
      }
    }
    expect(POLICY_FLAGS.size).toBe(optionOfFlag.size);
  });

  test("no policy flag takes the name of another option of tollgate replay", () => {
    expect(new Set(REPLAY_OPTION_NAMES).size).toBe(REPLAY_OPTION_NAMES.length);
  });

  test.each(ROWS)("$id: tollgate replay --algorithm $id with its flags is accepted", (d) => {
    // 2, 3, ... for each option (an optional one, a starting amount, 1: within the capacity).
    const sampleValue = (name: string, i: number) =>
      (d.cli.optional ?? []).includes(name) ? 1 : i + 2;
    const values = Object.entries(d.cli.flags).map(([name, flag], i) => [
      flag,
      String(sampleValue(name, i)),
    ]);
    const command = parseCommand(["replay", "access.log", "--algorithm", d.id, ...values.flat()]);
    const expected = Object.fromEntries(
      Object.keys(d.cli.flags).map((name, i) => [name, sampleValue(name, i)]),
    );
    expect(command).toMatchObject({
      kind: "replay",
      policies: [{ algorithm: d.id, options: expected, derived: false }],
    });
    const built = buildLimiter(d.id as never, expected, clock);
    expect(built).toBeInstanceOf(d.Class);
    expect(limitPerMinute(singlePolicy(d.id as never, expected))).toBeGreaterThan(0);
  });

  test.each(ROWS)("$id: a flag of another algorithm is refused, naming its own", (d) => {
    const foreign = [...POLICY_FLAGS].find(([name]) => !(name in d.cli.flags));
    expect(foreign, "some flag is another algorithm's").toBeDefined();
    const [name, flag] = foreign!;
    expect(() => singlePolicy(d.id as never, { ...sampleOptions(d), [name]: 1 })).toThrow(
      new UsageError(
        `${flag} does not apply to ${d.id} (it takes ${required(d).join(" and ")}${optional(d)})`,
      ),
    );
  });

  test("--compare runs every algorithm of the catalog, in its order", () => {
    for (const raw of [
      { capacity: 10, refillPerSecond: 1 },
      { limit: 10, windowMs: 10_000 },
    ]) {
      const policies = comparePolicies(raw);
      expect(policies.map((p) => p.algorithm)).toEqual(CATALOG.map((d) => d.id));
      // Equivalent: the same long-run rate everywhere (1 per second, 60 per minute).
      for (const p of policies) expect(limitPerMinute(p)).toBeCloseTo(60, 9);
    }
  });

  test.each(ROWS)("$id: the help lists it with its flags and its summary", (d) => {
    const name = [d.id, ...((d.cli as { aliases?: readonly string[] }).aliases ?? [])].join(", ");
    const line = HELP.split("\n").findIndex((l) => l.startsWith(`  ${name} `));
    expect(line).toBeGreaterThan(0);
    const lines = HELP.split("\n");
    expect(lines[line]).toMatch(new RegExp(` ${flagsUsage(d.id as never, "<n>")}$`));
    expect(lines[line + 1]!.trim()).toBe(d.summary);
    for (const l of [lines[line]!, lines[line + 1]!]) expect(l.length).toBeLessThanOrEqual(80);
  });

  test("the report's column names and the chart's colours are distinct per algorithm", () => {
    expect(new Set(CATALOG.map((d) => d.cli.column)).size).toBe(CATALOG.length);
    expect(new Set(CATALOG.map((d) => d.cli.color.toLowerCase())).size).toBe(CATALOG.length);
    for (const d of ROWS) expect(ALGORITHM_COLORS[d.id]).toBe(d.cli.color);
  });
});
