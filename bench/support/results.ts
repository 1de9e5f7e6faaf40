/**
 * Writes a run's results as JSON to bench/results/<timestamp>.json (ignored by git), so
 * runs can be compared later with any JSON tool.
 * @module
 */
import { mkdir, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

/** Writes `data` and returns the file's path relative to the package root. */
export async function writeResults(data: unknown, startedAt: Date): Promise<string> {
  const dir = fileURLToPath(new URL("../results/", import.meta.url));
  await mkdir(dir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, "-");
  const name = `${stamp}.json`;
  await writeFile(`${dir}${name}`, `${JSON.stringify(data, null, 2)}\n`);
  return `bench/results/${name}`;
}
