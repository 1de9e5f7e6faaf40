import { Script } from "../script.js";
import { indent, LUA_COMMON, luaArgs } from "./common.js";
import { LUA_REFUND_RECORD, recorded } from "./refund.js";

/**
 * Entries per chunk of a log whose limiter keeps at most 64 exact entries (`limit <= 64`): a chunk
 * is then at most 56 bytes and a full log at most 45 chunks, so Redis keeps the whole hash as one
 * small listpack (`hash-max-listpack-value` 64, `hash-max-listpack-entries` 128 by default).
 */
export const SMALL_LOG_CHUNK_ENTRIES = 3;
/**
 * Entries per chunk of a larger log: 8 + 255 * 16 = 4,088 bytes, which with its string
 * header fills one 4 KiB allocation, so the log costs about 16 bytes an entry.
 */
export const LARGE_LOG_CHUNK_ENTRIES = 255;
/** Dead chunks (every entry left) a call deletes at most, oldest first. */
export const LOG_CHUNKS_DELETED_PER_CALL = 4;

// Layout: one hash per key. Field `m` is the meta, struct.pack('<dddddddd', head, tail, base, at,
// rebaseSeq, rebaseBy, clean, chunkEntries): entries are numbered (`head` the oldest live, `tail`
// one past the newest, from 0 in each new key), and entry `s` lives in field
// `floor(s / chunkEntries)` (decimal), a chunk: struct.pack('<d', maxLeave), then up to
// `chunkEntries` entries struct.pack('<dd', leaveAtMs, runningTotal). `maxLeave` is the latest
// leave time of any entry up to the chunk's end, nondecreasing from chunk to chunk (the leave times
// need not be: an entry stamped at its time may follow one stamped at the end of its granule).
// `base` is the running total gone, `at` the time of the last append, `clean` the oldest chunk not
// yet deleted, `chunkEntries` fixed when the key is made.
//
// Bounded steps, each mirroring SlidingWindowLog's result bit for bit:
// - expiry: a binary search over the chunks' maxLeave, then a scan inside one chunk (memory pops
//   the same entries one by one);
// - dead chunks: deleted LOG_CHUNKS_DELETED_PER_CALL a call at most; every append deletes one while
//   any is dead, so the hash holds at most 2 * exactEntries + 1 live entries plus chunkEntries - 1
//   dead ones; a log that empties is UNLINKed (freed off the main thread);
// - the rebase above 2 * limit is lazy: entries below rebaseSeq keep their totals and read as
//   total - rebaseBy, the float operation memory applies to each. An entry outlives at most one
//   rebase (on the new scale the entries older than the last one total at most limit + 1e-9 *
//   max(1, limit), below 2 * limit, so they leave before the next), so one offset suffices; only
//   for a limit near 1e-9, where that fails, are the few entries left (at most 129) rewritten;
// - retryAfter's binary search: O(log n) reads, each O(1) (a chunk is read once a call).

/** Lua setting the new local `before` to the running total before entry `s` (`base` at the head). */
const LUA_BEFORE = `
local before = base
if s > head then
  local _, t = entry(s - 1)
  before = t
end
`;

/**
 * The head both log scripts share, after the ARGV head: reads the meta (converting the
 * earlier list layout), defines the entry accessors, and drops the entries that left (a
 * binary search over the chunks, then the lazy rebase above `2 * limit`), so that the
 * decision and the refund read the log by one text.
 */
