import { Script } from "../script.js";
import { LUA_NUMBER, luaArgs } from "./common.js";

/**
 * The block scripts, one per state shape: a block lives in the key's own value, after the state
 * (`struct.pack('<d', blockedUntilMs)`), so every decision script sees it in the `GET` it makes
 * anyway (no extra command, the same key and so the same cluster slot). ARGV: the algorithm's two
 * options, durationMs (as the cost), keep (1: a block in place is kept as it is, the middleware's
 * `blockDurationMs`; 0: the later end wins), now ('' = server TIME), maxTtlMs, a bucket's initial
 * units (optional), deadlineMs. A key without state gets the fresh state; a ledger after the block
 * slot is kept. The key lives at least until the block ends (`PX`, the longer of its time to live
 * and the block's). Reply: `{ms the key is blocked from now, serverNowMs}` (or `{-1, serverNowMs}`
 * past the deadline).
 * @module
 */

/** The block script of a state of `size` bytes whose fresh state packs as `fresh` (Lua). */
function blockScript(name: string, size: number, fresh: string): Script {
  return new Script(
    `${name}-block`,
    `${luaArgs("first", "second")}${LUA_NUMBER}
local state = redis.call('GET', key)
local untilMs = now + cost
local body = ${fresh}
local ledger = ''
if state then
  body = string.sub(state, 1, ${size})
  if #state > ${size} then
    local had = struct.unpack('<d', state, ${size + 1})
    if had > now and (take or had > untilMs) then untilMs = had end
  end
  -- The ledger after the block slot (common.ts LEDGER_AT), kept.
  ledger = string.sub(state, ${size + 9})
end
local ms = math.ceil(untilMs - now)
local pttl = redis.call('PTTL', key)
if pttl > ms then ms = pttl end
redis.call('SET', key, body .. struct.pack('<d', untilMs) .. ledger, 'PX', ms)
return { n(untilMs - now), serverNow }
`,
  );
}

/**
 * Blocks a token or leaky bucket's key (a fresh bucket packs `tokens` as infinity: full at
 * any capacity; one with fewer initial units, those from now).
 */
export const BUCKET_BLOCK_SCRIPT = blockScript(
  "bucket",
  24,
  "(#ARGV > 7 and tonumber(ARGV[7]) < first) and struct.pack('<ddd', tonumber(ARGV[7]), now, first) or struct.pack('<ddd', math.huge, now, first)",
);
/** Blocks a fixed window's key (a fresh window ended long ago). */
export const FIXED_WINDOW_BLOCK_SCRIPT = blockScript(
  "fixed-window",
  24,
  "struct.pack('<ddd', -math.huge, 0, now)",
);
/** Blocks a sliding window counter's key (second is `windowMs`). */
export const SLIDING_WINDOW_COUNTER_BLOCK_SCRIPT = blockScript(
  "sliding-window-counter",
  40,
  "struct.pack('<ddddd', -math.huge, 0, 0, now, second)",
);
