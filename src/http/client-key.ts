import { describe } from "../errors.js";
import { parseForwarded } from "./forwarded.js";
import {
  formatKey,
  type IpRange,
  inRange,
  ipKey,
  type ParsedIp,
  parseHop,
  parseIp,
  parseNode,
  parseRange,
} from "./ip.js";

/**
 * Which proxies may tell us the client's address:
 * - `0` / `false` / `undefined`: none; the key is the socket's peer address and forwarding
 *   headers are ignored (anyone can write them).
 * - a number of hops `n`: the nearest `n` proxies in front of the server are trusted; the
 *   client is the `n`-th address counting back from the peer through the forwarding header
 *   (with one proxy, `1`: the last `X-Forwarded-For` entry, the one your proxy appended).
 * - a list of addresses or CIDR ranges (`["10.0.0.0/8", "::1"]`): walk back from the peer
 *   while the address is trusted; the first untrusted address is the client.
 */
export type TrustProxy = number | boolean | readonly string[] | undefined;

/** The forwarding header read when `trustProxy` is set. Only one is read: never both. */
export type ProxyHeader = "x-forwarded-for" | "forwarded";

/** The key shared by every request whose client address cannot be found. */
export const UNKNOWN_CLIENT_KEY = "unknown";

/** Validated client-key settings. */
export interface ClientKeyConfig {
  /** Trusted hops, or -1 when `ranges` is used. */
  readonly hops: number;
  readonly ranges: readonly IpRange[];
  readonly header: ProxyHeader;
  readonly ipv6Prefix: number;
}

const MAX_HOPS = 64;

/**
 * Validates `trustProxy`, `proxyHeader` and `ipv6Prefix`.
 * @throws {TypeError} for a wrong type; {RangeError} for a bad hop count, address or prefix.
 */
export function checkClientKeyOptions(
  where: string,
  trustProxy: unknown,
  proxyHeader: unknown,
  ipv6Prefix: unknown,
): ClientKeyConfig {
  const trustRange = `a number of hops (an integer from 0 to ${MAX_HOPS}) or an array of IP addresses or CIDR ranges`;
  let hops = 0;
  let ranges: IpRange[] = [];
  if (trustProxy === undefined || trustProxy === false) {
    hops = 0;
  } else if (typeof trustProxy === "number") {
    if (!Number.isInteger(trustProxy) || trustProxy < 0 || trustProxy > MAX_HOPS) {
      throw new RangeError(
        `${where}: trustProxy must be ${trustRange}, got ${describe(trustProxy)}`,
      );
    }
    hops = trustProxy;
  } else if (Array.isArray(trustProxy)) {
    hops = -1;
    ranges = trustProxy.map((entry: unknown) => {
      const range = typeof entry === "string" ? parseRange(entry.trim()) : undefined;
      if (range === undefined) {
        const error = typeof entry === "string" ? RangeError : TypeError;
        throw new error(
          `${where}: trustProxy must be ${trustRange}, got ${describe(entry)} in the array`,
        );
      }
      return range;
    });
  } else {
    // `true` (trust every hop) would let any client pick its own key: refused on purpose.
    const error = trustProxy === true ? RangeError : TypeError;
    throw new error(`${where}: trustProxy must be ${trustRange}, got ${describe(trustProxy)}`);
  }

  let header: ProxyHeader = "x-forwarded-for";
  if (proxyHeader !== undefined) {
    if (proxyHeader !== "x-forwarded-for" && proxyHeader !== "forwarded") {
      const error = typeof proxyHeader === "string" ? RangeError : TypeError;
      throw new error(
        `${where}: proxyHeader must be "x-forwarded-for" or "forwarded", got ${describe(proxyHeader)}`,
      );
    }
    header = proxyHeader;
  }

  let prefix = 64;
  if (ipv6Prefix !== undefined) {
    const range = "an integer from 1 to 128";
    if (typeof ipv6Prefix !== "number") {
      throw new TypeError(`${where}: ipv6Prefix must be ${range}, got ${describe(ipv6Prefix)}`);
    }
    if (!Number.isInteger(ipv6Prefix) || ipv6Prefix < 1 || ipv6Prefix > 128) {
      throw new RangeError(`${where}: ipv6Prefix must be ${range}, got ${describe(ipv6Prefix)}`);
    }
    prefix = ipv6Prefix;
  }
  return { hops, ranges, header, ipv6Prefix: prefix };
}

