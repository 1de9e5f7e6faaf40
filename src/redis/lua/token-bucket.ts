import { Script } from "../script.js";
import { LUA_CLEAN_MS, LUA_NUMBER, LUA_STORE, luaArgs } from "./common.js";

/**
 * The token bucket's one script, also the leaky bucket's (as a meter a leaky bucket is
 * a token bucket whose tokens are its free room, `capacity - level`) (consume and peek). One
 * string per key, `struct.pack('<dd', tokens, anchor)`: `tokens` exact at `anchor` (ms),
 * written with its expiry by one `SET`, followed by `struct.pack('<d', blockedUntilMs)` while
 * the key is blocked (see `blockScript`: a blocked key is denied, and the block costs a
 * check of the value's length). ARGV: capacity, refillPerSecond, cost, take (1/0),
 * now ('' = server TIME), maxTtlMs, deadlineMs ('' = none). Reply: `{allowed (1/0), tokens
 * available now before the cost, serverNowMs}` (or `{-1, serverNowMs}` past the deadline;
 * `{2, tokens, blockLeftMs, serverNowMs}` for a blocked key, which writes nothing);
 * the caller builds the Decision with `bucketDecision`.
 *
 * Mirrors `tokensAt`/`tokensAfter` of src/algorithms/bucket-math.ts (the overdraft
 * within the fit tolerance is kept, not clamped at 0, so it is forgiven only once). A time behind the
 * stored anchor counts as the anchor (a lagging clock adds nothing). A full bucket has
 * no key; any other state expires exactly when the bucket would be full again.
 */
export const TOKEN_BUCKET_SCRIPT = new Script(
  "token-bucket",
  `${luaArgs("capacity", "rate")}${LUA_NUMBER}
local state = redis.call('GET', key)
local tokens = capacity
local blockedUntil = nil
if state then
  local stored, anchor = struct.unpack('<dd', state)
  if now < anchor then now = anchor end
  local refilled = stored + ((now - anchor) * rate) / 1000
  if refilled < capacity then tokens = refilled end
  if #state > 16 then blockedUntil = struct.unpack('<d', state, 17) end
end

-- A free probe is allowed even in an overdraft (tokens a hair below 0, kept as in TS).
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= tokens + 1e-9 * (cost > 1 and cost or 1)
if blockedUntil and now < blockedUntil then return { 2, n(tokens), n(blockedUntil - now), serverNow } end
if allowed and take and cost > 0 then
  local left = tokens - cost
  local missing = capacity - left
  if missing > 0 then
    ${LUA_CLEAN_MS.trim().replace(/\n/g, "\n    ")}
    local fullMs = math.huge
    if rate > 0 then fullMs = cleanMs((missing * 1000) / rate) end
    ${LUA_STORE.trim().replace(/\n/g, "\n    ")}
    store(struct.pack('<dd', left, now), fullMs, now + fullMs)
  else
    redis.call('DEL', key)
  end
end
return { allowed and 1 or 0, n(tokens), serverNow }
`,
);
