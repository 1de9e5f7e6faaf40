// The README's code blocks are whole programs, which pack-check runs in a project that
// installed the tarball (scripts/readme-check.mjs); here, what can be checked in a moment:
// the README's length, that every block is run or says why not, that none elides lines,
// and that the replay recipe's command prints the rows the README shows. A block of docs/
// marked `<!-- from examples/x.ts -->` appears in that example file line for line.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  claimedOutput,
  docBlocks,
  importedPackages,
  outputMismatch,
  RUN_LANGS,
  readmeBlocks,
} from "../../scripts/readme-blocks.mjs";
import { run } from "../../src/cli/run.js";
import { excerptMismatch, excerpts, markdownFiles, ROOT, undeclaredNames } from "./markdown.js";

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

describe("the README", () => {
  const blocks = readmeBlocks(readme);
  const code = blocks.filter((b) => RUN_LANGS.has(b.lang));

  it("is at most 300 lines", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(301); // the last newline ends line 300
  });

  it("has its recipes as whole programs, each run or saying why not", () => {
    expect(code.filter((b) => b.skip === undefined).length).toBeGreaterThanOrEqual(8);
    for (const b of code) {
      expect(b.code, `README.md:${b.line} elides lines`).not.toMatch(/^\s*\/\/ \.\.\.\s*$/m);
      if (b.lang !== "sh" && b.lang !== "bash") {
        expect(b.code, `README.md:${b.line} imports tollgate`).toMatch(/from "tollgate(\/\w+)?"/);
      }
    }
  });

  it("lists the packages its blocks import among the devDependencies the check installs", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const imported = code.flatMap((b) => importedPackages(b.code));
    expect(imported.filter((name) => pkg.devDependencies[name] === undefined)).toEqual([]);
  });
});

describe("the code blocks of docs/", () => {
  const docs = markdownFiles()
    .filter((doc) => doc.startsWith("docs/"))
    .flatMap((doc) => docBlocks(readFileSync(join(ROOT, doc), "utf8")).map((b) => ({ doc, ...b })));

  it("each say what they are: run from the tarball, an example's excerpt, or a fragment and why", () => {
    const unmarked = docs.filter((b) => b.mark === "none").map((b) => `${b.doc}:${b.line}`);
    expect(
      unmarked,
      "mark each <!-- run -->, <!-- from examples/x.ts --> or <!-- fragment: why -->",
    ).toEqual([]);
  });

  it("those run are whole programs: they import tollgate, elide nothing, use devDependencies", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const runs = docs.filter((b) => b.mark === "run");
    expect(runs.length).toBeGreaterThanOrEqual(6);
    for (const b of runs) {
      const where = `${b.doc}:${b.line}`;
      expect(b.code, `${where} imports tollgate`).toMatch(/from "tollgate(\/\w+)?"/);
      expect(b.code, `${where} elides lines`).not.toMatch(/^\s*\/\/ \.\.\.\s*$/m);
      const missing = importedPackages(b.code).filter((n) => pkg.devDependencies[n] === undefined);
      expect(missing, `${where} imports packages the check cannot install`).toEqual([]);
    }
  });
});

describe("readmeBlocks", () => {
  it("finds fences, their language, their line and why one is not run", () => {
    const text = "# x\n```ts\na();\n```\n<!-- not run: a reason -->\n```sh\nb\n```\n```\nout\n```";
    expect(readmeBlocks(text)).toEqual([
      { lang: "ts", code: "a();", line: 2, skip: undefined },
      { lang: "sh", code: "b", line: 6, skip: "a reason" },
      { lang: "", code: "out", line: 9, skip: undefined },
    ]);
    const doc =
      "<!-- run -->\n```ts\na();\n```\n<!-- fragment: a line -->\n```ts\nb\n```\n```ts\nc\n```";
    expect(docBlocks(doc).map((b) => [b.line, b.mark, b.why])).toEqual([
      [2, "run", undefined],
      [6, "fragment", "a line"],
      [9, "none", undefined],
    ]);
    expect(
      importedPackages(
        'import a from "express";\nimport { b } from "tollgate/http";\nimport c from "@types/x/y";\nimport "node:fs";',
      ),
    ).toEqual(["express", "@types/x"]);
  });
});