const LOG_STATE = `-- As SlidingWindowLog: the first max(64, ceil(limit)) entries (at most 2^24) keep their
-- exact time; beyond that, new entries are stamped at the end of their granule of
-- windowMs / exactEntries, so the log never holds more than 2 * exactEntries + 1.
local exactEntries = math.min(math.max(64, math.ceil(limit)), 16777216)
local maxEntries = 2 * exactEntries + 1
local floor = math.floor

local head, tail, base, at, rebaseSeq, rebaseBy, clean = 0, 0, 0, -math.huge, 0, 0, 0
local B = ${LARGE_LOG_CHUNK_ENTRIES}
if exactEntries <= 64 then B = ${SMALL_LOG_CHUNK_ENTRIES} end

local meta = redis.pcall('HGET', key, 'm')
if type(meta) == 'table' then
  -- The earlier layout, a list: entries struct.pack('<dd', leaveAtMs, runningTotal), then
  -- struct.pack('<dd', base, at). Kept as one entry of all its units (read at both ends, O(1)).
  if redis.call('TYPE', key)['ok'] ~= 'list' then return redis.error_reply(meta['err']) end
  local oldBase, oldAt = struct.unpack('<dd', redis.call('LINDEX', key, -1))
  local newest = false
  if redis.call('LLEN', key) > 1 then newest = redis.call('LINDEX', key, -2) end
  redis.call('UNLINK', key)
  meta = false
  if newest then
    local leave, total = struct.unpack('<dd', newest)
    redis.call('HSET', key, '0', struct.pack('<ddd', leave, leave, total - oldBase))
    tail, at = 1, oldAt
    meta = true
    expire(key, leave - now, leave, explicit, maxTtl)
  end
elseif meta then
  head, tail, base, at, rebaseSeq, rebaseBy, clean, B = struct.unpack('<dddddddd', meta)
end
if meta and now < at then now = at end
local dirty = meta == true
-- A block, after the meta's 64 bytes (see LOG_BLOCK_SCRIPT): kept while it lasts.
local blockedUntil, blockTail, recreated = nil, '', false
if type(meta) == 'string' and #meta > 64 then
  blockedUntil = struct.unpack('<d', meta, 65)
  if now < blockedUntil then blockTail = string.sub(meta, 65) else blockedUntil = nil end
end
-- Every entry left (or was given back): no key, or only the meta of a block in place.
local function emptied()
  redis.call('UNLINK', key)
  head, tail, base, rebaseSeq, rebaseBy, clean, dirty = 0, 0, 0, 0, 0, 0, false
  if exactEntries <= 64 then B = ${SMALL_LOG_CHUNK_ENTRIES} else B = ${LARGE_LOG_CHUNK_ENTRIES} end
  if blockTail ~= '' then dirty, recreated = true, true end
end

-- Chunks read this call, by index.
local chunks = {}
local function chunk(c)
  local s = chunks[c]
  if not s then
    s = redis.call('HGET', key, string.format('%d', c))
    chunks[c] = s
  end
  return s
end
-- Entry s as stored: leaveAtMs, running total on the scale of its time.
local function raw(s)
  local c = floor(s / B)
  return struct.unpack('<dd', chunk(c), 9 + 16 * (s - c * B))
end
-- Entry s: leaveAtMs and running total, as SlidingWindowLog holds them.
local function entry(s)
  local leave, total = raw(s)
  if s < rebaseSeq then total = total - rebaseBy end
  return leave, total
end
-- Stores entry s (at most tail); maxLeave nil keeps the chunk's.
local function write(s, leave, total, maxLeave)
  local c = floor(s / B)
  local k = s - c * B
  local old = ''
  if s < tail then old = chunk(c) elseif k > 0 then old = chunk(c) end
  if maxLeave == nil then maxLeave = struct.unpack('<d', old) end
  local new = struct.pack('<d', maxLeave) .. string.sub(old, 9, 8 + 16 * k)
    .. struct.pack('<dd', leave, total) .. string.sub(old, 25 + 16 * k)
  redis.call('HSET', key, string.format('%d', c), new)
  chunks[c] = new
end

-- True when entry s (head <= s < tail) holds no units (a tombstone: LogRing.refund).
local function empty(s)
  local _, total = entry(s)
  ${indent(LUA_BEFORE, "  ")}
  return total == before
end
-- LogRing.pushTombstone: an entry of no units at the tail, leaving at gone (a slot a
-- refund just freed, so its chunk is there); its chunk's maxLeave covers it.
local function tombstone(gone)
  local total = base
  if tail > head then
    local _, t = entry(tail - 1)
    total = t
  end
  local maxLeave = struct.unpack('<d', chunk(floor(tail / B)))
  if gone > maxLeave then maxLeave = gone end
  write(tail, gone, total, maxLeave)
  tail = tail + 1
end
-- LogRing.collapseTail: the empty entries at the tail become one tombstone.
local function collapseTail()
  local gone = -math.huge
  while tail > head and empty(tail - 1) do
    local leave = raw(tail - 1)
    if leave > gone then gone = leave end
    tail = tail - 1
  end
  if rebaseSeq > tail then rebaseSeq = tail end
  if gone > -math.huge then tombstone(gone) end
end

-- SlidingWindowLog.expire: drop the entries up to the first that has not left.
if tail > head and raw(head) <= now then
  local lo, hi = floor(head / B), floor((tail - 1) / B) + 1
  while lo < hi do -- the first chunk whose maxLeave is still ahead
    local mid = floor((lo + hi) / 2)
    if struct.unpack('<d', chunk(mid)) > now then hi = mid else lo = mid + 1 end
  end
  local first = math.min(tail, math.max(head, lo * B))
  while first < tail and raw(first) <= now do first = first + 1 end
  if first == tail then
    emptied()
  else
    local _, total = entry(first - 1)
    base, head, dirty = total, first, true
    if base > 2 * limit then
      -- SlidingWindowLog.rebase, lazily: entries below rebaseSeq read as total - rebaseBy.
      for s = head, rebaseSeq - 1 do
        local leave, old = entry(s)
        write(s, leave, old, nil)
      end
      rebaseSeq, rebaseBy, base = tail, base, 0
    end
  end
end

`;

