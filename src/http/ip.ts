/**
 * IP address parsing, normalization and prefix grouping for client keys. Pure functions,
 * no `node:net`, so the same code runs in Node, Bun, Deno and Workers.
 *
 * An address is held as eight 16-bit groups (IPv6) or one 32-bit number (IPv4).
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`, RFC 4291 section 2.5.5.2) is folded to IPv4,
 * so a dual-stack server keys one client the same way on both stacks.
 */

/** A parsed address: IPv4 as an unsigned 32-bit number, IPv6 as eight 16-bit groups. */
export type ParsedIp = { readonly v4: number } | { readonly v6: readonly number[] };

/** Parses strict dotted-quad IPv4 (`0`-`255`, no leading zeros); -1 when it is not one. */
function parseV4(text: string): number {
  let value = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 46; // a final "." closes the last part
    if (c >= 48 && c <= 57) {
      if (digits > 0 && part === 0) return -1; // leading zero: octal in some parsers
      part = part * 10 + (c - 48);
      if (++digits > 3 || part > 255) return -1;
    } else if (c === 46) {
      if (digits === 0) return -1;
      value = value * 256 + part;
      part = 0;
      digits = 0;
      if (i < text.length && ++dots > 3) return -1;
    } else {
      return -1;
    }
  }
  return dots === 3 ? value : -1;
}

/** The value of a hex digit, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/**
 * Parses IPv6 text (RFC 4291 section 2.2: groups of 1-4 hex digits, one `::` for a run of
 * zero groups, a trailing dotted quad) in one pass; a `%zone` suffix is ignored (it names a
 * local link, not a host). `undefined` when malformed.
 */
function parseV6(text: string): number[] | undefined {
  let end = text.indexOf("%");
  if (end === -1) end = text.length;
  const groups: number[] = [];
  let gap = -1; // where `::` stands, as an index into groups
  let i = 0;
  if (text.charCodeAt(0) === 58) {
    if (text.charCodeAt(1) !== 58) return undefined;
    gap = 0;
    i = 2;
  }
  while (i < end) {
    let value = 0;
    let j = i;
    for (let h = j < end ? hexDigit(text.charCodeAt(j)) : -1; h >= 0; ) {
      value = value * 16 + h;
      j++;
      h = j < end ? hexDigit(text.charCodeAt(j)) : -1;
    }
    if (j < end && text.charCodeAt(j) === 46) {
      const v4 = parseV4(text.slice(i, end)); // a dotted quad ends the address
      if (v4 < 0) return undefined;
      groups.push(v4 >>> 16, v4 & 0xffff);
      break;
    }
    if (j === i || j - i > 4 || groups.length === 8) return undefined;
    groups.push(value);
    if (j === end) break;
    if (text.charCodeAt(j) !== 58 || j + 1 === end) return undefined;
    i = j + 1;
    if (text.charCodeAt(i) === 58) {
      if (gap !== -1) return undefined;
      gap = groups.length;
      i++;
    }
  }
  if (gap === -1) return groups.length === 8 ? groups : undefined;
  if (groups.length > 7) return undefined;
  const out = [0, 0, 0, 0, 0, 0, 0, 0];
  const tail = groups.length - gap;
  for (let k = 0; k < gap; k++) out[k] = groups[k]!;
  for (let k = 0; k < tail; k++) out[8 - tail + k] = groups[gap + k]!;
  return out;
}

/**
 * Parses an IPv4 or IPv6 address; IPv4-mapped IPv6 becomes IPv4. Surrounding brackets
 * (`[::1]`) and a zone (`%eth0`) are accepted; anything else (ports, host names,
 * `unknown`) gives `undefined`.
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (text.length > 0 && text.charCodeAt(0) === 91 && text.endsWith("]")) text = text.slice(1, -1);
  if (!text.includes(":")) {
    const v4 = parseV4(text);
    return v4 < 0 ? undefined : { v4 };
  }
  if (text.startsWith("::ffff:") && text.includes(".")) {
    const v4 = parseV4(text.slice(7)); // the common dual-stack peer, without the IPv6 parse
    if (v4 >= 0) return { v4 };
  }
  const v6 = parseV6(text);
  if (v6 === undefined) return undefined;
  if (v6[0] === 0 && v6[1] === 0 && v6[2] === 0 && v6[3] === 0 && v6[4] === 0 && v6[5] === 0xffff) {
    return { v4: v6[6]! * 65536 + v6[7]! };
  }
  return { v6 };
}

/**
 * Reads the address out of one hop of `X-Forwarded-For`: trims, unquotes, and drops a port
 * (`192.0.2.1:4711`, `"[2001:db8::17]:4711"`); see {@link parseNode}.
 */
