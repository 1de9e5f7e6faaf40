import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/support/fast-check-seed.ts", "test/support/seeds.ts"],
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
    coverage: { provider: "v8", include: ["src/**/*.ts"], reporter: ["text-summary"] },
  },
});
