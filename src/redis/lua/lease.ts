import { MAX_CONTENDER_WAIT_MS } from "../leased/shared-bucket.js";
import { Script } from "../script.js";
import { LUA_COMMON } from "./common.js";

/**
 * The lease exchange of `LeasedTokenBucket`, batched over keys (of one hash slot in a cluster), on
 * the server's clock; src/redis/leased/shared-bucket.ts is its model, operation for operation. A
 * key is a hash: `tokens` and `anchor` (absent: full), `c:<process>` per contender
 * (`demand entitled most until`), `block`, `lift` (`at kept`), `s:<process>` (its last call and
 * answer, until that call's deadline: a call run twice is answered from it, an older one changes
 * nothing) and with `record` the totals `taken`, `given`, `charged`; it lives `maxTtlMs` after a
 * write (recorded) or until full, at least until its block, lift's mark and call records lapse.
 * KEYS: bucket keys. ARGV: capacity, refillPerSecond, maxTtlMs, record (1/0), staleMs, the
 * process's tag, the call's sequence number, per key give, charge, want, need, demand, block change
 * (`''`, `b<ms>`, `o<ms>`, `l<ms>`), then the deadline (server ms, '' = none, no record). Past it:
 * `{-1, serverNowMs}`, no write. Else per key granted, waitMs, tokens left, accepted back,
 * blockedMs, liftedAgoMs; last the server's now. Floats as `%.17g` strings.
 */
