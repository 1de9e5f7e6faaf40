import { Script } from "../script.js";
import { LUA_COMMON } from "./common.js";

/**
 * The lease exchange of `LeasedTokenBucket`, batched over keys (of one hash slot in a
 * cluster). Per key, on the server's clock: give back `give` (never above `capacity`: the
 * excess is dropped), then take up to `want` when `need` fits, else nothing and the time
 * until `need` is there. State as in the token bucket script (src/redis/lua/token-bucket.ts).
 * With `record`, the hash also keeps running totals `taken` and `given` that no decision
 * reads (the independent record tests check), and the key lives `maxTtlMs` after a write.
 *
 * KEYS: bucket keys. ARGV: capacity, refillPerSecond, maxTtlMs, record (1/0), then per key
 * give, want, need, and last the deadline (server ms, '' = none). Past it: no write,
 * `{-1, serverNowMs}`. Else per key granted, waitMs, tokens left, accepted back; last the
 * server's now. Floats as `%.17g` strings.
 */
export const LEASE_SCRIPT = new Script(
  "lease",
  `${LUA_COMMON}
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local maxTtl = tonumber(ARGV[3])
local record = ARGV[4] == '1'
local deadline = ARGV[#ARGV]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
if deadline ~= '' and now > tonumber(deadline) then return { -1, f(now) } end
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local base = 4 + (i - 1) * 3
  local give = tonumber(ARGV[base + 1])
  local want = tonumber(ARGV[base + 2])
  local need = tonumber(ARGV[base + 3])
  local state = redis.call('HMGET', key, 'tokens', 'anchor')
  local tokens = capacity
  local t = now
  if state[1] then
    local anchor = tonumber(state[2])
    if t < anchor then t = anchor end
    local refilled = tonumber(state[1]) + ((t - anchor) * rate) / 1000
    if refilled < capacity then tokens = refilled end
  end
  local back = 0
  if give > 0 and tokens < capacity then
    back = math.min(give, capacity - tokens)
    tokens = tokens + back
  end
  local granted = 0
  local waitMs = 0
  if want > 0 then
    if fits(need, tokens) then
      granted = math.min(want, tokens)
      if granted < 0 then granted = 0 end
      tokens = tokens - granted
    elseif rate > 0 then
      waitMs = cleanMs(((need - tokens) * 1000) / rate)
    else
      waitMs = math.huge
    end
  end
  if back > 0 or granted > 0 then
    local missing = capacity - tokens
    if missing > 0 then
      redis.call('HSET', key, 'tokens', f(tokens), 'anchor', f(t))
    elseif record then
      redis.call('HDEL', key, 'tokens', 'anchor')
    else
      redis.call('DEL', key)
    end
    if record then
      if granted > 0 then redis.call('HSET', key, 'taken', f(tonumber(redis.call('HGET', key, 'taken') or '0') + granted)) end
      if back > 0 then redis.call('HSET', key, 'given', f(tonumber(redis.call('HGET', key, 'given') or '0') + back)) end
      redis.call('PEXPIRE', key, string.format('%d', maxTtl))
    elseif missing > 0 then
      local fullMs = math.huge
      if rate > 0 then fullMs = cleanMs((missing * 1000) / rate) end
      expire(key, fullMs, t + fullMs, false, maxTtl)
    end
  end
  out[#out + 1] = f(granted)
  out[#out + 1] = f(waitMs)
  out[#out + 1] = f(tokens)
  out[#out + 1] = f(back)
end
out[#out + 1] = f(now)
return out
`,
);

/**
 * The heartbeat of `LeasedTokenBucket`: one sorted set per limiter keyspace holds each
 * live process's id, scored by the server-clock ms at which its heartbeat lapses. The
 * script drops lapsed members, adds or refreshes `id` (or removes it when `leave` is 1)
 * and answers `{live processes, serverNowMs}`; the set expires when its last member lapses. KEYS: the set. ARGV: id, ttlMs, leave.
 * It takes no tokens, so it carries no deadline.
 */
export const HEARTBEAT_SCRIPT = new Script(
  "lease-heartbeat",
  `${LUA_COMMON}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. f(now))
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], f(now + ttl), ARGV[1])
end
local live = redis.call('ZCARD', KEYS[1])
-- The set lives until its last member lapses (a short heartbeat never cuts a longer one).
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.ceil(tonumber(last[2])))) end
return { live, f(now) }
`,
);
