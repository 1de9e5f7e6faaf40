import { Script } from "../script.js";
import {
  indent,
  LEDGER_AT,
  LUA_COUNTER_RETUNE,
  LUA_WINDOW_INDEX,
  luaArgs,
  luaFloats,
  luaLedger,
  luaStore,
  luaWindowIndex,
} from "./common.js";

/**
 * The sliding window counter's one script (consume and peek). One string per key,
 * `struct.pack('<ddddd', index, prev, curr, at, windowMs)` (window index, units in windows
 * index-1 and index, last write's time, the length counted with: `counterRetuned`), then
 * `struct.pack('<d', blockedUntilMs)` while blocked, then, once a charge took from it, the
 * ledger's id (16 bytes further than `LEDGER_AT` in common.ts), which every write keeps.
 * ARGV: limit, windowMs, cost, take (1/0, `c` a charge), now ('' = TIME), maxTtlMs, deadlineMs.
 * Reply after rolling to now's window (`luaFloats` pairs): `{allowed, index, prev, curr
 * (before the cost), now, serverNowMs}`, a charge's with the ledger's id before `serverNowMs`
 * (`{-1, serverNowMs}` past the deadline; `{2, ..., blockLeftMs, serverNowMs}` blocked).
 *
 * Mirrors `counterEstimate` operation for operation: `prev * ((index + 1) * W - now) / W +
 * curr`. Both windows live in one key, which expires when the estimate reaches 0 (the end of
 * the next window). A time behind the last write counts as that write's time.
 */
export const SLIDING_WINDOW_COUNTER_SCRIPT = new Script(
  "sliding-window-counter",
  `${luaArgs("limit", "windowMs")}
local state = redis.call('GET', key)
local index, prev, curr, blockedUntil, at = -math.huge, 0, 0, nil, nil
local stored = nil
if state then
  local w
  index, prev, curr, at, w = struct.unpack('<ddddd', state)
  if now < at then now = at end
  if #state > 40 then blockedUntil = struct.unpack('<d', state, 41) end
  if w ~= windowMs then
    ${indent(LUA_WINDOW_INDEX, "    ")}
    ${indent(LUA_COUNTER_RETUNE, "    ")}
  else
    stored = index
  end
end
-- time.ts windowIndex(): floor(t / w), corrected so that k * w <= t < (k + 1) * w.
local k
${luaWindowIndex("k", "now", "windowMs")}
if k ~= index then
  if k == index + 1 then prev = curr else prev = 0 end
  curr = 0
  index = k
end
local estimate = curr
if prev ~= 0 then
  estimate = prev * (((index + 1) * windowMs - now) / windowMs) + curr
end
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= (limit - estimate) + 1e-9 * (cost > 1 and cost or 1)
if blockedUntil and now < blockedUntil then
  ${indent(luaFloats(["2"], ["index", "prev", "curr", "now", "blockedUntil - now"]), "  ")}
end
local ledger = nil
if allowed and take and cost > 0 then
  local value = struct.pack('<ddddd', index, prev, curr + cost, now, windowMs)
  ${indent(luaLedger(LEDGER_AT + 16, false, ", 16 bytes further"), "  ")}
  -- The last write in this window, with this windowMs, set the key's expiry to the end of
  -- the next window (PXAT), unless it was capped by maxTtl: kept as it is.
  ${luaStore(
    "value",
    "((index + 1) * windowMs - now) + windowMs",
    "(index + 2) * windowMs",
    "stored == index and math.ceil(((index + 1) * windowMs - at) + windowMs) < maxTtl",
  ).replace(/\n/g, "\n  ")}
end
if ledger then
  ${indent(luaFloats(["allowed and 1 or 0"], ["index", "prev", "curr", "now", "ledger"]), "  ")}
end
${luaFloats(["allowed and 1 or 0"], ["index", "prev", "curr", "now"])}
`,
);
