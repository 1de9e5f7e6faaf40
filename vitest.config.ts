import { defineConfig } from "vitest/config";
import { QuickFirstSequencer } from "./test/support/sequencer.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/support/fast-check-seed.ts", "test/support/seeds.ts"],
    // One Redis Cluster for the run's files that share one (CI starts it in .ci/run).
    globalSetup: ["test/support/cluster-setup.ts"],
    // The type tests (test/**/*.test-d.ts) are checked by `npm run typecheck`: tsc over the
    // whole project, test/ included, reports a failed expectTypeOf as a type error.
    sequence: { sequencer: QuickFirstSequencer },
    coverage: { provider: "v8", include: ["src/**/*.ts"], reporter: ["text-summary"] },
  },
});
