// After the build: each declaration file in dist/ that imports a `node:` module gets a
// `/// <reference types="node" />` first, so a TypeScript project with @types/node installed
// finds them whatever its `types` setting (TypeScript 6 and later default it to none, and
// then `import ... from "node:http"` in tollgate/http's types did not resolve).
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const REFERENCE = '/// <reference types="node" />\n';
for (const name of readdirSync(dist)) {
  if (!/\.d\.c?ts$/.test(name)) continue;
  const path = join(dist, name);
  const text = readFileSync(path, "utf8");
  if (text.startsWith(REFERENCE) || !/from ['"]node:/.test(text)) continue;
  writeFileSync(path, REFERENCE + text);
}
