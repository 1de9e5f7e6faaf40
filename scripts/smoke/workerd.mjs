// The built package under workerd, through Miniflare (npm `miniflare`, pinned in
// devDependencies): a Worker and a Durable Object (scripts/smoke/workerd-worker.mjs) that
// import dist/ and decide with KeyedLimiter, at an old compatibility date (no WeakRef
// before 2025-06-01) and at the newest the installed workerd supports. Run by
// scripts/smoke/run.mjs; prints "skipped: <reason>" and exits 0 only when Miniflare
// cannot start here (its workerd binary missing or unable to run).
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DATES = ["2024-09-23"];
// What every route answers (see workerd-worker.mjs): 4 calls of key a with 3 units, one of b.
const SCRIPT = [true, true, true, false, 2];
const EXPECTED = {
  "/": { worker: SCRIPT, size: 2 },
  "/object": { object: SCRIPT, size: 2 },
  "/plans": { plans: [true, true, false, true, true, true, true, false], size: 2 },
  "/http": { statuses: [200, 200, 429], retryAfter: "60" },
};

let miniflare;
try {
  miniflare = await import("miniflare");
} catch (error) {
  console.log(`skipped: miniflare cannot be imported (${error.message.split("\n")[0]})`);
  process.exit(0);
}
DATES.push(miniflare.supportedCompatibilityDate);

const failures = [];
for (const compatibilityDate of DATES) {
  const mf = new miniflare.Miniflare({
    modules: true,
    modulesRoot: root,
    scriptPath: join(root, "scripts", "smoke", "workerd-worker.mjs"),
    modulesRules: [{ type: "ESModule", include: ["**/*.js", "**/*.mjs"] }],
    compatibilityDate,
    durableObjects: { LIMITER: "LimiterObject" },
    log: new miniflare.NoOpLog(),
  });
  try {
    try {
      await mf.ready;
    } catch (error) {
      // A runtime that cannot start at all (no binary for this machine) is a skip; a
      // script that throws while loading is a failure.
      if (compatibilityDate === DATES[0] && /spawn|ENOENT|EACCES|GLIBC/.test(String(error))) {
        console.log(`skipped: workerd cannot start here (${String(error).split("\n")[0]})`);
        process.exit(0);
      }
      throw error;
    }
    for (const [path, expected] of Object.entries(EXPECTED)) {
      const response = await mf.dispatchFetch(`http://localhost${path}`);
      const text = await response.text();
      const got = response.ok ? text : `HTTP ${response.status}: ${text}`;
      if (got !== JSON.stringify(expected)) {
        failures.push(
          `${compatibilityDate} ${path}: expected ${JSON.stringify(expected)}, got ${got}`,
        );
      }
    }
  } catch (error) {
    failures.push(`${compatibilityDate}: ${error.stack ?? error}`);
  } finally {
    await mf.dispose();
  }
}
if (failures.length > 0) {
  console.error(`workerd smoke failed:\n${failures.join("\n")}`);
  process.exit(1);
}
console.log(
  `workerd ${DATES.join(" and ")}: a Worker and a Durable Object decide with KeyedLimiter`,
);
