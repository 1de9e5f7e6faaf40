import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The shared 10k-line log, when this machine has it (it is not part of the package). */
export const sharedLogPath = resolve(repoRoot, "../shared/data/access-combined-10k.log");

/** The excerpt shipped under examples/data/. */
export const excerptPath = resolve(repoRoot, "examples/data/access-excerpt.log");

/** The real log the replay tests use: the shared one if present, else the excerpt. */
export const accessLogPath = existsSync(sharedLogPath) ? sharedLogPath : excerptPath;

const MONTHS = "JanFebMarAprMayJunJulAugSepOctNovDec";

/**
 * A deliberately separate, minimal reading of a Combined Log line for test oracles:
 * host, user and time (ms) by a regular expression, no escapes handled (the real logs
 * used here have none in the first fields).
 */
export interface SimpleLine {
  readonly host: string;
  readonly user: string;
  readonly timeMs: number;
}

const LINE =
  /^(\S+) \S+ (\S+) \[(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)\]/;

/** Reads host, user and time of one line; undefined when the oracle cannot read it. */
export function readSimpleLine(line: string): SimpleLine | undefined {
  const m = LINE.exec(line);
  if (m === null) return undefined;
  const [, host, user, dd, mon, yyyy, hh, mm, ss, sign, zh, zm] = m as unknown as string[];
  const utc = Date.UTC(
    Number(yyyy),
    MONTHS.indexOf(mon!) / 3,
    Number(dd),
    Number(hh),
    Number(mm),
    Number(ss),
  );
  const offset = (sign === "-" ? -1 : 1) * (Number(zh) * 60 + Number(zm)) * 60_000;
  return { host: host!, user: user!, timeMs: utc - offset };
}

/** Reads host, user and time of every line of `path` (throws on a line it cannot read). */
export function readSimpleLines(path: string): SimpleLine[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l, i) => {
      const line = readSimpleLine(l);
      if (line === undefined) throw new Error(`oracle cannot read line ${i + 1}: ${l}`);
      return line;
    });
}

/** Counts of `keyOf(line)` per key and calendar minute. */
export function countPerKeyMinute(
  lines: readonly SimpleLine[],
  keyOf: (line: SimpleLine) => string,
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const l of lines) {
    const k = `${keyOf(l)} ${Math.floor(l.timeMs / 60_000)}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return counts;
}
