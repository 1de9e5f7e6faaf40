import { Script } from "../script.js";
import { LUA_COMMON, luaArgs } from "./common.js";

/**
 * The sliding window counter's one script (consume and peek). One hash per key:
 * `index` of the current window, `prev` and `curr` (units in windows index-1 and
 * index), `at` (time of the last write). ARGV: limit, windowMs, cost, take (1/0), now
 * ('' = server TIME), maxTtlMs. Reply: `{allowed (1/0), index, prev, curr (before the
 * cost), now}` after rolling to now's window; the caller builds the Decision with
 * `counterDecision` (window-math.ts), as `SlidingWindowCounter` does.
 *
 * Mirrors `counterEstimate` (window-math.ts) operation for operation:
 * `estimate = prev * ((index + 1) * W - now) / W + curr`, that is `prev * (W - e) / W + curr`.
 * Both windows live in one key, which expires at the end of the window after the
 * current one, when the estimate reaches 0: the previous window is always readable
 * for the whole current one. A time behind the last write counts as that write's time.
 */
export const SLIDING_WINDOW_COUNTER_SCRIPT = new Script(
  "sliding-window-counter",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}
local state = redis.call('HMGET', key, 'index', 'prev', 'curr', 'at')
local index, prev, curr = -math.huge, 0, 0
if state[1] then
  index = tonumber(state[1])
  prev = tonumber(state[2])
  curr = tonumber(state[3])
  local at = tonumber(state[4])
  if now < at then now = at end
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

local allowed = cost == 0 or fits(cost, limit - estimate)
if allowed and take and cost > 0 then
  redis.call('HSET', key, 'index', f(index), 'prev', f(prev), 'curr', f(curr + cost), 'at', f(now))
  expire(key, ((index + 1) * windowMs - now) + windowMs, (index + 2) * windowMs, explicit, maxTtl)
end
return { allowed and 1 or 0, f(index), f(prev), f(curr), f(now) }
`,
);
