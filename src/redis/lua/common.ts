import { DEFAULT_MAX_TTL_MS } from "../options.js";

/**
 * Lua shared by the decision scripts, as fragments: each script takes only the helpers it
 * calls (see the costs below). Every script gets `ARGV = [...config, cost, take, now,
 * maxTtlMs, ...extra, deadlineMs]` (`extra`: a bucket's initial units, see `RedisLimiter`);
 * the helpers mirror `src/core/numeric.ts` and `src/algorithms/time.ts` operation for
 * operation, so Lua and TypeScript decide bit for bit alike (Lua numbers are IEEE doubles).
 *
 * Replies: the refund and block scripts and the sliding log send an integral number as a
 * Redis integer (exact below 2^53) and any other float as a `%.17g` string (Redis truncates
 * Lua numbers in replies to integers), which round-trips every double; infinity prints as
 * `inf`. The hot decision scripts send each float as two integers instead ({@link luaFloats}).
 * Every reply ends with the server's now in whole ms (`TIME`, truncated), for the caller's
 * offset to the server's clock (src/redis/server-clock.ts).
 *
 * What a call costs on the server (profiled under callgrind, instructions per EVALSHA,
 * Redis 7.0): a `local function` statement builds a closure on every call (about 1,300
 * each, with the garbage it leaves), `tonumber(s)` about 1,700 (a function call and
 * glibc's `strtod`; the arithmetic coercion `s + 0` parses with the same `strtod`, without
 * the call), a number handed to `redis.call` is printed by Redis with `%.17g` (about 2,400
 * more than a string made with `string.format('%d')`), and a `SET` that sets an expiry
 * costs about 10,000 more than one that keeps it (`KEEPTTL`). So the hot scripts are
 * inline code, with no `local function`.
 * @module
 */

/**
 * With an explicit clock, the shortest time to live a write sets, in ms of the server's
 * clock: a key expires when it is fresh on the caller's terms, counted from the write as if
 * the caller's clock ran at the server's rate, but never sooner than this. A clock that runs
 * slower than real time (a frozen manual clock in a test) would otherwise see its state
 * vanish while it is still in use; a test or replay runs for far less than a minute per key.
 */
export const EXPLICIT_CLOCK_MIN_TTL_MS = 60_000;

/** `n(x)`: a reply number, an integer when `x` is integral, else `%.17g`. */
export const LUA_NUMBER = `
local function n(x)
  if x % 1 == 0 and x > -9007199254740992 and x < 9007199254740992 then return x end
  return string.format('%.17g', x)
end
`;

/** `f(x)`: a float as `%.17g` (for a script that stores floats as text). */
export const LUA_FORMAT = `
local function f(x) return string.format('%.17g', x) end
`;

/** `fits(cost, available)`: numeric.ts fits(). */
export const LUA_FITS = `
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local function fits(cost, available)
  return cost <= available + 1e-9 * (cost > 1 and cost or 1)
end
`;

/** `cleanMs(ms)`: numeric.ts cleanMs(). */
export const LUA_CLEAN_MS = `
-- numeric.ts cleanMs(): snap to the nearest integer within a relative 1e-9; never negative.
local function cleanMs(ms)
  if not (ms > 0) then return 0 end
  local rounded = math.floor(ms + 0.5)
  local scale = ms > 1 and ms or 1
  if math.abs(ms - rounded) <= 1e-9 * scale and rounded > 0 then return rounded end
  return ms
end
`;

/** `windowIndex(t, w)`: time.ts windowIndex(). */
export const LUA_WINDOW_INDEX = `
-- time.ts windowIndex(): floor(t / w), corrected so that k * w <= t < (k + 1) * w.
local function windowIndex(t, w)
  local k = math.floor(t / w)
  if k * w > t then return k - 1 end
  if (k + 1) * w <= t then return k + 1 end
  return k
end
`;

/**
 * Inline Lua setting the local `target` (declared by the caller) to time.ts windowIndex(t, w):
 * {@link LUA_WINDOW_INDEX} without the closure.
 */
export function luaWindowIndex(target: string, t: string, w: string): string {
  return `${target} = math.floor(${t} / ${w})
if ${target} * ${w} > ${t} then ${target} = ${target} - 1 elseif (${target} + 1) * ${w} <= ${t} then ${target} = ${target} + 1 end`;
}

/**
 * Inline Lua setting the local `target` (declared by the caller) to numeric.ts
 * cleanMs(`ms`), `ms` a local: {@link LUA_CLEAN_MS} without the closure.
 */
export function luaCleanMs(target: string, ms: string): string {
  return `if not (${ms} > 0) then ${target} = 0 else
  ${target} = ${ms}
  local rounded = math.floor(${ms} + 0.5)
  if math.abs(${ms} - rounded) <= 1e-9 * (${ms} > 1 and ${ms} or 1) and rounded > 0 then ${target} = rounded end
end`;
}

/**
 * `ttl(freshMs, maxTtl)`: the time to live of a write under an explicit clock: freshMs rounded up,
 * at least {@link EXPLICIT_CLOCK_MIN_TTL_MS}, at most maxTtl.
 */
