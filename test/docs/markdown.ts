/**
 * Reading the repository's Markdown for the docs tests: the files checked, their headings
 * as GitHub anchors, their relative links, and the code blocks marked as excerpts of an
 * example file.
 * @module
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** README.md, CONTRIBUTING.md and every docs/*.md, as paths relative to the root. */
export function markdownFiles(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", "CONTRIBUTING.md", ...docs];
}

/** The lines of `text` outside fenced code blocks (``` or ~~~), with their 1-based numbers. */
export function proseLines(text: string): { line: string; number: number }[] {
  const out: { line: string; number: number }[] = [];
  let fence: string | undefined;
  text.split("\n").forEach((line, i) => {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker;
      else if (fence === marker) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, number: i + 1 });
  });
  return out;
}

/**
 * GitHub's anchor for a heading: the rendered text (links and code reduced to their text),
 * lowercased, every character that is not a letter, digit, space, `-` or `_` removed, spaces
 * turned into `-`. Repeats get `-1`, `-2`, ... (done by {@link anchors}).
 */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\- _]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a file's headings produce (ATX headings outside code blocks). */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { line } of proseLines(text)) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m === null) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** A link found in prose: its target as written and the line it is on. */
export interface Link {
  readonly target: string;
  readonly line: number;
}

/** Inline links and images `[text](target)` outside code blocks and inline code. */
export function links(text: string): Link[] {
  const out: Link[] = [];
  for (const { line, number } of proseLines(text)) {
    const prose = line.replace(/`[^`]*`/g, "");
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ target: m[1]!, line: number });
    }
  }
  return out;
}

/** True for a link into this repository (not a URL with a scheme, not `//host`). */
export function isRelative(target: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith("//");
}

/** A code block marked `<!-- from examples/x.ts -->` on the line before its fence. */
export interface Excerpt {
  readonly file: string;
  readonly code: string;
  readonly line: number;
}

/** Every code block marked as an excerpt of an example file. */
export function excerpts(text: string): Excerpt[] {
  const lines = text.split("\n");
  const out: Excerpt[] = [];
  lines.forEach((line, i) => {
    const file = /^<!-- from (\S+) -->$/.exec(line.trim())?.[1];
    if (file === undefined) return;
    const open = lines[i + 1];
    if (open === undefined || !open.startsWith("```")) {
      throw new Error(`line ${i + 1}: "from ${file}" must be followed by a code fence`);
    }
    const end = lines.findIndex((l, j) => j > i + 1 && l.startsWith("```"));
    if (end === -1) throw new Error(`line ${i + 2}: unterminated code fence`);
    out.push({ file, code: lines.slice(i + 2, end).join("\n"), line: i + 2 });
  });
  return out;
}

/**
 * Where an excerpt fails to match its file, or undefined when it matches: the excerpt, cut
 * at lines that are exactly `// ...`, must appear chunk by chunk, in order, as consecutive
 * lines of the file, each chunk allowed one common indentation in the file (a block lifted
 * out of a function reads unindented).
 */
export function excerptMismatch(code: string, source: string): string | undefined {
  const file = source.split("\n");
  const chunks = code
    .split("\n")
    .reduce<string[][]>(
      (acc, line) => {
        if (line.trim() === "// ...") acc.push([]);
        else acc[acc.length - 1]!.push(line);
        return acc;
      },
      [[]],
    )
    .map((chunk) => trimBlank(chunk))
    .filter((chunk) => chunk.length > 0);
  let from = 0;
  for (const chunk of chunks) {
    const at = findChunk(file, chunk, from);
    if (at === -1) return `not found in order as consecutive lines:\n${chunk.join("\n")}`;
    from = at + chunk.length;
  }
  return chunks.length === 0 ? "the excerpt is empty" : undefined;
}

function trimBlank(lines: string[]): string[] {
  let a = 0;
  let b = lines.length;
  while (a < b && lines[a]!.trim() === "") a++;
  while (b > a && lines[b - 1]!.trim() === "") b--;
  return lines.slice(a, b);
}

function findChunk(file: string[], chunk: string[], from: number): number {
  const first = chunk[0]!;
  for (let i = from; i + chunk.length <= file.length; i++) {
    const head = file[i]!;
    if (!head.endsWith(first)) continue;
    const indent = head.slice(0, head.length - first.length);
    if (indent.trim() !== "") continue;
    if (
      chunk.every((l, k) => (l === "" ? file[i + k]!.trim() === "" : file[i + k] === indent + l))
    ) {
      return i;
    }
  }
  return -1;
}

/** Diagnostics of a name used but never declared, imported or global. */
const UNDECLARED = new Set([
  2304, // Cannot find name 'x'.
  2552, // Cannot find name 'x'. Did you mean 'y'?
  18004, // No value exists in scope for the shorthand property 'x'.
]);

/**
 * The names each code block uses without declaring or importing them (nor being a global of
 * Node or the DOM), by file name: what a reader pasting it meets as a `ReferenceError`.
 * Imports are not resolved (a name imported counts as declared), only Node's types are
 * read, so one program over every block takes a moment.
 */
export function undeclaredNames(blocks: ReadonlyMap<string, string>): Map<string, string[]> {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts"],
    types: ["node"],
    typeRoots: [join(ROOT, "node_modules", "@types")],
    noEmit: true,
    skipLibCheck: true,
  };
  const files = new Map(
    [...blocks].map(([name, code]) => [join(ROOT, name), `${code}\nexport {};\n`]),
  );
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const source = host.getSourceFile.bind(host);
  host.readFile = (f) => files.get(f) ?? read(f);
  host.fileExists = (f) => files.has(f) || exists(f);
  host.getSourceFile = (f, v, onError, create) =>
    files.has(f) ? ts.createSourceFile(f, files.get(f)!, v) : source(f, v, onError, create);
  // Every import stays unresolved: its names are declared all the same.
  host.resolveModuleNameLiterals = (literals) =>
    literals.map(() => ({ resolvedModule: undefined }));
  const program = ts.createProgram([...files.keys()], options, host);
  const out = new Map<string, string[]>();
  for (const [name] of blocks) {
    const sf = program.getSourceFile(join(ROOT, name))!;
    const names = program
      .getSemanticDiagnostics(sf)
      .filter((d) => UNDECLARED.has(d.code) && d.start !== undefined)
      .map((d) => sf.text.slice(d.start!, d.start! + d.length!));
    out.set(name, [...new Set(names)]);
  }
  return out;
}