export function parseHop(text: string): ParsedIp | undefined {
  let hop = text.trim();
  if (hop.length >= 2 && hop.startsWith('"') && hop.endsWith('"')) hop = hop.slice(1, -1);
  return parseNode(hop);
}

/**
 * Reads the address out of a node name (RFC 7239 section 6: an IPv4 address, a bracketed
 * IPv6 address, either with an optional `:port`), as it stands in an already unquoted
 * `for=` value of `Forwarded`. `undefined` for `unknown`, an obfuscated `_name`, or garbage.
 */
export function parseNode(hop: string): ParsedIp | undefined {
  if (hop.startsWith("[")) {
    const end = hop.indexOf("]");
    // `[address]`, optionally followed by `:port`: nothing else after the bracket.
    if (end === -1 || (end + 1 < hop.length && hop.charCodeAt(end + 1) !== 58)) return undefined;
    return parseIp(hop.slice(1, end));
  }
  const colon = hop.indexOf(":");
  if (colon !== -1 && colon === hop.lastIndexOf(":")) hop = hop.slice(0, colon); // IPv4:port
  return parseIp(hop);
}

/** Dotted-quad text of an IPv4 number. */
function formatV4(v4: number): string {
  return `${v4 >>> 24}.${(v4 >>> 16) & 255}.${(v4 >>> 8) & 255}.${v4 & 255}`;
}

/** RFC 5952 text of eight groups: lower case, longest run (>= 2) of zero groups as `::`. */
function formatV6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/** The first `prefix` bits of eight groups, the rest zero. */
function maskV6(groups: readonly number[], prefix: number): number[] {
  return groups.map((g, i) => {
    const keep = prefix - i * 16;
    if (keep >= 16) return g;
    if (keep <= 0) return 0;
    return g & (0xffff << (16 - keep)) & 0xffff;
  });
}

/**
 * The text form of a parsed address used as a rate-limit key: IPv4 as dotted quad;
 * IPv6 cut to its first `ipv6Prefix` bits and written `2001:db8:1:2::/64` (RFC 5952),
 * or without `/128` when the whole address counts.
 */
export function formatKey(ip: ParsedIp, ipv6Prefix: number): string {
  if ("v4" in ip) return formatV4(ip.v4);
  if (ipv6Prefix >= 128) return formatV6(ip.v6);
  return `${formatV6(maskV6(ip.v6, ipv6Prefix))}/${ipv6Prefix}`;
}

/**
 * How many leading bits of an IPv6 address make its key by default: 56, one key per
 * customer network. A host can pick any address of its /64, and a customer typically holds
 * a /56 (a common ISP assignment, RFC 6177 recommends /56 or /48 for sites) and can use
 * any of its 256 /64s, so keying by /64 would give that customer 256 budgets (a /48,
 * 65,536). express-rate-limit moved its default from /64 to /56 in version 8 for this
 * reason. The cost: every device behind one /56 (a household, a small office) shares one
 * budget, as every device behind one IPv4 NAT address does.
 */
export const DEFAULT_IPV6_PREFIX = 56;

/**
 * The rate-limit key of an address: IPv4 (and IPv4-mapped IPv6) as dotted quad, IPv6 grouped
 * by its first `ipv6Prefix` bits (default {@link DEFAULT_IPV6_PREFIX}: one key per customer
 * network). `undefined` when `address` is not an IP address.
 * @example
 * ipKey("::ffff:203.0.113.7")       //=> "203.0.113.7"
 * ipKey("2001:db8:1:2aa::1")        //=> "2001:db8:1:200::/56"
 * ipKey("2001:db8:1:2aa::1", 64)    //=> "2001:db8:1:2aa::/64"
 * ipKey("2001:db8::1", 128)         //=> "2001:db8::1"
 */
export function ipKey(
  address: string | undefined,
  ipv6Prefix = DEFAULT_IPV6_PREFIX,
): string | undefined {
  if (typeof address !== "string") return undefined;
  // Fast paths for the usual peers: strict dotted quads are already in canonical form.
  if (!address.includes(":")) return parseV4(address) < 0 ? undefined : address;
  if (address.startsWith("::ffff:") && parseV4(address.slice(7)) >= 0) return address.slice(7);
  const ip = parseIp(address);
  return ip === undefined ? undefined : formatKey(ip, ipv6Prefix);
}

