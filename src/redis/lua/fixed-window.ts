import { Script } from "../script.js";
import { LUA_COMMON, luaArgs } from "./common.js";

/**
 * The fixed window's one script (consume and peek). One hash per key: `index` of the
 * window `count` belongs to, and `at`, the time (ms) of the last write. ARGV: limit,
 * windowMs, cost, take (1/0), now ('' = server TIME), maxTtlMs. Reply:
 * `{allowed (1/0), units used in now's window before the cost, now}`; the caller builds
 * the Decision with `fixedWindowDecision` (window-math.ts), as `FixedWindow` does.
 *
 * Mirrors `FixedWindow`'s state update. A time behind the last write counts as that write's
 * time, so a lagging clock never returns to an earlier window. The key expires at the
 * window's end (`PEXPIREAT`), set alike by every write of the window, so steady
 * traffic never extends it.
 */
export const FIXED_WINDOW_SCRIPT = new Script(
  "fixed-window",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}
local state = redis.call('HMGET', key, 'index', 'count', 'at')
local stored = nil
if state[1] then
  stored = tonumber(state[1])
  local at = tonumber(state[3])
  if now < at then now = at end
end
local k = windowIndex(now, windowMs)
local used = 0
if stored == k then used = tonumber(state[2]) end

local allowed = cost == 0 or fits(cost, limit - used)
if allowed and take and cost > 0 then
  local endAt = (k + 1) * windowMs
  redis.call('HSET', key, 'index', f(k), 'count', f(used + cost), 'at', f(now))
  expire(key, endAt - now, endAt, explicit, maxTtl)
end
return { allowed and 1 or 0, f(used), f(now) }
`,
);
