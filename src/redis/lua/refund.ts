import { Script } from "../script.js";
import { LEDGER_AT, LUA_COUNTER_RETUNE, LUA_NUMBER, LUA_WINDOW_INDEX, luaArgs } from "./common.js";
import { luaBucketRead } from "./token-bucket.js";

/**
 * The refund scripts, one per state shape: give back `cost` units taken earlier, by the
 * in-memory rule of the algorithm (docs/semantics.md#refunds), atomically, never past the
 * fresh state. Without a receipt (`ARGV[4]` not starting with `r`) by the rule without one;
 * through a receipt (`ARGV[4]` = `r` and the receipt's mark: a bucket's full time, a fixed
 * window's end, a counter's window index) by the receipt's rule, nothing once its units no
 * longer count. A key without state is left as it is (a refund never creates state). The
 * value keeps its block, if any, and its expiry (`KEEPTTL`: a refund only makes the state
 * fresher, so the key's time to live is never too short). ARGV: as a decision's (`take`
 * replaced by the mark), the deadline included: past it the script writes nothing. KEYS:
 * the key, then (optional) the call's record ({@link LUA_REFUND_RECORD}). Reply: `{units
 * given back, serverNowMs}` (or `{-1, serverNowMs}` past the deadline).
 * @module
 */

/**
 * After a refund script's head: a second run of the same refund call is answered as the
 * first, not given back again. ioredis sends a call whose reply a lost connection did not
 * bring again on its next connection, and a cluster client retries after a node's
 * connection closed, so a refund can run twice within its deadline. `KEYS[2]`, when sent,
 * names the call (a random id, in the key's slot: {@link refundRecordKey}); the first run
 * keeps its answer there until the deadline (`n`/`s` and the number or text), a second run
 * answers it. Every answer of the body goes through `answer(given)` ({@link recorded}).
 */
export const LUA_REFUND_RECORD = `
local record = KEYS[2]
if record then
  local seen = redis.call('GET', record)
  if seen then
    if string.sub(seen, 1, 1) == 'n' then return { tonumber(string.sub(seen, 2)), serverNow } end
    return { string.sub(seen, 2), serverNow }
  end
end
local function answer(given)
  if record and deadline ~= '' then
    local kept
    if type(given) == 'number' then kept = 'n' .. string.format('%.17g', given) else kept = 's' .. given end
    redis.call('SET', record, kept, 'PX', string.format('%d', math.ceil(deadline - serverNow) + 1))
  end
  return { given, serverNow }
end
`;

/** A refund script's body with every `return { x, serverNow }` as `return answer(x)`. */
export function recorded(body: string): string {
  return body.replace(/return \{ (.+?), serverNow \}/g, "return answer($1)");
}

/**
 * `receipt`: a refund through a receipt (`ARGV[4]` = `r<mark>[,<id>[,<credited>]]`);
 * `mark`: its mark, `nil` for a refund without one; `rid` and `rcredited`: the ledger the charge saw (common.ts
 * `LEDGER_AT`), `nil` and 0 when not sent.
 */
const LUA_MARK = `
local mark, rid, rcredited = nil, nil, 0
local receipt = string.sub(ARGV[4], 1, 1) == 'r'
if receipt then
  local m, i, c = string.match(ARGV[4], '^r([^,]*),?([^,]*),?([^,]*)$')
  mark, rid, rcredited = tonumber(m), tonumber(i), tonumber(c) or 0
end
`;

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
 * infinity tokens under a block or beside a ledger). Through a receipt, only while its key
 * holds the ledger the charge saw (the same id), at most `rate * (fullAt - now) / 1000 -
 * (credited - credited at the charge)` (the refill not yet repaid of the charge, less what
 * refunds of the key gave back since: they repaid the oldest units first), all of it at a
 * rate of 0, as `BucketBase.refundAt`. Every refund adds what it gave back to the
 * ledger's `credited`.
 */