/** A trusted range: an address family, its bits and a prefix length. */
export interface IpRange {
  readonly ip: ParsedIp;
  readonly prefix: number;
}

/**
 * Parses `192.0.2.1`, `10.0.0.0/8`, `::1` or `fd00::/8` into a range; `undefined` when
 * malformed or the prefix is out of range (0-32 for IPv4, 0-128 for IPv6).
 */
export function parseRange(text: string): IpRange | undefined {
  const slash = text.indexOf("/");
  const ip = parseIp(slash === -1 ? text : text.slice(0, slash));
  if (ip === undefined) return undefined;
  const max = "v4" in ip ? 32 : 128;
  if (slash === -1) return { ip, prefix: max };
  const bits = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bits)) return undefined;
  // An IPv4-mapped range (::ffff:10.0.0.0/104) is held as IPv4: drop the 96 mapped bits.
  const prefix = Number(bits) - (max === 32 && text.includes(":") ? 96 : 0);
  return prefix >= 0 && prefix <= max ? { ip, prefix } : undefined;
}

/** True when `ip` lies inside `range` (same family, same first `prefix` bits). */
export function inRange(ip: ParsedIp, range: IpRange): boolean {
  const r = range.ip;
  if ("v4" in ip) {
    if (!("v4" in r)) return false;
    if (range.prefix === 0) return true;
    const shift = 32 - range.prefix;
    return Math.floor(ip.v4 / 2 ** shift) === Math.floor(r.v4 / 2 ** shift);
  }
  if (!("v6" in r)) return false;
  const a = maskV6(ip.v6, range.prefix);
  const b = maskV6(r.v6, range.prefix);
  return a.every((g, i) => g === b[i]);
}

/**
 * The IPv4 blocks whose addresses are not public (IANA IPv4 Special-Purpose Address
 * Registry, RFC 6890, "Globally Reachable: False", plus multicast 224.0.0.0/4, which is
 * never the source of a connection): no client on the internet connects from them.
 */
const NON_PUBLIC_V4 = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
];

/** An address as an unsigned integer (IPv4: 32 bits, IPv6: 128 bits). */
function addressValue(ip: ParsedIp): bigint {
  if ("v4" in ip) return BigInt(ip.v4);
  let value = 0n;
  for (const group of ip.v6) value = (value << 16n) | BigInt(group);
  return value;
}

/** True when the union of `blocks` (`[first, last]`, inclusive) covers `[from, to]`. */
function coversInterval(blocks: Array<[bigint, bigint]>, from: bigint, to: bigint): boolean {
  blocks.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let next = from; // the first address not yet known to be covered
  for (const [first, last] of blocks) {
    if (last < next) continue;
    if (first > next) return false; // a gap at `next`
    next = last + 1n;
    if (next > to) return true;
  }
  return next > to;
}

/** The `[first, last]` addresses of a range, whatever host bits its address carries. */
function rangeBlock(range: IpRange, bits: number): [bigint, bigint] {
  const hostBits = BigInt(bits - range.prefix);
  const first = (addressValue(range.ip) >> hostBits) << hostBits;
  return [first, first + (1n << hostBits) - 1n];
}

/**
 * Which address family `ranges` trust entirely, as far as clients on the internet go: `"IPv4"`
 * when their union covers every public IPv4 address (every address outside the special-purpose
 * blocks of RFC 6890 and multicast), `"IPv6"` when it covers all of `2000::/3` (global
 * unicast, where every public IPv6 address is allocated), else `undefined`. Unions count
 * (`0.0.0.0/1` with `128.0.0.0/1` is all of IPv4), and so do IPv4-mapped ranges
 * (`::ffff:0:0/96` is held as `0.0.0.0/0`, see {@link parseRange}). Trusting such a list lets
 * every client write its own address into the forwarding header.
 */
export function trustedFamilyOf(ranges: readonly IpRange[]): "IPv4" | "IPv6" | undefined {
  const v4: Array<[bigint, bigint]> = NON_PUBLIC_V4.map((text) =>
    rangeBlock(parseRange(text)!, 32),
  );
  const v6: Array<[bigint, bigint]> = [];
  for (const range of ranges) {
    if ("v4" in range.ip) v4.push(rangeBlock(range, 32));
    else v6.push(rangeBlock(range, 128));
  }
  if (coversInterval(v4, 0n, (1n << 32n) - 1n)) return "IPv4";
  const globalFirst = 1n << 125n; // 2000::
  if (coversInterval(v6, globalFirst, (2n << 125n) - 1n)) return "IPv6";
  return undefined;
}
