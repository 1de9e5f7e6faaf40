/**
 * Section 6 (`npm run bench:http`). Placeholder until bench/http.bench.ts lands.
 * @module
 */
import type { HttpResults } from "./report.js";

/** Runs the HTTP rows, or says why they were skipped. */
export async function runHttpSection(
  _quick: boolean,
  _progress: (text: string) => void,
): Promise<HttpResults | { skipped: string }> {
  return { skipped: "bench/http.bench.ts is not in this tree yet" };
}
