/**
 * `npm run bench`: the per-check cost of a single TokenBucket next to a bare
 * `performance.now()` call, measured in one run. (The full report against peers
 * lives in the other bench files once they land.)
 *
 * Each task runs an inner loop of BATCH calls so tinybench's own per-call overhead
 * does not dominate a ~50 ns operation; ns/op = task mean latency / BATCH.
 */
import os from "node:os";
import { Bench } from "tinybench";
import { TokenBucket } from "../src/index.js";

const quick = process.argv.includes("--quick");
const BATCH = 1000;

let sink = 0;
const bucket = new TokenBucket({ capacity: 1e12, refillPerSecond: 1e9 });
let fixed = 0;
const fixedBucket = new TokenBucket({ capacity: 1e12, refillPerSecond: 1e9, clock: () => fixed });

const bench = new Bench({ time: quick ? 50 : 1000, warmup: true });
bench
  .add("performance.now()", () => {
    for (let i = 0; i < BATCH; i++) sink += performance.now();
  })
  .add("TokenBucket.allow()", () => {
    for (let i = 0; i < BATCH; i++) if (bucket.allow()) sink++;
  })
  .add("TokenBucket.allow(), fixed clock", () => {
    fixed++;
    for (let i = 0; i < BATCH; i++) if (fixedBucket.allow()) sink++;
  })
  .add("TokenBucket.consume()", () => {
    for (let i = 0; i < BATCH; i++) sink += bucket.consume().remaining;
  });

await bench.run();
console.log(
  `Node ${process.version}, ${os.cpus()[0]?.model ?? "unknown CPU"}, ${os.cpus().length} cores`,
);
console.log("");
console.log("| operation | ns/op | x performance.now() |");
console.log("|---|---:|---:|");
const ns = (name: string) => {
  const task = bench.getTask(name);
  const r = task?.result;
  if (r === undefined || r.state !== "completed")
    throw new Error(`bench task ${name} did not complete`);
  return (r.latency.mean * 1e6) / BATCH;
};
const base = ns("performance.now()");
for (const task of bench.tasks) {
  const v = ns(task.name);
  console.log(`| ${task.name} | ${v.toFixed(1)} | ${(v / base).toFixed(2)} |`);
}
if (sink === 0.5) console.log("");