const LUA_EXPLICIT_TTL = `
local function ttl(freshMs, maxTtl)
  local ms = math.ceil(freshMs)
  if ms < ${EXPLICIT_CLOCK_MIN_TTL_MS} then ms = ${EXPLICIT_CLOCK_MIN_TTL_MS} end
  if ms > maxTtl then ms = maxTtl end
  return ms
end
`;

/**
 * Inline Lua that writes the key's one string value and its expiry in one command (inline, so
 * no closure is built per call; it declares the locals `fresh` and `storeMs`, so wrap it in a
 * block where those names are taken). The state becomes fresh freshMs ms from now, at time freshAt. On the server's
 * clock the key expires at the first whole ms at or after freshAt (PXAT, so later traffic
 * that keeps the same end, as in a fixed window, never moves it), capped at maxTtl ms from
 * now. With an explicit time the server cannot know when that time reaches freshAt: the key
 * lives freshMs of the server's time (at least EXPLICIT_CLOCK_MIN_TTL_MS, at most maxTtl),
 * right for a clock that runs at least as fast as the server's (a production clock, a
 * replay); an idle state decides as no state, so keeping it longer changes nothing.
 * `keep` (a Lua expression) says the key's expiry is already the first whole ms at or after
 * freshAt (a write in the same window as the last one): then `SET ... KEEPTTL`, which spares
 * Redis the expiry's update. Numbers reach `redis.call` as strings made with `%d`.
 */
export function luaStore(value: string, freshMs: string, freshAt: string, keep = "false"): string {
  return `local fresh, storeMs = ${freshMs}, nil
if explicit then
  storeMs = math.ceil(fresh)
  if storeMs < ${EXPLICIT_CLOCK_MIN_TTL_MS} then storeMs = ${EXPLICIT_CLOCK_MIN_TTL_MS} end
  if storeMs > maxTtl then storeMs = maxTtl end
elseif math.ceil(fresh) >= maxTtl then
  storeMs = maxTtl
end
if storeMs then
  redis.call('SET', key, ${value}, 'PX', string.format('%d', storeMs))
elseif ${keep} then
  redis.call('SET', key, ${value}, 'KEEPTTL')
else
  redis.call('SET', key, ${value}, 'PXAT', string.format('%d', math.ceil(${freshAt})))
end`;
}

/**
 * Inline Lua that replies `{head..., floats..., serverNow}`, each float as two integers `a, b`
 * below 2^40 in magnitude, which every client reads exactly (ioredis's RESP decoder rounds integers
 * near 2^53), and `replyFloat` (src/redis/reply.ts) turns back into the same double: with
 * `m, e = math.frexp(x)` and `q = m * 2^53` (an integer, `|q| < 2^53`), `q = hi * 2^26 + b`
 * (`0 <= b < 2^26`) and `a = hi * 4096 + (e + 1100)`; every step is exact in doubles. This spares
 * the server `%.17g`, which goes through glibc's multi-precision printf (several thousand
 * instructions a number). A float that is not finite would not survive Redis's conversion to an
 * integer: the script replies an error instead (a store failure, never a wrong number). `head`
 * holds integral numbers (a flag); wrapped in `do ... end`, so it may end any block.
 */
export function luaFloats(head: readonly string[], floats: readonly string[]): string {
  const lines = floats.map(
    (f, i) => `  local q${i}, e${i} = math.frexp(${f})
  q${i} = q${i} * 9007199254740992
  local h${i} = math.floor(q${i} / 67108864)`,
  );
  const check = floats.map((_, i) => `(q${i} - q${i})`).join(" + ");
  const pairs = floats.map((_, i) => `h${i} * 4096 + (e${i} + 1100), q${i} - h${i} * 67108864`);
  return `do
${lines.join("\n")}
  if ${check} ~= 0 then return redis.error_reply('tollgate: a reply number is not finite') end
  return { ${[...head, ...pairs, "serverNow"].join(", ")} }
end`;
}

/**
 * `expire(key, freshMs, freshAt, explicit, maxTtl)`: the expiry alone, for a script whose
 * value is not one string (the sliding log's list); the same times as {@link luaStore}.
 */
export const LUA_EXPIRE = `${LUA_EXPLICIT_TTL}
local function expire(key, freshMs, freshAt, explicit, maxTtl)
  if explicit then
    redis.call('PEXPIRE', key, ttl(freshMs, maxTtl))
  elseif math.ceil(freshMs) >= maxTtl then
    redis.call('PEXPIRE', key, maxTtl)
  else
    redis.call('PEXPIREAT', key, math.ceil(freshAt))
  end
end
`;

/**
 * Every helper, for a script that wants them all (the sliding log); self-contained, so it may
 * precede {@link luaArgs}. The lean scripts take the fragments instead, after the head
 * ({@link luaStore} reads the head's locals).
 */
export const LUA_COMMON = `${LUA_FORMAT}${LUA_FITS}${LUA_CLEAN_MS}${LUA_WINDOW_INDEX}${LUA_EXPIRE}`;

