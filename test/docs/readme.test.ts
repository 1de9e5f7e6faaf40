// The README's recipes are what CI runs: each code block marked `<!-- from examples/x.ts -->`
// (in the README or in docs/) appears in that example file line for line, and the replay
// recipe's command, run through the CLI, prints the table row the README shows.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { run } from "../../src/cli/run.js";
import { excerptMismatch, excerpts, markdownFiles, ROOT } from "./markdown.js";

const readme = readFileSync(join(ROOT, "README.md"), "utf8");

describe("excerpt matching", () => {
  const source = "import a;\n\nfunction f() {\n  const x = 1;\n  return x;\n}\nf();\n";
  it.each([
    ["consecutive lines", "import a;"],
    ["an indented block read unindented", "const x = 1;\nreturn x;"],
    ["chunks in order", "import a;\n// ...\nf();"],
  ])("accepts %s", (_, code) => {
    expect(excerptMismatch(code, source)).toBeUndefined();
  });
  it.each([
    ["a changed line", "const x = 2;"],
    ["lines that are not consecutive", "import a;\nf();"],
    ["chunks out of order", "f();\n// ...\nimport a;"],
    ["two indentations in one chunk", "function f() {\nconst x = 1;"],
    ["an empty excerpt", "// ..."],
  ])("refuses %s", (_, code) => {
    expect(excerptMismatch(code, source)).toBeDefined();
  });
});

const marked = markdownFiles().flatMap((doc) =>
  excerpts(readFileSync(join(ROOT, doc), "utf8")).map((e) => ({ doc, ...e })),
);

it("the README marks every recipe as an excerpt of an example", () => {
  expect(marked.filter((e) => e.doc === "README.md").length).toBeGreaterThanOrEqual(7);
});

describe.each(marked)("$doc:$line from $file", ({ file, code }) => {
  it("matches the example file", () => {
    expect(file).toMatch(/^examples\/[\w.-]+\.ts$/);
    const path = join(ROOT, file);
    expect(existsSync(path), `${file} exists`).toBe(true);
    expect(excerptMismatch(code, readFileSync(path, "utf8"))).toBeUndefined();
  });
});

describe("the replay recipe", () => {
  const block = /<!-- replay command[^>]*-->\n```sh\n([\s\S]*?)```\n\n```\n([\s\S]*?)```/.exec(
    readme,
  );

  it("is in the README with its output", () => {
    expect(block).not.toBeNull();
  });

  it("prints the rows the README shows", async () => {
    const [, command, shown] = block!;
    const argv = command!.replace(/\\\n/g, " ").trim().split(/\s+/);
    expect(argv.slice(0, 3)).toEqual(["npx", "tollgate", "replay"]);
    const stdout = new PassThrough();
    const stderr = Object.assign(new PassThrough(), { isTTY: false });
    let out = "";
    stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
    });
    // Paths in the command are relative to the repository root, where a reader runs it.
    const args = argv.slice(3).map((a) => (existsSync(join(ROOT, a)) ? join(ROOT, a) : a));
    const code = await run(["replay", ...args], { stdin: new PassThrough(), stdout, stderr });
    expect(code).toBe(0);
    const lines = out.split("\n").map((l) => l.trimEnd());
    for (const line of shown!.trimEnd().split("\n")) expect(lines).toContain(line.trimEnd());
  });
});