/**
 * The tail both log scripts share, after their last read of the log: deletes a few dead
 * chunks, then writes the meta back if anything changed.
 */
const LOG_SAVE = `-- Delete a few chunks whose every entry has left (after the last read of them).
local dead = floor(head / B)
if clean < dead then
  local last = math.min(dead, clean + ${LOG_CHUNKS_DELETED_PER_CALL}) - 1
  local fields = {}
  for c = clean, last do fields[#fields + 1] = string.format('%d', c) end
  redis.call('HDEL', key, unpack(fields))
  clean, dirty = last + 1, true
end
if dirty then
  redis.call('HSET', key, 'm', struct.pack('<dddddddd', head, tail, base, at, rebaseSeq, rebaseBy, clean, B) .. blockTail)
  if recreated then redis.call('PEXPIRE', key, math.ceil(blockedUntil - now)) end
end
`;

/**
 * The sliding window log's one script (consume and peek), with a bounded number of O(1)
 * commands per call: the log is a hash of chunks (layout above; docs/redis.md#the-sliding-log-at-large-limits).
 * Mirrors `SlidingWindowLog` decision for decision (expiry, rebase above `2 * limit`,
 * merging, granule stamping, the binary search of retryAfter), so the floats agree bit for
 * bit. ARGV: limit, windowMs, cost, take (1/0), now ('' = server TIME), maxTtlMs, deadlineMs. Reply:
 * `{allowed (1/0), available before the cost, newest leaveAtMs (after the cost; -inf when
 * empty), now, leaveAtMs of the entry whose departure lets the cost fit (-inf when not
 * computed), entries in the window before the cost, the server's now}`, for `logDecision` and `logLeaveAt`
 * (window-math.ts). Dropping entries that left and deleting dead chunks is stored even by
 * a peek or a denial (it changes no decision). A key in the earlier layout (a list) becomes
 * one entry of all its units until its newest entry leaves: stricter, never a fresh budget.
 */
export const SLIDING_WINDOW_LOG_SCRIPT = new Script(
  "sliding-window-log",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}${LOG_STATE}
local size = tail - head
local newestLeave, newestTotal = -math.huge, base
if size > 0 then newestLeave, newestTotal = entry(tail - 1) end
-- LogRing.newestLiveLeaveAt: a tombstone at the tail holds no units; read past it.
local newestEmpty = size > 0 and empty(tail - 1)
local liveLeave = newestLeave
if newestEmpty then
  liveLeave = -math.huge
  if size > 1 then liveLeave = raw(tail - 2) end
end
local available = limit
if size > 0 then available = limit - (newestTotal - base) end

