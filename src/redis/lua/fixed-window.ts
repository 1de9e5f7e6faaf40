import { Script } from "../script.js";
import { LUA_NUMBER, LUA_STORE, LUA_WINDOW_INDEX, luaArgs } from "./common.js";

/**
 * The fixed window's one script (consume and peek). One string per key,
 * `struct.pack('<ddd', endAt, count, at)` (the end of `count`'s window, as `FixedWindow`
 * keeps it, so a new `windowMs` keeps a count until its window ends; the last write's time),
 * then `struct.pack('<d', blockedUntilMs)` while blocked; written with its expiry by one `SET`.
 * ARGV: limit, windowMs, cost, take (1/0), now ('' = server TIME), maxTtlMs, deadlineMs.
 * Reply: `{allowed (1/0), used before the cost, ms until the window ends, the window's end,
 * now, serverNowMs}` (`{-1, serverNowMs}` past the deadline; `{2, used, endsInMs,
 * blockLeftMs, serverNowMs}` blocked, writing nothing), for `fixedWindowDecision`
 * (window-math.ts); the window's end and now make a receipt.
 *
 * Mirrors `FixedWindow`'s state update. A time behind the last write counts as that write's
 * time, so a lagging clock never returns to an earlier window. The key expires at the
 * window's end (`PXAT`), set alike by every write of the window.
 */
export const FIXED_WINDOW_SCRIPT = new Script(
  "fixed-window",
  `${luaArgs("limit", "windowMs")}${LUA_NUMBER}${LUA_WINDOW_INDEX}
local state = redis.call('GET', key)
local endAt, count, blockedUntil = -math.huge, 0, nil
if state then
  local at
  endAt, count, at = struct.unpack('<ddd', state)
  if now < at then now = at end
  if #state > 24 then blockedUntil = struct.unpack('<d', state, 25) end
end
-- window-math.ts fixedWindowUsed(), fixedWindowEndAt()
local used = 0
if now < endAt then used = count else endAt = (windowIndex(now, windowMs) + 1) * windowMs end
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= (limit - used) + 1e-9 * (cost > 1 and cost or 1)
if blockedUntil and now < blockedUntil then
  return { 2, n(used), n(endAt - now), n(blockedUntil - now), serverNow }
end
if allowed and take and cost > 0 then
  ${LUA_STORE.trim().replace(/\n/g, "\n  ")}
  store(struct.pack('<ddd', endAt, used + cost, now), endAt - now, endAt)
end
return { allowed and 1 or 0, n(used), n(endAt - now), n(endAt), n(now), serverNow }
`,
);