describe("claimed output", () => {
  const block = [
    "console.log(a); //=> true",
    "console.log(o);",
    "//=> { allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000 }",
    "console.log(t); //~> in 452 ms",
  ].join("\n");
  const object =
    "{\n  allowed: true,\n  limit: 10,\n  remaining: 0,\n  retryAfterMs: 0,\n  resetAfterMs: 1000\n}";

  it("reads //=> and //~> comments in order, with their lines", () => {
    expect(claimedOutput(block)).toEqual([
      { text: "true", varies: false, line: 1 },
      {
        text: "{ allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000 }",
        varies: false,
        line: 3,
      },
      { text: "in 452 ms", varies: true, line: 4 },
    ]);
  });

  it.each([
    ["the claimed lines", `true\n${object}\nin 452 ms\n`],
    ["an object broken over lines as its one-line claim", `true\n${object}\nin 452 ms`],
    ["other numbers on a //~> line", `true\n${object}\nin 1503 ms\n`],
  ])("accepts %s", (_, stdout) => {
    expect(outputMismatch(block, stdout)).toBeUndefined();
  });

  it.each([
    ["another value", `false\n${object}\nin 452 ms\n`, 'claims "true", it printed "false"'],
    ["another number in an object", `true\n${object.replace("10,", "9,")}\nin 452 ms\n`, "line 3"],
    ["other words on a //~> line", `true\n${object}\nafter 452 ms\n`, "(numbers aside)"],
    ["a claimed line not printed", `true\n${object}\n`, "nothing more was printed"],
    ["a line printed but not claimed", `true\n${object}\nin 452 ms\n6\n`, "does not claim"],
    ["nothing printed", "", "nothing more was printed"],
  ])("refuses %s", (_, stdout, says) => {
    expect(outputMismatch(block, stdout)).toContain(says);
  });

  it("checks nothing in a block that claims nothing", () => {
    expect(outputMismatch("console.log(1); // one", "2\n")).toBeUndefined();
  });
});

describe("the excerpts of examples", () => {
  it("use no name they do not declare or import: each runs when pasted", () => {
    const names = undeclaredNames(
      new Map(marked.map((e) => [`${e.doc.replace(/[/.]/g, "-")}-${e.line}.ts`, e.code])),
    );
    const missing = marked
      .map((e, i) => ({ at: `${e.doc}:${e.line}`, names: [...names.values()][i]! }))
      .filter((e) => e.names.length > 0)
      .map((e) => `${e.at} uses ${e.names.join(", ")}`);
    expect(missing, "declare or import them in the excerpt (or show the lines that do)").toEqual(
      [],
    );
  });

  it("are found using a name left out, and not for imports, declarations or globals", () => {
    const names = undeclaredNames(
      new Map([
        ["left-out.ts", "const permit = 1;\ntry {\n} finally {\n  running--;\n}\n"],
        ["shorthand.ts", "console.log({ clock });\n"],
        [
          "whole.ts",
          'import { KeyedLimiter } from "tollgate";\nlet running = 0;\nrunning--;\nconsole.log(new KeyedLimiter(), setTimeout, process.env, fetch, await Promise.resolve(running));\n',
        ],
      ]),
    );
    expect(Object.fromEntries(names)).toEqual({
      "left-out.ts": ["running"],
      "shorthand.ts": ["clock"],
      "whole.ts": [],
    });
  });
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

  it("prints exactly what the README shows, run in the clone as it says", async () => {
    const [, command, shown] = block!;
    const argv = command!.replace(/\\\n/g, " ").trim().split(/\s+/);
    // In the clone: the built bin, not npx (which would install the clone and build it first).
    expect(argv.slice(0, 3)).toEqual(["node", "dist/cli.js", "replay"]);
    const stdout = new PassThrough();
    const stderr = Object.assign(new PassThrough(), { isTTY: false });
    let out = "";
    stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
    });
    // Paths in the command are relative to the repository root, where a reader runs it.
    const paths = argv.slice(3).filter((a) => existsSync(join(ROOT, a)));
    const args = argv.slice(3).map((a) => (paths.includes(a) ? join(ROOT, a) : a));
    const code = await run(["replay", ...args], { stdin: new PassThrough(), stdout, stderr });
    expect(code).toBe(0);
    // The whole output, as printed from the root: the absolute paths read as written.
    const printed = paths.reduce((text, a) => text.replaceAll(join(ROOT, a), a), out);
    const lines = (text: string) =>
      text
        .trimEnd()
        .split("\n")
        .map((l) => l.trimEnd());
    expect(lines(printed)).toEqual(lines(shown!));
  });
});