export const LEASE_SCRIPT = new Script(
  "lease",
  `${LUA_COMMON}
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local maxTtl = tonumber(ARGV[3])
local record = ARGV[4] == '1'
local staleMs = tonumber(ARGV[5])
local me = 'c:' .. ARGV[6]
local mark = 's:' .. ARGV[6]
local sequence = tonumber(ARGV[7])
local deadline = ARGV[#ARGV]
local keepUntil = nil
if deadline ~= '' then keepUntil = tonumber(deadline) end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
if deadline ~= '' and now > tonumber(deadline) then return { -1, f(now) } end
local function pos(x) if x > 0 then return x end return 0 end
-- shared-bucket.ts fairShares(): water-filling of the refill rate over the demands.
local function fairShares(demands)
  local order = {}
  for i = 1, #demands do order[i] = i end
  table.sort(order, function(a, b)
    if demands[a] ~= demands[b] then return demands[a] < demands[b] end
    return a < b
  end)
  local shares = {}
  local left = rate
  local count = #demands
  for _, i in ipairs(order) do
    local equal = left / count
    local share = demands[i]
    if not (share < equal) then share = equal end
    shares[i] = share
    left = left - share
    count = count - 1
  end
  return shares
end
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local base = 7 + (i - 1) * 6
  local h = redis.call('HGETALL', key)
  -- shared-bucket.ts repeated(): a call this key ran already is answered, not run again.
  local again = nil
  for j = 1, #h, 2 do
    if h[j] == mark then
      local s, u, g, w, k, b, bl, la = string.match(h[j + 1], '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
      if tonumber(u) >= now and tonumber(s) >= sequence then
        if tonumber(s) == sequence then again = { g, w, k, b, bl, la }
        else again = { '0', '0', k, '0', bl, la } end
      end
    end
  end
  if again then
    for _, v in ipairs(again) do out[#out + 1] = v end
  else
  local give = tonumber(ARGV[base + 1])
  local charge = tonumber(ARGV[base + 2])
  local want = tonumber(ARGV[base + 3])
  local need = tonumber(ARGV[base + 4])
  local demand = tonumber(ARGV[base + 5])
  local change = ARGV[base + 6]
  local asks = give > 0 or charge > 0 or want > 0 or change ~= ''
  local keepCall = asks and keepUntil ~= nil
  -- The latest end of a call record kept: others' that have not lapsed, and this
  -- process's, the one this call writes or else the one of its last call, which stays.
  local recordsUntil = nil
  if keepCall then recordsUntil = keepUntil end
  local tokens = nil
  local anchor = now
  local taken, given, charged = 0, 0, 0
  local blockedUntil, liftedAt, liftKept = -math.huge, -math.huge, -math.huge
  local live = {}
  local drop = {}
  for j = 1, #h, 2 do
    local name = h[j]
    local value = h[j + 1]
    if name == 'tokens' then tokens = tonumber(value)
    elseif name == 'anchor' then anchor = tonumber(value)
    elseif name == 'taken' then taken = tonumber(value)
    elseif name == 'given' then given = tonumber(value)
    elseif name == 'charged' then charged = tonumber(value)
    elseif name == 'block' then blockedUntil = tonumber(value)
    elseif name == 'lift' then
      local a, k = string.match(value, '^(%S+) (%S+)$')
      liftedAt = tonumber(a)
      liftKept = tonumber(k)
    elseif string.sub(name, 1, 2) == 'c:' then
      local d, e, m, u = string.match(value, '^(%S+) (%S+) (%S+) (%S+)$')
      live[#live + 1] = { id = name, demand = tonumber(d), entitled = tonumber(e), most = tonumber(m), untilMs = tonumber(u) }
    elseif string.sub(name, 1, 2) == 's:' then
      local u = tonumber(string.match(value, '^%S+ (%S+) '))
      if u < now then
        drop[#drop + 1] = name
      elseif (name ~= mark or not keepCall) and (recordsUntil == nil or u > recordsUntil) then
        recordsUntil = u
      end
    end
  end
  if tokens == nil then tokens = capacity; anchor = now end
  local t = now
  if t < anchor then t = anchor end
  -- shared-bucket.ts applyBlock(): the block first; a blocked key takes nothing.
  local hadBlock = blockedUntil ~= -math.huge
  local hadLift = liftedAt ~= -math.huge
  if not (blockedUntil > t) then blockedUntil = -math.huge end
  if not (liftKept > t) then liftedAt = -math.huge; liftKept = -math.huge end
  local op = string.sub(change, 1, 1)
  if op ~= '' then
    local e = t + tonumber(string.sub(change, 2))
    if op == 'l' then
      local keep = e
      if blockedUntil > keep then keep = blockedUntil end
      if liftKept > keep then keep = liftKept end
      blockedUntil = -math.huge
      if keep > t then liftedAt = t; liftKept = keep end
    elseif op == 'b' then
      if e > blockedUntil then blockedUntil = e end
    elseif not (blockedUntil > t) then
      blockedUntil = e
    end
  end
  local blockedMs = 0
  if blockedUntil > t then blockedMs = blockedUntil - t end
  local liftedAgo = math.huge
  if liftedAt ~= -math.huge then liftedAgo = pos(t - liftedAt) end
  if blockedMs > 0 then want = 0; need = 0 end
  local kept = {}
  for _, c in ipairs(live) do
    if c.untilMs < t then drop[#drop + 1] = c.id else kept[#kept + 1] = c end
  end
  live = kept
  local tokens0 = tokens
  local refilled = tokens + ((t - anchor) * rate) / 1000
  if refilled < capacity then tokens = refilled else tokens = capacity end
  local above = pos(tokens) - pos(tokens0)
  local full = tokens >= capacity
  if not full and above > 0 and #live > 0 and rate > 0 then
    local demands = {}
    for j, c in ipairs(live) do demands[j] = c.demand end
    local shares = fairShares(demands)
    for j, c in ipairs(live) do
      local e = c.entitled + (above * shares[j]) / rate
      if e < c.most then c.entitled = e else c.entitled = c.most end
    end
  end
  local back = 0
  if give > 0 and tokens < capacity then
    back = math.min(give, capacity - tokens)
    tokens = tokens + back
  end
  if charge > 0 then tokens = tokens - charge end
  local reserved = 0
  for _, c in ipairs(live) do reserved = reserved + c.entitled end
  local holds = pos(tokens)
  if reserved > holds then
    local scale = holds / reserved
    for _, c in ipairs(live) do c.entitled = c.entitled * scale end
    reserved = holds
  end
  local granted = 0
  local waitMs = 0
  if want > 0 then
    local mine = nil
    local mineAt = 0
    for j, c in ipairs(live) do if c.id == me then mine = c; mineAt = j end end
    local own = 0
    if mine then own = mine.entitled end
    local available = own + pos(holds - reserved)
    if full then available = holds end
    if fits(need, available) then
      granted = math.min(want, available)
      if granted < 0 then granted = 0 end
      tokens = tokens - granted
      if mine then
        if own > granted then mine.entitled = own - granted else mine.entitled = 0 end
      end
      local left = pos(tokens)
      local kept = 0
      for _, c in ipairs(live) do kept = kept + c.entitled end
      if kept > left then
        local scale = left / kept
        for _, c in ipairs(live) do c.entitled = c.entitled * scale end
      end
    end
    if granted < want and rate > 0 then
      if not mine then
        mine = { id = me, demand = 0, entitled = 0, most = 0, untilMs = 0 }
        live[#live + 1] = mine
      end
      mine.demand = demand
      local most = need
      if want > need then most = want end
      if most > mine.most then mine.most = most end
    elseif mine then
      table.remove(live, mineAt)
      drop[#drop + 1] = me
      mine = nil
    end
    local left = available - granted
    if not fits(need, left) then
      local kept = 0
      if mine then kept = mine.entitled end
      if pos(left) < kept then kept = pos(left) end
      local short = need - kept
      if not (rate > 0) then
        waitMs = math.huge
      else
        local debtMs = 0
        if tokens < 0 then debtMs = (-tokens * 1000) / rate end
        local demands = { demand }
        for _, c in ipairs(live) do
          if c.id ~= me then demands[#demands + 1] = c.demand end
        end
        local shares = fairShares(demands)
        local claimed = 0
        for _, s in ipairs(shares) do claimed = claimed + s end
        local perSecond = shares[1] + (rate - claimed)
        if perSecond > 0 then waitMs = debtMs + (short * 1000) / perSecond else waitMs = math.huge end
        if need <= capacity then
          local fullMs = ((capacity - tokens) * 1000) / rate
          if fullMs < waitMs then waitMs = fullMs end
        end
      end
    end
    if mine then
      local wait = waitMs
      if wait > ${MAX_CONTENDER_WAIT_MS} then wait = ${MAX_CONTENDER_WAIT_MS} end
      mine.untilMs = t + staleMs + 2 * wait
    end
  end
  local dirty = back > 0 or charge > 0 or want > 0 or #drop > 0 or op ~= '' or keepCall
  if hadBlock and blockedUntil == -math.huge then drop[#drop + 1] = 'block' end
  if hadLift and liftedAt == -math.huge then drop[#drop + 1] = 'lift' end
  -- A block and a lift's mark keep the key at least until they end.
  local holdMs = 0
  if blockedMs > 0 then holdMs = blockedMs end
  if liftKept > t and liftKept - t > holdMs then holdMs = liftKept - t end
  -- So do the call records, until the last call they keep could run again.
  if recordsUntil then
    local ms = math.ceil(recordsUntil - now) + 1
    if ms > holdMs then holdMs = ms end
  end
  if charge > 0 then charged = charged + charge end
  taken = taken + granted
  given = given + back
  local answer = { f(granted), f(waitMs), f(tokens), f(back), f(blockedMs), f(liftedAgo) }
  if not dirty then
    -- A probe (nothing given, charged or wanted): nothing to write.
  elseif tokens >= capacity and #live == 0 and holdMs == 0 then
    -- A full bucket without contenders: no state (the record, if kept, stays).
    if record then
      local fields = { 'tokens', 'anchor' }
      for _, id in ipairs(drop) do fields[#fields + 1] = id end
      redis.call('HDEL', key, unpack(fields))
      redis.call('HSET', key, 'taken', f(taken), 'given', f(given), 'charged', f(charged))
      redis.call('PEXPIRE', key, string.format('%d', maxTtl))
    elseif #h > 0 then
      redis.call('DEL', key)
    end
  else
    local fields = { 'tokens', f(tokens), 'anchor', f(t) }
    for _, c in ipairs(live) do
      fields[#fields + 1] = c.id
      fields[#fields + 1] = f(c.demand) .. ' ' .. f(c.entitled) .. ' ' .. f(c.most) .. ' ' .. f(c.untilMs)
    end
    if blockedMs > 0 then
      fields[#fields + 1] = 'block'
      fields[#fields + 1] = f(blockedUntil)
    end
    if liftedAt ~= -math.huge then
      fields[#fields + 1] = 'lift'
      fields[#fields + 1] = f(liftedAt) .. ' ' .. f(liftKept)
    end
    if keepCall then
      fields[#fields + 1] = mark
      fields[#fields + 1] = ARGV[7] .. ' ' .. f(keepUntil) .. ' ' .. table.concat(answer, ' ')
    end
    if record then
      for _, v in ipairs({ 'taken', f(taken), 'given', f(given), 'charged', f(charged) }) do fields[#fields + 1] = v end
    end
    if #drop > 0 then redis.call('HDEL', key, unpack(drop)) end
    redis.call('HSET', key, unpack(fields))
    local fullMs = math.huge
    if record then
      fullMs = maxTtl
    elseif tokens >= capacity then
      -- Full already (kept for a block, a lift's mark or call records): nothing to wait for.
      fullMs = 0
    elseif rate > 0 then
      fullMs = cleanMs(((capacity - tokens) * 1000) / rate)
    end
    local liveMs = fullMs
    if liveMs > maxTtl then liveMs = maxTtl end
    if holdMs > 0 and not (liveMs > holdMs) then
      -- The block or the lift's mark outlives the rest (a full bucket's expiry would be now).
      redis.call('PEXPIRE', key, string.format('%d', math.ceil(holdMs)))
    elseif record then
      redis.call('PEXPIRE', key, string.format('%d', maxTtl))
    else
      expire(key, fullMs, t + fullMs, false, maxTtl)
    end
  end
  for _, v in ipairs(answer) do out[#out + 1] = v end
  end
end
out[#out + 1] = f(now)
return out
`,
);

