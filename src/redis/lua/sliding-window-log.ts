import { Script } from "../script.js";
import { LUA_COMMON, luaArgs } from "./common.js";

/**
 * The sliding window log's one script (consume and peek). One list per key: entries
 * oldest first, each `struct.pack('<dd', leaveAtMs, runningTotal)`, then a last
 * element `struct.pack('<dd', base, at)` (the running total already gone, and the
 * time of the last append). An entry counts while `leaveAtMs > now`; the window holds
 * `newest total - base`. ARGV: limit, windowMs, cost, take (1/0), now ('' = server
 * TIME), maxTtlMs, deadlineMs. Reply: `{allowed (1/0), available before the cost, newest leaveAtMs
 * (after the cost; -inf when empty), now, leaveAtMs of the entry whose departure lets the
 * cost fit (-inf when not computed), entries in the window before the cost}`, for
 * `logDecision` and `logLeaveAt` (window-math.ts).
 *
 * Mirrors `SlidingWindowLog` step for step (expiry, rebase above `2 * limit`, merging,
 * granule stamping, the binary search of retryAfter), so the floats agree bit for bit.
 * Dropping entries that left is stored even by a peek or a denial (it changes no decision).
 */
export const SLIDING_WINDOW_LOG_SCRIPT = new Script(
  "sliding-window-log",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}-- As SlidingWindowLog: the first max(64, ceil(limit)) entries (at most 2^24) keep their
-- exact time; beyond that, new entries are stamped at the end of their granule of
-- windowMs / exactEntries, so the log never holds more than 2 * exactEntries + 1.
local exactEntries = math.min(math.max(64, math.ceil(limit)), 16777216)
local maxEntries = 2 * exactEntries + 1

local function entry(i) return struct.unpack('<dd', redis.call('LINDEX', key, i)) end

local size, base, at = 0, 0, -math.huge
local meta = redis.call('LINDEX', key, -1)
if meta then
  base, at = struct.unpack('<dd', meta)
  size = redis.call('LLEN', key) - 1
  if now < at then now = at end
end

-- SlidingWindowLog.expire: drop entries that left, oldest first.
local dropped = false
while size > 0 do
  local leave, total = entry(0)
  if leave > now then break end
  base = total
  redis.call('LPOP', key)
  size = size - 1
  dropped = true
end
if dropped then
  if size == 0 then
    base = 0
    redis.call('DEL', key)
  else
    if base > 2 * limit then
      for i = 0, size - 1 do
        local leave, total = entry(i)
        redis.call('LSET', key, i, struct.pack('<dd', leave, total - base))
      end
      base = 0
    end
    redis.call('LSET', key, -1, struct.pack('<dd', base, at))
  end
end

local newestLeave, newestTotal = -math.huge, base
if size > 0 then newestLeave, newestTotal = entry(size - 1) end
local available = limit
if size > 0 then available = limit - (newestTotal - base) end

local allowed = cost == 0 or fits(cost, available)
local retryLeave = -math.huge
if allowed and take and cost > 0 then
  local stamp = now
  if size >= exactEntries then
    local granule = windowMs / exactEntries
    local k = math.ceil(now / granule)
    if k * granule < now then k = k + 1 end
    stamp = k * granule
    -- time.ts granuleEnd: a granule below the float step at now can round below now.
    if stamp < now then stamp = now end
  end
  -- window-math.ts logLeaveAt: where stamp + windowMs rounds down (TwoSum error > 0),
  -- move it up so the entry counts at least windowMs.
  local leaveAt = stamp + windowMs
  local windowPart = leaveAt - stamp
  if stamp - (leaveAt - windowPart) + (windowMs - windowPart) > 0 then
    leaveAt = leaveAt + math.abs(leaveAt) * 1.1102230246251568e-16 -- NEXT_UP: the next double
  end
  if size > 0 and (newestLeave == leaveAt or size >= maxEntries) then
    redis.call('LSET', key, size - 1, struct.pack('<dd', leaveAt, newestTotal + cost))
    redis.call('LSET', key, -1, struct.pack('<dd', base, now))
  elseif size > 0 then
    redis.call('LSET', key, -1, struct.pack('<dd', leaveAt, newestTotal + cost))
    redis.call('RPUSH', key, struct.pack('<dd', base, now))
  else
    redis.call('RPUSH', key, struct.pack('<dd', leaveAt, newestTotal + cost), struct.pack('<dd', base, now))
  end
  newestLeave = leaveAt
  expire(key, leaveAt - now, leaveAt, explicit, maxTtl)
elseif not allowed and size > 0 and fits(cost, limit) then
  -- SlidingWindowLog.retryLeaveAt: the oldest entry whose departure lets the cost fit.
  local lo, hi = 0, size - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local _, total = entry(mid)
    if fits(cost, limit - (newestTotal - total)) then hi = mid else lo = mid + 1 end
  end
  retryLeave = entry(lo)
end
return { allowed and 1 or 0, f(available), f(newestLeave), f(now), f(retryLeave), size, serverNow }
`,
);
