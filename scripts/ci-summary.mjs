// Prints the one line CI reads, `N passed, N failed`, from vitest's JSON report.
import { existsSync, readFileSync } from "node:fs";

const file = process.argv[2] ?? ".vitest-report.json";
if (!existsSync(file)) {
  console.log("0 passed, 1 failed");
  console.error(`ci-summary: no vitest report at ${file} (vitest did not run)`);
  process.exit(1);
}
const report = JSON.parse(readFileSync(file, "utf8"));
const failed = report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0);
const skipped = report.numPendingTests + (report.numTodoTests ?? 0);
console.log(
  `${report.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`,
);
