// Explicit time: replay recorded requests through a KeyedLimiter with each request's own
// timestamp as the clock. This is the core of `tollgate replay` (which adds streaming,
// a bounded reorder window, five algorithms side by side and the reports).
import { existsSync, readFileSync } from "node:fs";
import { KeyedLimiter, TokenBucket } from "tollgate";

// The shared 10k-line log when this checkout has it, else the excerpt shipped here.
const shared = new URL("../../shared/data/access-combined-10k.log", import.meta.url);
const log = existsSync(shared) ? shared : new URL("./data/access-excerpt.log", import.meta.url);

const MONTHS = "JanFebMarAprMayJunJulAugSepOctNovDec";
/** Client address and time (epoch ms) of a Combined Log Format line. */
function parse(line: string): { ip: string; atMs: number } {
  const m =
    /^(\S+) \S+ \S+ \[(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d\d)(\d\d)\]/.exec(line);
  if (m === null) throw new Error(`not a CLF line: ${line}`);
  const [, ip, dd, mon, yyyy, hh, mi, ss, zh, zm] = m as unknown as string[];
  const utc = Date.UTC(+yyyy!, MONTHS.indexOf(mon!) / 3, +dd!, +hh!, +mi!, +ss!);
  const zoneMinutes = (zh!.startsWith("-") ? -1 : 1) * (Math.abs(+zh!) * 60 + +zm!);
  return { ip: ip!, atMs: utc - zoneMinutes * 60_000 };
}

// Log lines are written when requests end, so they are not in time order: sort them
// (a small file; the CLI reorders within a window instead, in constant memory).
const requests = readFileSync(log, "utf8")
  .trim()
  .split("\n")
  .map(parse)
  .sort((a, b) => a.atMs - b.atMs);

let now = 0; // the clock every per-IP bucket reads: the time of the request being replayed
const perIp = new KeyedLimiter(
  new TokenBucket({ capacity: 10, refillPerSecond: 0.1, clock: () => now }),
);
let denied = 0;
for (const { ip, atMs } of requests) {
  now = atMs;
  if (!perIp.allow(ip)) denied++;
}
console.log(
  `${requests.length} requests, ${denied} denied by 10 per IP at once and one more every 10 s`,
);
