import { Buffer } from "node:buffer";
import type { RedisKey } from "./client.js";

/** How many hash slots a Redis Cluster has: a key's slot is in `[0, 16384)`. */
export const HASH_SLOTS = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the variant Redis Cluster
// uses (cluster spec, "Keys distribution model"), one table lookup per byte.
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = crc & 0xffff;
  }
  return table;
})();

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/** CRC16 of `bytes[start, end)`, each read as a byte 0..255. */
function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc =
      ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  }
  return crc;
}

/** The same over an ASCII string's char codes (no encoding needed: one char is one byte). */
function crc16Ascii(text: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ text.charCodeAt(i)) & 0xff] as number);
  }
  return crc;
}

/**
 * The part of a key that is hashed, `[start, end)`: with a hash tag (the bytes between
 * the first `{` and the first `}` after it, if not empty) only the tag, else the whole
 * key. `{}` (an empty tag) and a `{` without `}` hash the whole key, as in Redis.
 */
function hashedRange(length: number, at: (i: number) => number): [number, number] {
  for (let open = 0; open < length; open++) {
    if (at(open) !== OPEN_BRACE) continue;
    for (let close = open + 1; close < length; close++) {
      if (at(close) === CLOSE_BRACE) return close > open + 1 ? [open + 1, close] : [0, length];
    }
    return [0, length];
  }
  return [0, length];
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/**
 * The Redis Cluster hash slot of `key`, in `[0, 16384)`: CRC16 (XMODEM) of its bytes
 * modulo 16384, hashing only the hash tag when the key has one (`user:{42}:a` and
 * `user:{42}:b` share a slot). A string is hashed as its UTF-8 bytes, as a Redis client
 * sends it; a `Buffer` as its raw bytes. Equals the server's `CLUSTER KEYSLOT key`.
 */
export function hashSlot(key: RedisKey): number {
  if (typeof key === "string" && isAscii(key)) {
    const [start, end] = hashedRange(key.length, (i) => key.charCodeAt(i));
    return crc16Ascii(key, start, end) & (HASH_SLOTS - 1);
  }
  const bytes = typeof key === "string" ? Buffer.from(key, "utf8") : key;
  const [start, end] = hashedRange(bytes.length, (i) => bytes[i] as number);
  return crc16(bytes, start, end) & (HASH_SLOTS - 1);
}
