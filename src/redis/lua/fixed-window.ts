import { Script } from "../script.js";
import { LUA_NUMBER, LUA_STORE, LUA_WINDOW_INDEX, luaArgs } from "./common.js";

/**
 * The fixed window's one script (consume and peek). One string per key,
 * `struct.pack('<ddd', index, count, at)`: `index` of the window `count` belongs to, and
 * `at`, the time (ms) of the last write, written with its expiry by one `SET`. ARGV: limit,
 * windowMs, cost, take (1/0), now ('' = server TIME), maxTtlMs, deadlineMs ('' = none).
 * Reply: `{allowed (1/0), units used in now's window before the cost, now, serverNowMs}`
 * (or `{-1, serverNowMs}` past the deadline); the caller builds the Decision with
 * `fixedWindowDecision` (window-math.ts), as `FixedWindow` does.
 *
 * Mirrors `FixedWindow`'s state update. A time behind the last write counts as that write's
 * time, so a lagging clock never returns to an earlier window. The key expires at the
 * window's end (`PXAT`), set alike by every write of the window, so steady
 * traffic never extends it.
 */
export const FIXED_WINDOW_SCRIPT = new Script(
  "fixed-window",
  `${luaArgs("limit", "windowMs")}${LUA_NUMBER}${LUA_WINDOW_INDEX}
local state = redis.call('GET', key)
local stored, count = nil, 0
if state then
  local at
  stored, count, at = struct.unpack('<ddd', state)
  if now < at then now = at end
end
local k = windowIndex(now, windowMs)
local used = 0
if stored == k then used = count end

-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= (limit - used) + 1e-9 * (cost > 1 and cost or 1)
if allowed and take and cost > 0 then
  ${LUA_STORE.trim().replace(/\n/g, "\n  ")}
  local endAt = (k + 1) * windowMs
  store(struct.pack('<ddd', k, used + cost, now), endAt - now, endAt)
end
return { allowed and 1 or 0, n(used), n(now), serverNow }
`,
);
