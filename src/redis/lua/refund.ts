import { Script } from "../script.js";
import { LUA_COUNTER_RETUNE, LUA_WINDOW_INDEX, luaArgs } from "./common.js";
import { luaBucketRead } from "./token-bucket.js";

/**
 * The refund scripts, one per state shape: give back `cost` units taken earlier, by the
 * in-memory rule of the algorithm (docs/semantics.md#refunds), atomically, never past the
 * fresh state. A key without state is left as it is (a refund never creates state). The
 * value keeps its block, if any, and its expiry (`KEEPTTL`: a refund only makes the state
 * fresher, so the key's time to live is never too short). ARGV: as a decision's (`take` is
 * ignored), the deadline included: past it the script writes nothing. Reply: `{1 when
 * something was given back else 0, serverNowMs}` (or `{-1, serverNowMs}` past the deadline).
 * @module
 */

/** Writes `body` (the state) back with the block tail `tail`; a fresh body without a block deletes the key. */
const LUA_PUT = `
local function put(body, freshNow, tail)
  if freshNow and tail == '' then
    redis.call('DEL', key)
  else
    redis.call('SET', key, body .. tail, 'KEEPTTL')
  end
end
`;

/**
 * A token (`leaky` false) or leaky bucket's refund: `tokens = min(capacity, tokens + cost)`
 * at now, as `BucketBase.refundUnits` (a bucket full again is the fresh state: no key, or
 * infinity tokens under a block).
 */
function bucketRefund(name: string, leaky: boolean): Script {
  return new Script(
    `${name}-refund`,
    `${luaArgs("capacity", "rate")}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 then return { 0, serverNow } end
local tokens = capacity
${luaBucketRead(leaky).trim()}
local tail = string.sub(state, 25)
if tokens + cost >= capacity then
  put(struct.pack('<ddd', math.huge, now, capacity), true, tail)
else
  put(struct.pack('<ddd', tokens + cost, now, capacity), false, tail)
end
return { 1, serverNow }
`,
  );
}

/** The token bucket's refund script. */
export const TOKEN_BUCKET_REFUND_SCRIPT = bucketRefund("token-bucket", false);
/** The leaky bucket's refund script (its free room is its tokens). */
export const LEAKY_BUCKET_REFUND_SCRIPT = bucketRefund("leaky-bucket", true);

/** A fixed window's refund: the current window's count becomes `max(0, count - cost)`. */
export const FIXED_WINDOW_REFUND_SCRIPT = new Script(
  "fixed-window-refund",
  `${luaArgs("limit", "windowMs")}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 then return { 0, serverNow } end
local endAt, count, at = struct.unpack('<ddd', state)
if now < at then now = at end
local used = 0
if now < endAt then used = count end
local left = used - cost
local tail = string.sub(state, 25)
if left > 0 then
  put(struct.pack('<ddd', endAt, left, now), false, tail)
else
  put(struct.pack('<ddd', -math.huge, 0, now), true, tail)
end
return { 1, serverNow }
`,
);

/**
 * A sliding window counter's refund: from the current window's count first, then from the
 * previous window's, never below 0 (`counterRefundCurr`, `counterRefundPrev`), after rolling
 * to now's window (and to the new length, after a `reconfigure`).
 */
export const SLIDING_WINDOW_COUNTER_REFUND_SCRIPT = new Script(
  "sliding-window-counter-refund",
  `${luaArgs("limit", "windowMs")}${LUA_WINDOW_INDEX}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 then return { 0, serverNow } end
local index, prev, curr, at, w = struct.unpack('<ddddd', state)
if now < at then now = at end
if w ~= windowMs then
  ${LUA_COUNTER_RETUNE.trim().replace(/\n/g, "\n  ")}
end
local k = windowIndex(now, windowMs)
if k ~= index then
  if k == index + 1 then prev = curr else prev = 0 end
  curr = 0
  index = k
end
if curr < cost then
  prev = prev - (cost - curr)
  if prev < 0 then prev = 0 end
  curr = 0
else
  curr = curr - cost
end
local tail = string.sub(state, 41)
put(struct.pack('<ddddd', index, prev, curr, now, windowMs), prev == 0 and curr == 0, tail)
return { 1, serverNow }
`,
);
