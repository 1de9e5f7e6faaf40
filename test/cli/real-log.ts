import { readFileSync } from "node:fs";
import { parseCombined } from "../../src/cli/parse-log.js";
import {
  accessLogPath,
  readSimpleLine,
  type SimpleLine,
  sharedLogPath,
} from "../support/access-log.js";

/** A skipped line: its 1-based number and the parser's reason. */
export interface Skipped {
  readonly line: number;
  readonly reason: string;
}

/**
 * The real log as the replay should see it: which lines the product's parser accepts
 * decides what is replayed (real logs hold cut-off lines), and the accepted lines' host,
 * user and time come from the separate oracle reading of test/support/access-log.ts.
 */
export interface RealLog {
  readonly path: string;
  /** Lines read (the file's lines, without a final empty one). */
  readonly read: number;
  /** The lines the parser accepts, in file order. */
  readonly accepted: readonly SimpleLine[];
  /** The lines it skips, with their numbers and reasons. */
  readonly skipped: readonly Skipped[];
}

/** Reads `path` (default: the shared log when present, else the excerpt). */
export function readRealLog(path = accessLogPath): RealLog {
  const text = readFileSync(path, "utf8");
  const all = text.split("\n");
  if (all[all.length - 1] === "") all.pop();
  const accepted: SimpleLine[] = [];
  const skipped: Skipped[] = [];
  for (const [i, line] of all.entries()) {
    const parsed = parseCombined(line);
    if (typeof parsed === "string") {
      skipped.push({ line: i + 1, reason: parsed });
      continue;
    }
    const simple = readSimpleLine(line);
    if (simple === undefined) throw new Error(`oracle cannot read accepted line ${i + 1}: ${line}`);
    accepted.push(simple);
  }
  return { path, read: all.length, accepted, skipped };
}

/**
 * The lines of the shared log known to be skipped, checked against the parser's own
 * verdict so that neither can drift: line 8899 is cut off inside its user agent.
 */
export const SHARED_LOG_SKIPS: readonly Skipped[] = [
  {
    line: 8899,
    reason:
      'unclosed quote: the "user-agent" field opened at column 111 has no closing quote (the line looks cut off)',
  },
];

/** The skips expected of `path`: the known ones of the shared log, none in the excerpt. */
export function knownSkips(path: string): readonly Skipped[] {
  return path === sharedLogPath ? SHARED_LOG_SKIPS : [];
}
