import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The order vitest runs the test files in (within each group of vitest.config.ts's
 * projects, in their order): files that failed last time first, then the
 * quickest first (by the last run's duration, else by size), so that results show within
 * seconds of `npm test` and a slow file never holds back the first lines.
 */
export class QuickFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const weight = (spec: TestSpecification) => {
      const key = `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`;
      const result = cache.getFileTestResults(key);
      // A file's size stands for its time until a run has measured it: 1 ms per 100 bytes.
      const ms = result?.duration ?? (cache.getFileStats(key)?.size ?? 0) / 100;
      return { failed: result?.failed === true, ms };
    };
    const weights = new Map(files.map((f) => [f, weight(f)]));
    return [...files].sort((a, b) => {
      const group = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder;
      if (group !== 0) return group;
      const wa = weights.get(a)!;
      const wb = weights.get(b)!;
      if (wa.failed !== wb.failed) return wa.failed ? -1 : 1;
      return wa.ms - wb.ms;
    });
  }
}
