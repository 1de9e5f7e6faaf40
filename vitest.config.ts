import { defineConfig } from "vitest/config";
import { QuickFirstSequencer } from "./test/support/sequencer.js";

/**
 * Files that measure in real time (several processes under load, a stalled or failing-over
 * Redis, a blocked event loop): they run last, one at a time, with no other test file
 * beside them, so that the machine's own load is all they share it with.
 */
const REAL_TIME = [
  "test/redis/leased/processes.test.ts",
  "test/redis/leased/failure.test.ts",
  "test/redis/cluster-failover.test.ts",
  "test/redis/cluster-reshard.test.ts",
  "test/redis/stall.test.ts",
  "test/redis/event-loop-lag.test.ts",
  "test/store/stall.test.ts",
];

export default defineConfig({
  test: {
    // A test's timeout is a hang guard, not a speed check: vitest's 5 s default is one that
    // a busy 2-core machine trips on a test that computes for a second or two (under
    // coverage, beside the type check, and others' work). A hung test still fails, in a
    // minute; tests are kept fast by what they do, not by a timer.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    setupFiles: ["test/support/fast-check-seed.ts", "test/support/seeds.ts"],
    // One Redis Cluster for the run's files that share one (CI starts it in .ci/run).
    globalSetup: ["test/support/cluster-setup.ts"],
    // The type tests (test/**/*.test-d.ts) are checked by `npm run typecheck`: tsc over the
    // whole project, test/ included, reports a failed expectTypeOf as a type error.
    sequence: { sequencer: QuickFirstSequencer },
    coverage: { provider: "v8", include: ["src/**/*.ts"], reporter: ["text-summary"] },
    projects: [
      {
        extends: true,
        // Two files at a time: on two cores, one waits on I/O (Redis, a child process)
        // while the other computes; every one of them holds still under load.
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: REAL_TIME,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: "real-time", include: REAL_TIME, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
