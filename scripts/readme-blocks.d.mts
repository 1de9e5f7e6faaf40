/** Types of readme-blocks.mjs, for test/docs/readme.test.ts. */

/** A fenced block: its language, its text, the line of its opening fence, why it is not run. */
export interface ReadmeBlock {
  readonly lang: string;
  readonly code: string;
  readonly line: number;
  readonly skip: string | undefined;
}

/** Every fenced block of `text`. */
export function readmeBlocks(text: string): ReadmeBlock[];

/** The languages whose blocks are programs to run. */
export const RUN_LANGS: ReadonlySet<string>;

/** The packages a block imports (bare specifiers), tollgate's own and Node's left out. */
export function importedPackages(code: string): string[];

/** A code block of docs/*.md and how the line before its fence marks it. */
export interface DocBlock {
  readonly lang: string;
  readonly code: string;
  readonly line: number;
  readonly mark: "run" | "example" | "fragment" | "none";
  readonly why: string | undefined;
}

/** The code blocks of one docs/*.md text, with their marks. */
export function docBlocks(text: string): DocBlock[];

/** One line of output a block claims: `//=> text`, or `//~> text` when its numbers vary. */
export interface Claim {
  readonly text: string;
  readonly varies: boolean;
  /** 1-based line within the block. */
  readonly line: number;
}

/** The output a block claims, in order. */
export function claimedOutput(code: string): Claim[];

/** Where `stdout` differs from the block's claims, or undefined when it prints exactly them. */
export function outputMismatch(code: string, stdout: string): string | undefined;
