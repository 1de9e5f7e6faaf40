// The README's code blocks, for the check that runs them in a project that installed the
// packed tarball (scripts/readme-check.mjs, from pack-check) and for test/docs/readme.test.ts.
// A block is run unless the line before its fence is `<!-- not run: <why> -->`; a fence
// without a language (a command's output) is not code. In docs/*.md it is the other way
// round: a block is run when the line before its fence is `<!-- run -->`; every other code
// block there says what it is: `<!-- from examples/x.ts -->` (an excerpt of an example,
// which runs whole), or `<!-- fragment: <why> -->` (docBlocks, test/docs/readme.test.ts).
// A block run states what it prints with `//=>` (or `//~>` where numbers vary) comments,
// which the run compares with what it printed (outputMismatch).

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

/**
 * The output a block claims, in order. `//=> text`, at the end of a line of code or on a
 * line of its own, says the block prints `text` there, exactly; `//~> text` says it prints a
 * line that varies from run to run (a time, a count under load) in its numbers only: `text`
 * is one run's, compared with every number as a wildcard. A block without either claims
 * nothing and is only run.
 * @param {string} code
 * @returns {{ text: string, varies: boolean, line: number }[]}
 */
export function claimedOutput(code) {
  const out = [];
  code.split("\n").forEach((line, i) => {
    const m = /\/\/([=~])>(.*)$/.exec(line);
    if (m !== null) out.push({ text: m[2].trim(), varies: m[1] === "~", line: i + 1 });
  });
  return out;
}

const NUMBER = /-?\d+(?:[.,]\d+)*(?:e[+-]?\d+)?/g;

/**
 * Where what a block printed (`stdout`) differs from what it claims (claimedOutput), or
 * undefined when it prints exactly the claimed lines in order and nothing else (or claims
 * nothing). Whitespace runs compare as one space, so a claim written on one line stands for
 * an object that console.log breaks over several.
 * @param {string} code
 * @param {string} stdout
 * @returns {string | undefined}
 */
export function outputMismatch(code, stdout) {
  const claims = claimedOutput(code);
  if (claims.length === 0) return undefined;
  const squash = (s) => s.replace(/\s+/g, " ").trim();
  const printed = stdout.split("\n").map(squash);
  while (printed.length > 0 && printed[printed.length - 1] === "") printed.pop();
  let at = 0;
  for (const claim of claims) {
    const form = claim.varies ? (s) => squash(s).replace(NUMBER, "#") : squash;
    const want = form(claim.text);
    if (at >= printed.length) {
      return `line ${claim.line} of the block claims ${JSON.stringify(claim.text)}, but nothing more was printed`;
    }
    const first = at;
    let got = printed[at++];
    while (form(got).length < want.length && at < printed.length) got = `${got} ${printed[at++]}`;
    if (form(got) !== want) {
      const printedLines = printed.slice(first, at).join("\n");
      return `line ${claim.line} of the block claims ${claim.varies ? "(numbers aside) " : ""}${JSON.stringify(claim.text)}, it printed ${JSON.stringify(printedLines)}`;
    }
  }
  if (at < printed.length) {
    return `the block printed lines it does not claim: ${JSON.stringify(printed.slice(at).join("\n"))}`;
  }
  return undefined;
}
