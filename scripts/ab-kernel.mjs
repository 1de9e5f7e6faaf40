/**
 * An A/B of the hot paths between builds of tollgate, in alternating processes: single
 * `allow()` per algorithm, and `KeyedLimiter.allow(key)` on a hot key and on 100k and 1M random
 * keys. With `--plain`, the keyed scenarios run on a plain subclass of KeyedLimiter (its base
 * methods over the kernels) instead of the generated fast-path classes.
 *
 *   node scripts/ab-kernel.mjs run <bundle.mjs> [--plain]   one process: prints JSON lines
 *   node scripts/ab-kernel.mjs ab <label=bundle[,plain]>... [--rounds 5] [--only single,hot]
 *   (AB_ALGORITHMS=token-bucket,fixed-window limits the algorithms)
 *
 * `ab` runs every variant once per round, in an order rotated each round, and prints the
 * median of the rounds (operations per second) with the spread (min and max), and each
 * variant's median ratio to the first one's. Bundles: `npx esbuild src/index.ts --bundle
 * --format=esm --platform=node --outfile=…`.
 */
import { execFileSync } from "node:child_process";

const ALGORITHMS = {
  "token-bucket": (m, clock) => new m.TokenBucket({ capacity: 1e9, refillPerSecond: 1e9, clock }),
  "leaky-bucket": (m, clock) => new m.LeakyBucket({ capacity: 1e9, leakPerSecond: 1e9, clock }),
  "fixed-window": (m, clock) => new m.FixedWindow({ limit: 1e12, windowMs: 1000, clock }),
  "sliding-window-log": (m, clock) => new m.SlidingWindowLog({ limit: 1e9, windowMs: 1000, clock }),
  // The bench's log: full after 1000 checks, so a hot key's checks are denials.
  "sliding-window-log-full": (m, clock) =>
    new m.SlidingWindowLog({ limit: 1000, windowMs: 1e9, clock }),
  "sliding-window-counter": (m, clock) =>
    new m.SlidingWindowCounter({ limit: 1e12, windowMs: 1000, clock }),
};

/**
 * Ops per second of `op` over `n` calls, after `warm` calls: the median of `reps` runs of
 * `n / reps` calls each, on the wall clock (run it on a quiet machine: CPU time would count
 * the garbage collector's helper threads too).
 */
function rate(op, n, warm = n >> 1, reps = 5) {
  for (let i = 0; i < warm; i++) op(i);
  const per = Math.floor(n / reps);
  const rates = [];
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = r * per; i < (r + 1) * per; i++) op(i);
    rates.push((per / Number(process.hrtime.bigint() - t0)) * 1e9);
  }
  return median(rates);
}

/** Keys picked at random from `count` distinct keys (deterministic). */
function randomKeys(count, picks) {
  const keys = Array.from({ length: count }, (_, i) => `client:${i.toString(36)}`);
  let x = 0x9e3779b9;
  const out = new Array(picks);
  for (let i = 0; i < picks; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = keys[(x >>> 0) % count];
  }
  return out;
}

async function runOne(bundle, plain, only) {
  const m = await import(bundle);
  const Keyed = plain ? class PlainKeyedLimiter extends m.KeyedLimiter {} : m.KeyedLimiter;
  const clock = () => performance.now();
  const want = (s) => only === undefined || only.includes(s);
  const print = (scenario, algorithm, opsPerSecond) =>
    console.log(JSON.stringify({ scenario, algorithm, opsPerSecond }));
  const algorithms = process.env.AB_ALGORITHMS?.split(",");
  for (const [name, make] of Object.entries(ALGORITHMS)) {
    if (algorithms !== undefined && !algorithms.includes(name)) continue;
    if (want("single") && !plain) {
      const limiter = make(m, clock);
      print(
        "single",
        name,
        rate(() => limiter.allow(), 600_000),
      );
    }
    if (want("hot")) {
      const keyed = new Keyed(make(m, clock));
      print(
        "hot",
        name,
        rate(() => keyed.allow("hot-key"), 600_000),
      );
    }
    for (const [label, count] of [
      ["100k", 100_000],
      ["1M", 1_000_000],
    ]) {
      if (!want(label)) continue;
      const keyed = new Keyed(make(m, clock), { maxKeys: count });
      const keys = randomKeys(count, 800_000);
      for (let i = 0; i < count; i++) keyed.allow(`client:${i.toString(36)}`);
      for (let i = 0; i < 400_000; i++) keyed.allow(keys[i]); // warm: the first 400k picks
      print(
        label,
        name,
        rate((i) => keyed.allow(keys[i + 400_000]), 400_000, 0),
      );
    }
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function runAb(args) {
  const rounds = Number(args[args.indexOf("--rounds") + 1] || 5) || 5;
  const onlyAt = args.indexOf("--only");
  const only = onlyAt >= 0 ? args[onlyAt + 1] : undefined;
  const variants = args
    .filter((a) => a.includes("="))
    .map((a) => {
      const [label, spec] = a.split("=");
      const [bundle, flag] = spec.split(",");
      return { label, bundle, plain: flag === "plain" };
    });
  const results = new Map(); // `${scenario} ${algorithm}` -> label -> [ops]
  for (let r = 0; r < rounds; r++) {
    const order = variants.map((_, i) => variants[(i + r) % variants.length]);
    for (const v of order) {
      const argv = [process.argv[1], "run", v.bundle, ...(v.plain ? ["--plain"] : [])];
      if (only !== undefined) argv.push("--only", only);
      const out = execFileSync(process.execPath, ["--max-old-space-size=4096", ...argv], {
        encoding: "utf8",
        maxBuffer: 1 << 24,
      });
      for (const line of out.trim().split("\n")) {
        const { scenario, algorithm, opsPerSecond } = JSON.parse(line);
        const key = `${scenario} ${algorithm}`;
        if (!results.has(key)) results.set(key, new Map());
        const byLabel = results.get(key);
        if (!byLabel.has(v.label)) byLabel.set(v.label, []);
        byLabel.get(v.label).push(opsPerSecond);
      }
      process.stderr.write(`round ${r + 1}/${rounds} ${v.label} done\n`);
    }
  }
  const first = variants[0].label;
  for (const [key, byLabel] of results) {
    const base = byLabel.has(first) ? median(byLabel.get(first)) : undefined;
    const cells = [...byLabel].map(([label, xs]) => {
      const med = median(xs);
      const spread = `${(Math.min(...xs) / 1e6).toFixed(1)}-${(Math.max(...xs) / 1e6).toFixed(1)}`;
      const ratio = base === undefined ? "" : ` x${(med / base).toFixed(3)}`;
      return `${label} ${(med / 1e6).toFixed(2)}M/s [${spread}]${ratio}`;
    });
    console.log(`${key.padEnd(32)} ${cells.join(" | ")}`);
  }
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "run") {
  const onlyAt = rest.indexOf("--only");
  await runOne(
    new URL(rest[0], `file://${process.cwd()}/`).href,
    rest.includes("--plain"),
    onlyAt >= 0 ? rest[onlyAt + 1].split(",") : undefined,
  );
} else if (mode === "ab") runAb(rest);
else {
  console.error("usage: ab-kernel.mjs run <bundle> [--plain] | ab <label=bundle[,plain]>...");
  process.exit(2);
}
