/**
 * Section 6 (`npm run bench:http`): the HTTP experiment of bench/http.bench.ts (node:http,
 * autocannon, each server in its own process), reported beside the source article's figures.
 * @module
 */
import { runHttpBench } from "../http.bench.js";
import type { HttpResults } from "./report.js";

/** Runs the HTTP rows (full: 100 connections, 10 s per variant after a warm-up). */
export async function runHttpSection(
  quick: boolean,
  progress: (text: string) => void,
): Promise<HttpResults | { skipped: string }> {
  const results = await runHttpBench({ quick, progress });
  return {
    rows: results.rows,
    connections: results.connections,
    durationSeconds: results.durationSeconds,
    notes: results.notes,
  };
}
