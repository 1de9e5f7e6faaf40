import { Script } from "../script.js";
import {
  indent,
  LEDGER_AT,
  luaArgs,
  luaCleanMs,
  luaFloats,
  luaLedger,
  luaStore,
} from "./common.js";

/**
 * The token bucket's one script (consume and peek); {@link LEAKY_BUCKET_SCRIPT} is its twin
 * (a leaky bucket is a token bucket whose tokens are its free room). One string per key,
 * `struct.pack('<ddd', tokens, anchor, capacity)` (`tokens` exact at `anchor`), then
 * `struct.pack('<d', blockedUntilMs)` while blocked, then, once a charge took from it, the
 * ledger (`LEDGER_AT` in common.ts), which every write keeps; one `SET` with its expiry.
 * ARGV: capacity, refillPerSecond, cost, take (1/0, `c` a charge), now ('' = TIME),
 * maxTtlMs ('' = default), initial units (optional), deadlineMs. Reply (`luaFloats` pairs):
 * `{allowed, tokens before the cost, now, serverNowMs}`, a charge's with the ledger's id and
 * credited units before `serverNowMs` (`{-1, serverNowMs}` past the deadline; `{2, tokens,
 * blockLeftMs, serverNowMs}` blocked, writing nothing), for `bucketDecision`.
 *
 * Mirrors bucket-math.ts; a time behind the anchor counts as the anchor. A full bucket has
 * no key; another expires when full again. No key is a new bucket: full, or its initial units.
 */
export const TOKEN_BUCKET_SCRIPT = bucketScript("token-bucket", false);

/** The leaky bucket's script: {@link TOKEN_BUCKET_SCRIPT} keeping the level at a new capacity. */
export const LEAKY_BUCKET_SCRIPT = bucketScript("leaky-bucket", true);

/**
 * Reads a bucket's state (the local `state`, not nil) into `tokens` at `now` (clamped to the
 * anchor) under today's `capacity`: as `BucketBase.unitsAt`, and, for a state written with another
 * capacity (`reconfigure`), as `planBucket` at this call: a bucket full under its old capacity is
 * fresh (full at the new one); else a token bucket's tokens are clamped to the new capacity, a
 * leaky bucket's level is kept as it is (even above a smaller capacity), as `retunedUnits` does.
 */
export function luaBucketRead(leaky: boolean): string {
  return `
local stored, anchor, storedCap = struct.unpack('<ddd', state)
if now < anchor then now = anchor end
local refilled = stored + ((now - anchor) * rate) / 1000
if refilled >= storedCap then
  tokens = capacity
elseif storedCap == capacity then
  tokens = refilled
else
${
  leaky
    ? "  tokens = capacity - (storedCap - refilled)"
    : "  if refilled < capacity then tokens = refilled else tokens = capacity end"
}
end
`;
}

/** The decision script of a token (`leaky` false) or leaky bucket. */
function bucketScript(name: string, leaky: boolean): Script {
  return new Script(
    name,
    `${luaArgs("capacity", "rate")}
local state = redis.call('GET', key)
local tokens = capacity
local blockedUntil = nil
local new = false
local ledger, credited = nil, 0
if state then
  ${indent(luaBucketRead(leaky), "  ")}
  if #state > 24 then blockedUntil = struct.unpack('<d', state, 25) end
elseif #ARGV > 7 and ARGV[7] + 0 < capacity then
  tokens = ARGV[7] + 0
  new = true
end

-- A free probe is allowed even in an overdraft (tokens a hair below 0, kept as in TS).
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= tokens + 1e-9 * (cost > 1 and cost or 1)
if blockedUntil and now < blockedUntil then
  ${indent(luaFloats(["2"], ["tokens", "blockedUntil - now"]), "  ")}
end
if take and (new or (allowed and cost > 0)) then
  local left = tokens
  if allowed then left = tokens - cost end
  local missing = capacity - left
  if missing > 0 then
    -- numeric.ts cleanMs(): snap to the nearest integer within a relative 1e-9; never negative.
    local fullMs = math.huge
    if rate > 0 then
      local ms = (missing * 1000) / rate
      ${indent(luaCleanMs("fullMs", "ms"), "      ")}
    end
    local value = struct.pack('<ddd', left, now, capacity)
    ${indent(luaLedger(LEDGER_AT, true), "    ")}
    ${indent(luaStore("value", "fullMs", "now + fullMs"), "    ")}
  else
    redis.call('DEL', key)
  end
end
if ledger then
  ${indent(luaFloats(["allowed and 1 or 0"], ["tokens", "now", "ledger", "credited"]), "  ")}
end
${luaFloats(["allowed and 1 or 0"], ["tokens", "now"])}
`,
  );
}
