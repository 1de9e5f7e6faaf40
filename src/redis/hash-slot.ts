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

/** CRC16 of `bytes[start, end)`. */
function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc =
      ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  }
  return crc;
}

/** The same over an ASCII string's char codes (one char is one byte: no encoding needed). */
function crc16Ascii(text: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ text.charCodeAt(i)) & 0xff] as number);
  }
  return crc;
}

/** The slot of raw bytes: only the hash tag when there is one (see {@link hashSlot}). */
function bytesSlot(bytes: Uint8Array): number {
  const open = bytes.indexOf(0x7b); // "{"
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // "}"
    if (close > open + 1) return crc16(bytes, open + 1, close) & (HASH_SLOTS - 1);
  }
  return crc16(bytes, 0, bytes.length) & (HASH_SLOTS - 1);
}

/**
 * The Redis Cluster hash slot of `key`, in `[0, 16384)`: CRC16 (XMODEM) of its bytes modulo 16384.
 * With a hash tag (the bytes between the first `{` and the first `}` after it, when not empty) only
 * the tag is hashed, so `user:{42}:a` and `user:{42}:b` share a slot; `{}` (an empty tag) and a `{`
 * without a `}` hash the whole key, as in Redis. A string is hashed as its UTF-8 bytes, as a client
 * sends it; a `Buffer` as its raw bytes. Equals the server's `CLUSTER KEYSLOT key`.
 */
export function hashSlot(key: RedisKey): number {
  if (typeof key !== "string") return bytesSlot(key);
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0x7f) return bytesSlot(Buffer.from(key, "utf8"));
  }
  // ASCII: char offsets are byte offsets.
  const open = key.indexOf("{");
  if (open !== -1) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) return crc16Ascii(key, open + 1, close) & (HASH_SLOTS - 1);
  }
  return crc16Ascii(key, 0, key.length) & (HASH_SLOTS - 1);
}