function bucketRefund(name: string, leaky: boolean): Script {
  return new Script(
    `${name}-refund`,
    `${luaArgs("capacity", "rate")}${LUA_REFUND_RECORD}${recorded(`${LUA_NUMBER}${LUA_MARK}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 then return { 0, serverNow } end
local tokens = capacity
${luaBucketRead(leaky).trim()}
local id, credited = nil, 0
if #state >= ${LEDGER_AT} then id, credited = struct.unpack('<dd', state, ${LEDGER_AT}) end
if receipt then
  if id == nil or id ~= rid then return { 0, serverNow } end
  if rate > 0 then
    local bound = ((mark - now) * rate) / 1000 - (credited - rcredited)
    if bound < cost then cost = bound end
    if not (cost > 0) then return { 0, serverNow } end
  end
end
local given = cost
if tokens + cost >= capacity then
  if tokens < capacity then given = capacity - tokens else given = 0 end
  if given > cost then given = cost end
end
local tail = string.sub(state, 25)
if id then tail = string.sub(state, 25, ${LEDGER_AT - 1}) .. struct.pack('<dd', id, credited + given) end
if tokens + cost >= capacity then
  put(struct.pack('<ddd', math.huge, now, capacity), true, tail)
else
  put(struct.pack('<ddd', tokens + cost, now, capacity), false, tail)
end
return { n(given), serverNow }
`)}`,
  );
}

/** The token bucket's refund script. */
export const TOKEN_BUCKET_REFUND_SCRIPT = bucketRefund("token-bucket", false);
/** The leaky bucket's refund script (its free room is its tokens). */
export const LEAKY_BUCKET_REFUND_SCRIPT = bucketRefund("leaky-bucket", true);

/**
 * A fixed window's refund through a receipt: while the window it charged (its end is the mark) is
 * the current one and the key holds the ledger the charge saw (the same id: not reset since), the
 * count becomes `max(0, count - cost)`; else nothing. Without a receipt nothing is given back
 * (`RedisFixedWindow.refund` refuses before sending it). A count given back to 0 beside a ledger
 * stays as an ended window with its ledger, so that a later charge of the same window keeps the id.
 */
export const FIXED_WINDOW_REFUND_SCRIPT = new Script(
  "fixed-window-refund",
  `${luaArgs("limit", "windowMs")}${LUA_REFUND_RECORD}${recorded(`${LUA_NUMBER}${LUA_MARK}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 or not mark or #state < ${LEDGER_AT} then return { 0, serverNow } end
local endAt, count, at = struct.unpack('<ddd', state)
if now < at then now = at end
if endAt ~= mark or not (now < endAt) then return { 0, serverNow } end
if struct.unpack('<d', state, ${LEDGER_AT}) ~= rid then return { 0, serverNow } end
local given = cost
if count < given then given = count end
local left = count - given
local tail = string.sub(state, 25)
if left > 0 then
  put(struct.pack('<ddd', endAt, left, now), false, tail)
else
  put(struct.pack('<ddd', -math.huge, 0, now), true, tail)
end
return { n(given), serverNow }
`)}`,
);

/**
 * A sliding window counter's refund: from the current window's count first, then from the
 * previous window's, never below 0 (`counterRefundCurr`, `counterRefundPrev`), after rolling
 * to now's window (and to the new length, after a `reconfigure`). Through a receipt (its
 * window's index is the mark): from that window's count, while it is the current or the
 * previous one and the key holds the ledger the charge saw (not reset since).
 */
export const SLIDING_WINDOW_COUNTER_REFUND_SCRIPT = new Script(
  "sliding-window-counter-refund",
  `${luaArgs("limit", "windowMs")}${LUA_REFUND_RECORD}${recorded(`${LUA_NUMBER}${LUA_MARK}${LUA_WINDOW_INDEX}${LUA_PUT}
local state = redis.call('GET', key)
if not state or cost == 0 then return { 0, serverNow } end
local index, prev, curr, at, w = struct.unpack('<ddddd', state)
if now < at then now = at end
if receipt then
  if #state < ${LEDGER_AT + 16} or struct.unpack('<d', state, ${LEDGER_AT + 16}) ~= rid then
    return { 0, serverNow }
  end
end
if w ~= windowMs then
  if receipt then return { 0, serverNow } end
  ${LUA_COUNTER_RETUNE.trim().replace(/\n/g, "\n  ")}
end
local k = windowIndex(now, windowMs)
if k ~= index then
  if k == index + 1 then prev = curr else prev = 0 end
  curr = 0
  index = k
end
local given = 0
if receipt then
  if mark == index then
    given = cost
    if curr < given then given = curr end
    curr = curr - given
  elseif mark + 1 == index then
    given = cost
    if prev < given then given = prev end
    prev = prev - given
  end
else
  local before = prev + curr
  if curr < cost then
    prev = prev - (cost - curr)
    if prev < 0 then prev = 0 end
    curr = 0
  else
    curr = curr - cost
  end
  given = before - (prev + curr)
end
local tail = string.sub(state, 41)
put(struct.pack('<ddddd', index, prev, curr, now, windowMs), prev == 0 and curr == 0, tail)
return { n(given), serverNow }
`)}`,
);
