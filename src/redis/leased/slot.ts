import type { RedisKey } from "../client.js";

/** CRC16-CCITT (XMODEM) table, the checksum Redis Cluster maps keys to slots with. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = crc & 0xffff;
  }
  return table;
})();

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc = ((crc << 8) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number)) & 0xffff;
  }
  return crc;
}

/**
 * The Redis Cluster hash slot of a key (0 to 16383): CRC16 of the key's hash tag (the
 * text between the first `{` and the next `}`, when not empty) or else of the whole key,
 * modulo 16384. Known value: slot of `"foo"` is 12182.
 */
export function hashSlot(key: RedisKey): number {
  const bytes = typeof key === "string" ? new TextEncoder().encode(key) : key;
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes, open + 1, close) % 16384;
  }
  return crc16(bytes, 0, bytes.length) % 16384;
}
