import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "es2022",
  treeshake: true,
  // Shares one copy of each class between entry points in the CJS build too,
  // so `instanceof` works across `tollgate`, `tollgate/http` and `tollgate/redis`.
  splitting: true,
});
