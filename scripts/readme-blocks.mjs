// The README's code blocks, for the check that runs them in a project that installed the
// packed tarball (scripts/readme-check.mjs, from pack-check) and for test/docs/readme.test.ts.
// A block is run unless the line before its fence is `<!-- not run: <why> -->`; a fence
// without a language (a command's output) is not code. In docs/*.md it is the other way
// round: a block is run when the line before its fence is `<!-- run -->`; every other code
// block there says what it is: `<!-- from examples/x.ts -->` (an excerpt of an example,
// which runs whole), or `<!-- fragment: <why> -->` (docBlocks, test/docs/readme.test.ts).

/**
 * Every fenced block of `text`: `{ lang, code, line, skip }`, `line` the 1-based line of its
 * opening fence, `skip` the reason given for not running it (or undefined).
 * @param {string} text
 * @returns {{ lang: string, code: string, line: number, skip: string | undefined }[]}
 */
export function readmeBlocks(text) {
  const lines = text.split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]);
    if (open === null) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end === -1) throw new Error(`README.md:${i + 1}: unterminated code fence`);
    const skip = /^<!-- not run: (.+) -->$/.exec(lines[i - 1]?.trim() ?? "")?.[1];
    blocks.push({ lang: open[1], code: lines.slice(i + 1, end).join("\n"), line: i + 1, skip });
    i = end;
  }
  return blocks;
}

/** The languages whose blocks are programs to run: TypeScript, JavaScript and shell. */
export const RUN_LANGS = new Set(["ts", "typescript", "js", "mjs", "sh", "bash"]);

/**
 * The packages a block imports (bare specifiers), tollgate's own and Node's left out.
 * @param {string} code
 * @returns {string[]}
 */
export function importedPackages(code) {
  const names = new Set();
  for (const m of code.matchAll(/\bfrom\s+"([^"./][^"]*)"/g)) {
    const spec = m[1];
    if (spec.startsWith("node:") || spec === "tollgate" || spec.startsWith("tollgate/")) continue;
    const parts = spec.split("/");
    names.add(spec.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]);
  }
  return [...names];
}

/**
 * The code blocks (RUN_LANGS) of one docs/*.md text, each with how the line before its fence
 * marks it: `run` (`<!-- run -->`: a whole program, run like the README's), `example`
 * (`<!-- from examples/x.ts -->`), `fragment` (`<!-- fragment: <why> -->`, `why` set), or
 * `none` (unmarked: the docs test refuses it).
 * @param {string} text
 * @returns {{ lang: string, code: string, line: number, mark: "run" | "example" | "fragment" | "none", why: string | undefined }[]}
 */
export function docBlocks(text) {
  const lines = text.split("\n");
  return readmeBlocks(text)
    .filter((b) => RUN_LANGS.has(b.lang))
    .map((b) => {
      const before = lines[b.line - 2]?.trim() ?? "";
      const fragment = /^<!-- fragment: (.+) -->$/.exec(before)?.[1];
      const mark =
        before === "<!-- run -->"
          ? "run"
          : /^<!-- from examples\/[\w./-]+ -->$/.test(before)
            ? "example"
            : fragment !== undefined
              ? "fragment"
              : "none";
      return { lang: b.lang, code: b.code, line: b.line, mark, why: fragment };
    });
}
