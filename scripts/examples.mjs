// `npm run examples`: runs every examples/*.ts with tsx (each must finish by itself).
// Examples that talk to Redis read REDIS_URL; when it is unset and redis-server is on
// PATH, a private server is started on a free loopback port and stopped by pid after.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startRedis } from "./private-redis.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsx = join(root, "node_modules", ".bin", "tsx");
const only = process.argv.slice(2);

const redis = await startRedis();
let failed = 0;
try {
  const files = readdirSync(join(root, "examples"))
    .filter((f) => f.endsWith(".ts"))
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
    .sort();
  for (const file of files) {
    const r = spawnSync(tsx, [join("examples", file)], {
      cwd: root,
      encoding: "utf8",
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: "1" },
    });
    if (r.status === 0) {
      console.log(`examples/${file}: ok`);
    } else {
      failed++;
      console.error(`examples/${file}: FAILED (${r.status ?? r.signal})\n${r.stdout}${r.stderr}`);
    }
  }
} finally {
  redis?.kill();
}
if (failed > 0) process.exit(1);