/**
 * The hops listed in a forwarding header, client first, or `undefined` when the header
 * does not parse (then none of it may be trusted). `X-Forwarded-For: client, proxy1` gives
 * `["client", "proxy1"]` as written (trimmed later); for `Forwarded` (RFC 7239) each
 * element's unquoted `for=` value (`""` for an element without one), parsed strictly by
 * {@link parseForwarded}: an unterminated quote or other malformed syntax gives
 * `undefined`, so a client's open quote cannot swallow the element its proxy appended.
 * `X-Forwarded-For` has no quoting: a comma always separates, so it always parses.
 */
export function forwardedHops(value: string, header: ProxyHeader): string[] | undefined {
  return header === "x-forwarded-for" ? value.split(",") : parseForwarded(value);
}

/**
 * The client's address: the socket peer, or (only with `trustProxy`) an address from the
 * forwarding header chosen as described in {@link TrustProxy}, counting hops from the
 * right (the end that trusted proxies append to, so no prefix a client writes can move
 * it). `undefined` when the chosen entry is missing or not an IP address (`unknown`, an
 * obfuscated `_node`).
 *
 * A `Forwarded` field that does not parse (see {@link forwardedHops}) is treated as
 * absent: the result is the peer, the nearest proxy. Only a client can have broken it
 * (a conforming proxy appends a well-formed element), so all such requests share the
 * proxy's key, apart from every well-formed client and from `"unknown"`.
 */
export function clientIp(
  peer: string | undefined,
  forwarded: string | null | undefined,
  config: ClientKeyConfig,
): ParsedIp | undefined {
  let ip = typeof peer === "string" ? parseIp(peer) : undefined;
  if (config.hops === 0 || typeof forwarded !== "string" || forwarded === "") return ip;
  const hops = forwardedHops(forwarded, config.header);
  if (hops === undefined) return ip; // malformed Forwarded: as if absent
  const parse = config.header === "x-forwarded-for" ? parseHop : parseNode;
  if (config.hops > 0) {
    if (hops.length === 0) return ip; // only empty Forwarded elements: as if absent
    // [peer, last hop, ..., first hop][n], or the first hop when the chain is shorter.
    const index = Math.max(0, hops.length - config.hops);
    return parse(hops[index]!);
  }
  for (let i = hops.length - 1; i >= 0; i--) {
    if (ip === undefined || !config.ranges.some((range) => inRange(ip!, range))) return ip;
    ip = parse(hops[i]!);
  }
  return ip;
}

/**
 * The default rate-limit key of a request: its client address (see {@link clientIp})
 * formatted by `formatKey` (IPv6 grouped by `ipv6Prefix`), or {@link UNKNOWN_CLIENT_KEY}
 * when no usable address is found (a Unix socket, a proxy that wrote `unknown`): all such
 * requests then share one key, which limits them together rather than not at all.
 */
export function clientKey(
  peer: string | undefined,
  forwarded: string | null | undefined,
  config: ClientKeyConfig,
): string {
  if (config.hops === 0 || typeof forwarded !== "string" || forwarded === "") {
    return ipKey(peer, config.ipv6Prefix) ?? UNKNOWN_CLIENT_KEY; // no proxy involved
  }
  const ip = clientIp(peer, forwarded, config);
  return ip === undefined ? UNKNOWN_CLIENT_KEY : formatKey(ip, config.ipv6Prefix);
}

/** How many raw peer addresses a {@link PeerKeyCache} remembers before it starts over. */
export const PEER_KEY_CACHE_SIZE = 1024;

/**
 * The default key of a request that carries no trusted forwarding header, remembered per
 * raw socket address: `key(peer)` is always `clientKey(peer, undefined, config)`, but an
 * IPv6 peer (about 0.6 µs to parse and group) or an IPv4-mapped one (`::ffff:a.b.c.d`,
 * what a server listening on `::` sees for IPv4 clients) is normalized once, not on every
 * request of its keep-alive connection. Bounded: after {@link PEER_KEY_CACHE_SIZE}
 * distinct addresses it is cleared, so a client cycling through its /64 cannot grow it.
 * The mapping is a pure function of the address, so a stale entry cannot exist.
 */
export class PeerKeyCache {
  private readonly keys = new Map<string, string>();

  constructor(private readonly config: ClientKeyConfig) {}

  /** The client key of a request from `peer` (the socket's `remoteAddress`). */
  key(peer: string | undefined): string {
    if (typeof peer !== "string") return UNKNOWN_CLIENT_KEY;
    let key = this.keys.get(peer);
    if (key === undefined) {
      key = ipKey(peer, this.config.ipv6Prefix) ?? UNKNOWN_CLIENT_KEY;
      if (this.keys.size >= PEER_KEY_CACHE_SIZE) this.keys.clear();
      this.keys.set(peer, key);
    }
    return key;
  }
}