/**
 * The heartbeat of `LeasedTokenBucket`: one sorted set per limiter keyspace holds each live
 * process's id, scored by the server-clock ms at which its heartbeat lapses. The script drops
 * lapsed members, adds or refreshes `id` (or removes it when `leave` is 1) and answers
 * `{live processes, serverNowMs, joined}` (joined: 1 when `id` was not live before); the set
 * expires when its last member lapses. KEYS: the set. ARGV: id, ttlMs, leave, the call's sequence
 * number.
 *
 * A heartbeat that made its process live leaves a mark, `j:<id>:<sequence>` scored minus the time
 * it lapses with the membership (negative scores are marks, never counted), so that the same call
 * run twice (a client that resends what a lost connection left unanswered) answers joined again. It
 * takes no tokens, so it carries no deadline.
 */
export const HEARTBEAT_SCRIPT = new Script(
  "lease-heartbeat",
  `${LUA_COMMON}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ttl = tonumber(ARGV[2])
local id = ARGV[1]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '0', '(' .. f(now))
local joined = 0
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], id)
else
  local mark = 'j:' .. id .. ':' .. ARGV[4]
  joined = redis.call('ZADD', KEYS[1], f(now + ttl), id)
  if joined == 1 then
    -- Marks that lapsed go first (their scores are above minus now).
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. f(-now), '(0')
    redis.call('ZADD', KEYS[1], f(-(now + ttl)), mark)
  else
    local lapses = redis.call('ZSCORE', KEYS[1], mark)
    if lapses and -tonumber(lapses) >= now then joined = 1 end
  end
end
local live = redis.call('ZCOUNT', KEYS[1], '0', '+inf')
-- The set lives until its last member lapses (a short heartbeat never cuts a longer one).
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(tonumber(last[2])))) end
return { live, f(now), joined }
`,
);
