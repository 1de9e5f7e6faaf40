/**
 * Lua shared by every decision script, prepended to each (so each script stays one
 * self-contained source with its own SHA1). Every script gets
 * `ARGV = [...config, cost, take, now, maxTtlMs]`; the helpers mirror
 * `src/numeric.ts` and `src/algorithms/time.ts` operation for operation, so Lua and
 * TypeScript decide bit for bit alike (Lua numbers are IEEE doubles, as JavaScript's).
 *
 * Floats go back to JavaScript as `%.17g` strings (Redis truncates Lua numbers in
 * replies to integers); `%.17g` round-trips every double; infinity prints as `inf`.
 * @module
 */
export const LUA_COMMON = `
local function f(x) return string.format('%.17g', x) end

-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local function fits(cost, available)
  return cost <= available + 1e-9 * (cost > 1 and cost or 1)
end

-- The explicit time (tests, replays) or the server's clock in ms (epoch, microsecond resolution).
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- numeric.ts cleanMs(): snap to the nearest integer within a relative 1e-9; never negative.
local function cleanMs(ms)
  if not (ms > 0) then return 0 end
  local rounded = math.floor(ms + 0.5)
  local scale = ms > 1 and ms or 1
  if math.abs(ms - rounded) <= 1e-9 * scale and rounded > 0 then return rounded end
  return ms
end

-- Expires the key when its state becomes fresh, freshMs ms from now, at time freshAt:
-- on the server's clock at the first whole ms at or after freshAt (PEXPIREAT, so later
-- traffic that keeps the same end, as in a fixed window, never moves it), capped at
-- maxTtl ms from now. With an explicit time the server cannot know when that time
-- reaches freshAt, so the key lives maxTtl ms (an idle state decides as no state, so
-- keeping it longer changes nothing).
local function expire(key, freshMs, freshAt, explicit, maxTtl)
  if explicit or math.ceil(freshMs) >= maxTtl then
    redis.call('PEXPIRE', key, string.format('%d', maxTtl))
  else
    redis.call('PEXPIREAT', key, string.format('%d', math.ceil(freshAt)))
  end
end

-- time.ts windowIndex(): floor(t / w), corrected so that k * w <= t < (k + 1) * w.
local function windowIndex(t, w)
  local k = math.floor(t / w)
  if k * w > t then return k - 1 end
  if (k + 1) * w <= t then return k + 1 end
  return k
end
`;

/**
 * The head of every decision script, after {@link LUA_COMMON}: reads `KEYS[1]` and
 * `ARGV = [first, second, cost, take, now, maxTtlMs]` into the locals `key`, `first`,
 * `second` (the algorithm's two options, under the names given), `cost`, `take`,
 * `explicit` (an explicit time was sent), `now` and `maxTtl`.
 */
export function luaArgs(first: string, second: string): string {
  return `
local key = KEYS[1]
local ${first} = tonumber(ARGV[1])
local ${second} = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local take = ARGV[4] == '1'
local explicit = ARGV[5] ~= ''
local now = clock(ARGV[5])
local maxTtl = tonumber(ARGV[6])
`;
}