/**
 * The ledger, what makes a receipt exact (docs/redis.md#refunds): a charge makes sure its
 * key's value carries one, and a refund through the receipt checks it. It follows the
 * 24-byte state of a bucket or a fixed window and its block slot (`-inf` when not blocked),
 * from byte {@link LEDGER_AT}: `struct.pack('<d', id)`, then, for a bucket,
 * `struct.pack('<d', credited)`. `id` names the value's incarnation (the server's `TIME` in
 * whole microseconds when a charge began the ledger); a receipt whose id is not its key's
 * (reset, expired or emptied since) gives nothing back. `credited`: the units every refund
 * of the bucket gave back since, which a receipt subtracts from the refill it may count on.
 * A value without a ledger holds no receipt's units (the docs say why that is never more).
 */
export const LEDGER_AT = 33;

/** A new ledger's id: the server's `TIME` in whole microseconds (`t` is the head's `TIME`). */
export const LUA_LEDGER_ID = "(t[1] * 1000000 + t[2])";

/**
 * Inline Lua appending the ledger to a write's new `value` (after an empty block slot): the
 * one in `state` from byte `at`, kept, or, for a charge (`take == 'c'`), a new one; a
 * charge's ledger is read into the local `ledger` (and a bucket's, `bucket`, into
 * `credited`), both declared by the caller. `note` ends the comment line.
 */
export function luaLedger(at: number, bucket: boolean, note = ""): string {
  return `-- The ledger: kept, or begun by a charge (common.ts LEDGER_AT${note}).
if state and #state >= ${at} then
  value = value .. struct.pack('<d', -math.huge) .. string.sub(state, ${at})
  if take == 'c' then ${bucket ? "ledger, credited = struct.unpack('<dd'" : "ledger = struct.unpack('<d'"}, state, ${at}) end
elseif take == 'c' then
  ledger = ${LUA_LEDGER_ID}
  value = value .. struct.pack(${bucket ? "'<ddd', -math.huge, ledger, 0" : "'<dd', -math.huge, ledger"})
end`;
}

/** `text` trimmed, its lines after the first indented by `by`, to sit inside a block. */
export function indent(text: string, by: string): string {
  return text.trim().replace(/\n/g, `\n${by}`);
}

/**
 * The head of every decision script, first in its source: reads the server's `TIME` before anything
 * else and, past the caller's deadline (the last ARGV, server-clock ms; `''` = none), returns
 * `{-1, serverNow}` having read and written nothing, so a call its client already answered by the
 * failure policy never takes units when Redis runs it late. Then reads `KEYS[1]` and
 * `ARGV = [first, second, cost, take, now, maxTtlMs, ...extra, deadlineMs]` (`ARGV[7]` is a
 * bucket's initial units when its limiter sends them) into the locals `key`, `first`, `second` (the
 * algorithm's two options, under the names given), `cost`, `take` (`ARGV[4]`, or false for `'0'`:
 * `'1'` a consume, `'c'` a charge, whose reply also carries the state's ledger; a refund's mark, a
 * block's keep flag), `explicit` (an explicit time was sent), `now` (that time, else the server's),
 * `maxTtl` (`''`: the default) and `serverNow` (ms, microsecond resolution), which every reply ends
 * with. Numbers are read by coercion (`s + 0`), and `cost` 1 not at all.
 */
export function luaArgs(first: string, second: string): string {
  return `
local t = redis.call('TIME')
local serverNow = t[1] * 1000 + t[2] / 1000
local deadline = ARGV[#ARGV]
if deadline ~= '' and serverNow > deadline + 0 then return { -1, serverNow } end
local key = KEYS[1]
local ${first} = ARGV[1] + 0
local ${second} = ARGV[2] + 0
local cost = 1
if ARGV[3] ~= '1' then cost = ARGV[3] + 0 end
local take = ARGV[4]
if take == '0' then take = false end
local explicit = ARGV[5] ~= ''
local now = serverNow
if explicit then now = ARGV[5] + 0 end
local maxTtl = ${DEFAULT_MAX_TTL_MS}
if ARGV[6] ~= '' then maxTtl = ARGV[6] + 0 end
`;
}

/**
 * The sliding counter's state counted with window length `w`, turned into one of `windowMs` at
 * `now`, inline (it reads and sets the locals `index`, `prev`, `curr`): rolled to now's window of
 * length `w`, then, as `counterRetuned` (window-math.ts), its estimate becomes the count of now's
 * window of the new length. Runs only after a `reconfigure` changed `windowMs`.
 */
export const LUA_COUNTER_RETUNE = `
local k0 = windowIndex(now, w)
if k0 ~= index then
  if k0 == index + 1 then prev = curr else prev = 0 end
  curr = 0
  index = k0
end
local carried = curr
if prev ~= 0 then carried = prev * (((index + 1) * w - now) / w) + curr end
if carried > 0 then
  prev, curr, index = 0, carried, windowIndex(now, windowMs)
else
  prev, curr, index = 0, 0, -math.huge
end
`;
