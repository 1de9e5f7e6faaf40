import { Script } from "../script.js";
import { LUA_COUNTER_RETUNE, LUA_NUMBER, LUA_STORE, LUA_WINDOW_INDEX, luaArgs } from "./common.js";

/**
 * The sliding window counter's one script (consume and peek). One string per key,
 * `struct.pack('<ddddd', index, prev, curr, at, windowMs)` (window index, units in windows
 * index-1 and index, last write's time, the length they were counted with; another length,
 * after `reconfigure`, is turned into today's as `counterRetuned` does), then
 * `struct.pack('<d', blockedUntilMs)` while blocked; written with its expiry by one `SET`.
 * ARGV: limit, windowMs, cost, take (1/0), now ('' = server TIME), maxTtlMs, deadlineMs.
 * Reply after rolling to now's window: `{allowed (1/0), index, prev, curr (before the cost),
 * now, serverNowMs}` (`{-1, serverNowMs}` past the deadline; `{2, ..., now, blockLeftMs,
 * serverNowMs}` blocked, writing nothing), for `counterDecision` (window-math.ts).
 *
 * Mirrors `counterEstimate` operation for operation: `prev * ((index + 1) * W - now) / W +
 * curr`. Both windows live in one key, which expires when the estimate reaches 0 (the end of
 * the next window). A time behind the last write counts as that write's time.
 */
export const SLIDING_WINDOW_COUNTER_SCRIPT = new Script(
  "sliding-window-counter",
  `${luaArgs("limit", "windowMs")}${LUA_NUMBER}${LUA_WINDOW_INDEX}
local state = redis.call('GET', key)
local index, prev, curr, blockedUntil = -math.huge, 0, 0, nil
if state then
  local at, w
  index, prev, curr, at, w = struct.unpack('<ddddd', state)
  if now < at then now = at end
  if #state > 40 then blockedUntil = struct.unpack('<d', state, 41) end
  if w ~= windowMs then
    ${LUA_COUNTER_RETUNE.trim().replace(/\n/g, "\n    ")}
  end
end
local k = windowIndex(now, windowMs)
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
  return { 2, n(index), n(prev), n(curr), n(now), n(blockedUntil - now), serverNow }
end
if allowed and take and cost > 0 then
  ${LUA_STORE.trim().replace(/\n/g, "\n  ")}
  store(struct.pack('<ddddd', index, prev, curr + cost, now, windowMs),
    ((index + 1) * windowMs - now) + windowMs, (index + 2) * windowMs)
end
return { allowed and 1 or 0, n(index), n(prev), n(curr), n(now), serverNow }
`,
);
