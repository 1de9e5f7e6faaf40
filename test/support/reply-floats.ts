/**
 * The reply encoding of src/redis/lua/common.ts's `luaFloats`, in TypeScript, for tests that
 * answer as a script would: `x` as the two integers `replyFloat` reads back.
 */
export function floatItems(x: number): [number, number] {
  if (x === 0) return [1100, 0];
  let e = Math.ceil(Math.log2(Math.abs(x)));
  // frexp: x = m * 2^e with 0.5 <= |m| < 1 (log2 can be off by one near powers of two)
  while (Math.abs(x) / 2 ** e >= 1) e++;
  while (Math.abs(x) / 2 ** e < 0.5) e--;
  const q = (x / 2 ** e) * 2 ** 53;
  const hi = Math.floor(q / 2 ** 26);
  return [hi * 4096 + (e + 1100), q - hi * 2 ** 26];
}

/** A decision script's reply: `head`, then each float as {@link floatItems}, then the server's now. */
export function scriptReply(
  head: readonly number[],
  floats: readonly number[],
  serverNowMs = Date.now(),
): number[] {
  return [...head, ...floats.flatMap(floatItems), serverNowMs];
}

/**
 * A bucket script's decision before the server's now (which `FakeRedis` appends): allowed
 * (1, 0; 2 blocked), tokens, and now (or, blocked, the block's ms left).
 */
export function bucketReply(allowed: number, tokens: number, nowOrLeftMs = 0): number[] {
  return [allowed, ...floatItems(tokens), ...floatItems(nowOrLeftMs)];
}
