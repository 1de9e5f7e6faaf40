import { Script } from "../script.js";
import {
  indent,
  LEDGER_AT,
  luaArgs,
  luaFloats,
  luaLedger,
  luaStore,
  luaWindowIndex,
} from "./common.js";

/**
 * The fixed window's one script (consume and peek). One string per key,
 * `struct.pack('<ddd', endAt, count, at)` (the end of `count`'s window, as `FixedWindow`
 * keeps it; the last write's time), then `struct.pack('<d', blockedUntilMs)` while blocked,
 * then, once a charge took from it, the ledger (`LEDGER_AT` in common.ts), which every write
 * keeps; written with its expiry by one `SET`. ARGV: limit, windowMs, cost, take (1/0, `c` a
 * charge), now ('' = TIME), maxTtlMs ('' = default), deadlineMs. Reply (`luaFloats` pairs):
 * `{allowed, used before the cost, the window's end, now, serverNowMs}`, a charge's with the
 * ledger's id before `serverNowMs` (`{-1, serverNowMs}` past the deadline; `{2, used,
 * endsInMs, blockLeftMs, serverNowMs}` blocked, writing nothing), for `fixedWindowDecision`.
 *
 * Mirrors `FixedWindow`'s state update. A time behind the last write counts as that write's
 * time, so a lagging clock never returns to an earlier window. The key expires at the
 * window's end (`PXAT`), set by the window's first write and kept by the others (`KEEPTTL`).
 */
export const FIXED_WINDOW_SCRIPT = new Script(
  "fixed-window",
  `${luaArgs("limit", "windowMs")}
local state = redis.call('GET', key)
local endAt, count, blockedUntil, at = -math.huge, 0, nil, nil
if state then
  endAt, count, at = struct.unpack('<ddd', state)
  if now < at then now = at end
  if #state > 24 then blockedUntil = struct.unpack('<d', state, 25) end
end
-- window-math.ts fixedWindowUsed(), fixedWindowEndAt()
local used = 0
local sameEnd = now < endAt
if sameEnd then
  used = count
else
  -- time.ts windowIndex(): floor(t / w), corrected so that k * w <= t < (k + 1) * w.
  local k
  ${indent(luaWindowIndex("k", "now", "windowMs"), "  ")}
  endAt = (k + 1) * windowMs
end
-- numeric.ts fits(): cost <= available + 1e-9 * max(1, cost)
local allowed = cost == 0 or cost <= (limit - used) + 1e-9 * (cost > 1 and cost or 1)
if blockedUntil and now < blockedUntil then
  ${indent(luaFloats(["2"], ["used", "endAt - now", "blockedUntil - now"]), "  ")}
end
local ledger = nil
if allowed and take and cost > 0 then
  local value = struct.pack('<ddd', endAt, used + cost, now)
  ${indent(luaLedger(LEDGER_AT, false), "  ")}
  -- The last write of this window set the key's expiry to its end (PXAT), unless it was
  -- capped by maxTtl: kept as it is.
  ${indent(luaStore("value", "endAt - now", "endAt", "sameEnd and math.ceil(endAt - at) < maxTtl"), "  ")}
end
if ledger then
  ${indent(luaFloats(["allowed and 1 or 0"], ["used", "endAt", "now", "ledger"]), "  ")}
end
${luaFloats(["allowed and 1 or 0"], ["used", "endAt", "now"])}
`,
);
