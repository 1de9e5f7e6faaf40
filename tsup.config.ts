import { defineConfig } from "tsup";

export default defineConfig([
  {
    // Named entries so the subpaths build to dist/http.js, dist/redis.js, dist/testing.js.
    entry: {
      index: "src/index.ts",
      http: "src/http/index.ts",
      redis: "src/redis/index.ts",
      testing: "src/testing/index.ts",
    },
    format: ["esm", "cjs"],
    // Declarations marked @internal (protected and private machinery) stay out of the types.
    dts: { compilerOptions: { stripInternal: true } },
    sourcemap: true,
    target: "es2022",
    treeshake: true,
    // Shares one copy of each class between entry points in the CJS build too,
    // so `instanceof` works across `tollgate`, `tollgate/http` and `tollgate/redis`.
    splitting: true,
  },
  {
    // The `tollgate` bin (`tollgate replay …`): ESM only, no types.
    entry: { cli: "src/cli/index.ts" },
    format: ["esm"],
    sourcemap: true,
    target: "es2022",
    banner: { js: "#!/usr/bin/env node" },
  },
]);
