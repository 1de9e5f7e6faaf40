// The package.json that goes into the tarball: the repository's without its `prepare`
// script. npm runs `prepare` when it installs tollgate from git (`npm install git+<url>`:
// it installs the devDependencies, then `prepare` builds dist/), so the repository keeps
// it; in a tarball it would never run, yet npm 11 lists it on every install of the tarball
// as an install script to review.
//
//   node scripts/pack-manifest.mjs strip     (prepack, after the build) writes package.json
//                                            without `prepare`, the original kept beside it
//   node scripts/pack-manifest.mjs restore   (postpack) puts the original back
//
// A pack that fails between the two leaves the original in package.json.prepack: `strip`
// and `restore` both put it back first, so no run loses the script.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = join(root, "package.json");
const kept = join(root, "package.json.prepack");

/** Puts the kept original back, if a strip left one. */
function restore() {
  if (existsSync(kept)) renameSync(kept, manifest);
}

const command = process.argv[2];
if (command === "strip") {
  restore();
  const text = readFileSync(manifest, "utf8");
  const pkg = JSON.parse(text);
  if (pkg.scripts?.prepare !== undefined) {
    delete pkg.scripts.prepare;
    writeFileSync(kept, text);
    // Written beside it, then renamed over it: a reader (a test reading the version) never
    // sees a half-written file.
    writeFileSync(`${manifest}.tmp`, `${JSON.stringify(pkg, null, 2)}\n`);
    renameSync(`${manifest}.tmp`, manifest);
  }
} else if (command === "restore") {
  restore();
} else {
  console.error("usage: node scripts/pack-manifest.mjs strip|restore");
  process.exit(2);
}
