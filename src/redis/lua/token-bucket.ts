import { Script } from "../script.js";
import { LUA_COMMON, luaArgs } from "./common.js";

/**
 * The token bucket's one script, also the leaky bucket's (as a meter a leaky bucket is
 * a token bucket whose tokens are its free room, `capacity - level`) (consume and peek). One hash per key:
 * `tokens` exact at `anchor` (ms). ARGV: capacity, refillPerSecond, cost, take (1/0),
 * now ('' = server TIME), maxTtlMs. Reply: `{allowed (1/0), tokens available now
 * before the cost}`; the caller builds the Decision with `bucketDecision`.
 *
 * Mirrors `tokensAt`/`tokensAfter` of src/algorithms/bucket-math.ts (the overdraft
 * within the fit tolerance is kept, not clamped at 0, so it is forgiven only once). A time behind the
 * stored anchor counts as the anchor (a lagging clock adds nothing). A full bucket has
 * no key; any other state expires exactly when the bucket would be full again.
 */
export const TOKEN_BUCKET_SCRIPT = new Script(
  "token-bucket",
  `${LUA_COMMON}${luaArgs("capacity", "rate")}
local state = redis.call('HMGET', key, 'tokens', 'anchor')
local tokens = capacity
if state[1] then
  local anchor = tonumber(state[2])
  if now < anchor then now = anchor end
  local refilled = tonumber(state[1]) + ((now - anchor) * rate) / 1000
  if refilled < capacity then tokens = refilled end
end

-- A free probe is allowed even in an overdraft (tokens a hair below 0, kept as in TS).
local allowed = cost == 0 or fits(cost, tokens)
if allowed and take and cost > 0 then
  local left = tokens - cost
  local missing = capacity - left
  if missing > 0 then
    redis.call('HSET', key, 'tokens', f(left), 'anchor', f(now))
    local fullMs = math.huge
    if rate > 0 then fullMs = cleanMs((missing * 1000) / rate) end
    expire(key, fullMs, now + fullMs, explicit, maxTtl)
  else
    redis.call('DEL', key)
  end
end
return { allowed and 1 or 0, f(tokens) }
`,
);
