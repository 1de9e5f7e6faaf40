/**
 * Finding the doc comments of src/'s public declarations and their lengths, for the
 * doc-length test. A block is the last `/** ... *\/` before a declaration (the one TypeDoc
 * and editors show); its length counts every line from `/**` to `*\/`.
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { ROOT } from "./markdown.js";

/** One doc comment: where it is, what it documents and how many lines it spans. */
export interface DocBlock {
  /** Path relative to the repository root, with `/` separators. */
  readonly file: string;
  /** 1-based line of the `/**`. */
  readonly line: number;
  /** `Class`, `Class.method`, `Interface.option`, `function`, ... */
  readonly name: string;
  /** `top` for an exported declaration, `member` for a method, property or option. */
  readonly kind: "top" | "member";
  readonly lines: number;
}

/** Every .ts file under `dir` (relative to the root), sorted. */
export function sourceFiles(dir = "src"): string[] {
  const out: string[] = [];
  const walk = (abs: string) => {
    for (const entry of readdirSync(abs, { withFileTypes: true })) {
      const path = join(abs, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) out.push(relative(ROOT, path).split("\\").join("/"));
    }
  };
  walk(join(ROOT, dir));
  return out.sort();
}

/** The doc block TypeDoc attaches to `node`: the last JSDoc comment before it. */
function lastDoc(node: ts.Node): ts.JSDoc | undefined {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  return docs.at(-1);
}

function isExported(node: ts.Node, exportedNames: Set<string>): boolean {
  const mods = ts.canHaveModifiers(node) ? (ts.getModifiers(node) ?? []) : [];
  if (mods.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) return true;
  const name = (node as { name?: ts.Node }).name;
  return name !== undefined && ts.isIdentifier(name) && exportedNames.has(name.text);
}

function memberName(member: ts.Node, sf: ts.SourceFile): string | undefined {
  if (ts.isConstructorDeclaration(member)) return "constructor";
  const name = (member as { name?: ts.Node }).name;
  if (name === undefined) return ts.isIndexSignatureDeclaration(member) ? "[index]" : undefined;
  if (ts.isPrivateIdentifier(name)) return undefined;
  return name.getText(sf);
}

function isPrivate(member: ts.Node): boolean {
  const mods = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : [];
  return mods.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword);
}

/** The doc blocks of `source` (TypeScript text) named `file`. */
export function docBlocksOf(file: string, source: string): DocBlock[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true);
  const out: DocBlock[] = [];
  const add = (node: ts.Node, name: string, kind: DocBlock["kind"]) => {
    const doc = lastDoc(node);
    if (doc === undefined) return;
    const start = sf.getLineAndCharacterOfPosition(doc.getStart(sf)).line;
    const end = sf.getLineAndCharacterOfPosition(doc.getEnd()).line;
    out.push({ file, line: start + 1, name, kind, lines: end - start + 1 });
  };
  const addMembers = (owner: string, members: ts.NodeArray<ts.Node>) => {
    for (const member of members) {
      const name = memberName(member, sf);
      if (name !== undefined && !isPrivate(member)) add(member, `${owner}.${name}`, "member");
    }
  };

  const exportedNames = new Set<string>();
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st) && st.moduleSpecifier === undefined && st.exportClause) {
      if (ts.isNamedExports(st.exportClause)) {
        for (const el of st.exportClause.elements) {
          exportedNames.add((el.propertyName ?? el.name).text);
        }
      }
    }
  }
  for (const st of sf.statements) {
    if (!isExported(st, exportedNames)) {
      if (!ts.isVariableStatement(st)) continue;
      const names = st.declarationList.declarations.map((d) => d.name.getText(sf));
      if (!names.some((n) => exportedNames.has(n))) continue;
    }
    if (ts.isClassDeclaration(st) || ts.isInterfaceDeclaration(st)) {
      const name = st.name?.text ?? "default";
      add(st, name, "top");
      addMembers(name, st.members);
    } else if (ts.isTypeAliasDeclaration(st)) {
      add(st, st.name.text, "top");
      if (ts.isTypeLiteralNode(st.type)) addMembers(st.name.text, st.type.members);
    } else if (ts.isFunctionDeclaration(st) || ts.isEnumDeclaration(st)) {
      add(st, st.name?.text ?? "default", "top");
    } else if (ts.isVariableStatement(st)) {
      add(st, st.declarationList.declarations.map((d) => d.name.getText(sf)).join(", "), "top");
    }
  }
  return out;
}

/** The doc blocks of every file under src/ for which `include(file)` holds. */
export function docBlocks(include: (file: string) => boolean = () => true): DocBlock[] {
  return sourceFiles()
    .filter(include)
    .flatMap((file) => docBlocksOf(file, readFileSync(join(ROOT, file), "utf8")));
}