local allowed = cost == 0 or fits(cost, available)
if blockedUntil then take = false end -- a blocked key is denied: it logs nothing
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
  -- LogRing.append: an entry leaving no sooner (the same stamp, or one logged before a
  -- shorter window or a granule's rounding) takes the charge, so leave times stay in order;
  -- a tombstone takes no charge, and the new entry leaves just after it.
  local merge = false
  if size > 0 then
    if newestLeave >= leaveAt then
      if not newestEmpty then
        merge, leaveAt = true, newestLeave
      else
        leaveAt = newestLeave + math.abs(newestLeave) * 1.1102230246251568e-16
      end
    end
    if not merge and size >= maxEntries then
      merge = true
      if newestLeave > leaveAt then leaveAt = newestLeave end
    end
  end
  local maxLeave = leaveAt
  if size > 0 then
    local before = struct.unpack('<d', chunk(floor((tail - 1) / B)))
    if before > maxLeave then maxLeave = before end
  end
  if merge then
    write(tail - 1, leaveAt, newestTotal + cost, maxLeave)
    if tail - 1 < rebaseSeq then rebaseSeq = tail - 1 end
  else
    write(tail, leaveAt, newestTotal + cost, maxLeave)
    tail = tail + 1
  end
  at, liveLeave, dirty = now, leaveAt, true
  expire(key, leaveAt - now, leaveAt, explicit, maxTtl)
elseif not allowed and size > 0 and fits(cost, limit) then
  -- SlidingWindowLog.retryLeaveAt: the oldest entry whose departure lets the cost fit.
  local lo, hi = head, tail - 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    local _, total = entry(mid)
    if fits(cost, limit - (newestTotal - total)) then hi = mid else lo = mid + 1 end
  end
  retryLeave = raw(lo)
end

${LOG_SAVE}if blockedUntil then
  return { 2, f(available), f(liveLeave), f(now), f(retryLeave), size, f(blockedUntil - now), serverNow }
end
return { allowed and 1 or 0, f(available), f(liveLeave), f(now), f(retryLeave), size, serverNow }
`,
);

/**
 * The sliding log's refund (see {@link SLIDING_WINDOW_LOG_SCRIPT} for the layout): after dropping
 * the entries that left, as `SlidingWindowLog.refund`, the newest entries go first (an entry whose
 * cost fits in what is left leaves the log, the next one is cut by the rest), bit for bit as in
 * memory, and the entries that went leave one tombstone (an entry of no units) at the tail until
 * they would have left. Through a receipt (`ARGV[4]` = `r` and the leave time of the entry it
 * charged), as `LogRing.refundEntry`: out of the first entry that leaves at or after that time (its
 * own, while it is in the window), at most what it still holds, found by a binary search over the
 * chunks' `maxLeave`; the entry keeps its place (emptied or cut), the newer totals drop by the
 * units, empty ones at the tail become one tombstone. Work: amortized O(1) per logged entry without
 * a receipt; through one O(1) for the newest entry, else O(the newer entries), each chunk rewritten
 * once. ARGV as the decision's; reply `{units given back, serverNowMs}` (or `{-1, serverNowMs}`
 * past the deadline).
 */
export const SLIDING_WINDOW_LOG_REFUND_SCRIPT = new Script(
  "sliding-window-log-refund",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}${LUA_REFUND_RECORD}${recorded(`${LOG_STATE}
-- Through a receipt (ARGV[4] = 'r' .. the leave time of the entry it charged): as
-- LogRing.refundEntry, out of the first entry that leaves at or after that time.
local given = 0
if string.sub(ARGV[4], 1, 1) == 'r' then
  local mark = tonumber(string.sub(ARGV[4], 2))
  local asked = cost
  cost = 0
  if mark and mark > now and tail > head and asked > 0 then
    local lo, hi = floor(head / B), floor((tail - 1) / B) + 1
    while lo < hi do -- the first chunk whose maxLeave reaches the mark
      local mid = floor((lo + hi) / 2)
      if struct.unpack('<d', chunk(mid)) >= mark then hi = mid else lo = mid + 1 end
    end
    local s = math.max(head, lo * B)
    while s < tail and raw(s) < mark do s = s + 1 end
    if s < tail then
      local _, total = entry(s)
      ${indent(LUA_BEFORE, "      ")}
      local own = total - before
      local give = asked
      if own < asked then give = own end
      if give > 0 then
        -- The entries from s on, as memory leaves them: entry s keeps its place, emptied
        -- (its total that of the entry before) or cut; the newer totals less the units.
        local leaves, totals = {}, {}
        for j = s, tail - 1 do
          local l, t = entry(j)
          leaves[#leaves + 1] = l
          totals[#totals + 1] = t - give
        end
        if give == own then totals[1] = before end
        local newTail = s + #leaves
        -- Each chunk from s's to the new tail's rewritten once (one HSET): the entries before
        -- s as stored, then the new ones; maxLeave the larger of its own and theirs (an upper
        -- bound of its entries that stays nondecreasing from chunk to chunk).
        local fields = {}
        local i = 1
        local c = floor(s / B)
        while c * B < newTail do
          local old = chunk(c)
          local maxLeave = struct.unpack('<d', old)
          local first = math.max(s, c * B)
          local parts = { string.sub(old, 9, 8 + 16 * (first - c * B)) }
          for _ = first, math.min(newTail, (c + 1) * B) - 1 do
            if leaves[i] > maxLeave then maxLeave = leaves[i] end
            parts[#parts + 1] = struct.pack('<dd', leaves[i], totals[i])
            i = i + 1
          end
          local body = struct.pack('<d', maxLeave) .. table.concat(parts)
          chunks[c] = body
          fields[#fields + 1] = string.format('%d', c)
          fields[#fields + 1] = body
          c = c + 1
        end
        if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
        tail = newTail
        if s < rebaseSeq then rebaseSeq = s end
        if rebaseSeq > tail then rebaseSeq = tail end
        dirty, given = true, give
        if give == own then collapseTail() end
      end
    end
  end
end
-- SlidingWindowLog.refund (log-ring.ts): the newest entries first; an entry whose cost
-- fits in what is left goes, the next is cut by the rest (stored on the new scale).
-- The entries that went leave one tombstone at the tail (LogRing.refund), so that a
-- receipt of one of them finds it empty rather than a later charge's entry.
if cost > 0 then
  local left = cost
  local gone = -math.huge
  while tail > head do
    local s = tail - 1
    local leave, total = entry(s)
    ${indent(LUA_BEFORE, "    ")}
    local own = total - before
    if own == 0 then
      if leave > gone then gone = leave end
      tail = s
    elseif not (left > 0) then
      break
    elseif fits(own, left) then
      if leave > gone then gone = leave end
      tail = s
      left = left - own
    else
      write(s, leave, total - left, nil)
      if s < rebaseSeq then rebaseSeq = s end
      left = 0
    end
    dirty = true
  end
  if rebaseSeq > tail then rebaseSeq = tail end
  given = cost - left
  if gone > -math.huge then tombstone(gone) end
end
${LOG_SAVE}return { f(given), serverNow }
`)}`,
);

/**
 * Blocks a sliding log's key: the block's end after the meta's 64 bytes (a key without
 * state gets an empty log's meta), seen by the decision in the `HGET` of the meta it makes
 * anyway. ARGV: limit, windowMs, durationMs (as the cost), keep (1: a block in place stays
 * as it is), now, maxTtlMs, deadlineMs. The key lives at least until the block ends.
 * Reply: `{ms the key is blocked from now, serverNowMs}`.
 */
export const SLIDING_WINDOW_LOG_BLOCK_SCRIPT = new Script(
  "sliding-window-log-block",
  `${LUA_COMMON}${luaArgs("limit", "windowMs")}
local meta = redis.call('HGET', key, 'm')
local untilMs = now + cost
local body
if meta then
  body = string.sub(meta, 1, 64)
  if #meta > 64 then
    local had = struct.unpack('<d', meta, 65)
    if had > now and (take or had > untilMs) then untilMs = had end
  end
else
  local B = ${LARGE_LOG_CHUNK_ENTRIES}
  if math.min(math.max(64, math.ceil(limit)), 16777216) <= 64 then B = ${SMALL_LOG_CHUNK_ENTRIES} end
  body = struct.pack('<dddddddd', 0, 0, 0, -math.huge, 0, 0, 0, B)
end
local ms = math.ceil(untilMs - now)
local pttl = redis.call('PTTL', key)
if pttl > ms then ms = pttl end
redis.call('HSET', key, 'm', body .. struct.pack('<d', untilMs))
redis.call('PEXPIRE', key, ms)
return { f(untilMs - now), serverNow }
`,
);
