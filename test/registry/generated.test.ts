import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";

describe("the fast-path classes of KeyedLimiter", () => {
  test("are what scripts/generate-keyed.mjs makes from its one template", () => {
    const run = spawnSync(process.execPath, ["scripts/generate-keyed.mjs", "--check"], {
      encoding: "utf8",
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  test("one class per slab kind, each with its own allow, consume and peek", () => {
    const source = readFileSync("src/registry.ts", "utf8");
    const generated = source.slice(
      source.indexOf("// <generated"),
      source.indexOf("// </generated>"),
    );
    const classes = [...generated.matchAll(/^class (\w+) extends KeyedLimiter/gm)].map((m) => m[1]);
    expect(classes.length).toBeGreaterThanOrEqual(4);
    for (const method of ["allow", "consume", "peek"]) {
      expect(generated.split(`override ${method}(`).length - 1, method).toBe(classes.length);
    }
  });
});
