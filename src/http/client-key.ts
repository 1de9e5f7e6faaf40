import { checkInteger, describe, mustBe } from "../core/errors.js";
import { parseForwarded } from "./forwarded.js";
import {
  DEFAULT_IPV6_PREFIX,
  formatKey,
  type IpRange,
  inRange,
  ipKey,
  type ParsedIp,
  parseHop,
  parseIp,
  parseNode,
  parseRange,
  trustedFamilyOf,
} from "./ip.js";

/**
 * Which proxies may tell us the client's address:
 * - `0` / `false` / `undefined`: none; the key is the socket's peer address and forwarding
 *   headers are ignored (anyone can write them).
 * - a number of hops `n` (at most {@link MAX_TRUSTED_HOPS}): the client is the `n`-th
 *   address counting back from the peer through the forwarding header (`1`: the last
 *   `X-Forwarded-For` entry). Safe only when clients cannot reach the server except
 *   through those `n` proxies: a client that connects directly picks its own key.
 * - a list of addresses or CIDR ranges (`["10.0.0.0/8", "::1"]`, recommended): walk back
 *   from the peer while the address is trusted; the first untrusted one is the client.
 *
 * `true`, and a list covering every public IPv4 or IPv6 address, are refused: every client
 * could pick its key ({@link checkClientKeyOptions}; docs/http.md#proxies).
 */
export type TrustProxy = number | boolean | readonly string[] | undefined;

/** The forwarding header read when `trustProxy` is set. Only one is read: never both. */
export type ProxyHeader = "x-forwarded-for" | "forwarded";

/** The key shared by every request whose client address cannot be found. */
export const UNKNOWN_CLIENT_KEY = "unknown";

/**
 * The key shared by every request whose trusted forwarding header is malformed: a `Forwarded`
 * field that does not parse (RFC 7239) or names no element, or an `X-Forwarded-For` entry that
 * is neither an IP address nor `unknown`. Such a request is keyed neither as the proxy (whose
 * own requests, a health check, must keep their budget) nor as anything the client wrote: all
 * of them share this one budget.
 */
export const MALFORMED_FORWARDED_KEY = "malformed-forwarded";

/**
 * The key shared by every request whose key (from the client address or a `key` hook, often a
 * header the client wrote) is longer than the limiter's `maxKeyLength` (512 for a limiter
 * without one): one budget for all of them, so a client's header length never decides memory
 * and a long key is not a way around the limit. See docs/http.md#client-keys.
 */
export const OVERSIZED_KEY = "oversized-key";

/**
 * The largest hop count `trustProxy` accepts: 4, the deepest chain commonly deployed (a
 * CDN, a cloud load balancer, an ingress controller, a service-mesh sidecar). A larger
 * count trusts more proxies than stand in front of the server, so every client could
 * write the address it is keyed by; for a deeper chain list the proxies' addresses.
 */
export const MAX_TRUSTED_HOPS = 4;

/** Validated client-key settings. */
export interface ClientKeyConfig {
  /** Trusted hops, or -1 when `ranges` is used. */
  readonly hops: number;
  readonly ranges: readonly IpRange[];
  readonly header: ProxyHeader;
  readonly ipv6Prefix: number;
}

/** What to tell a caller who trusted too much. */
const LIST_PROXIES =
  'list your proxies\' addresses or CIDR ranges instead (trustProxy: ["10.0.0.5", "10.1.0.0/16"])';

/**
 * Validates `trustProxy`, `proxyHeader` and `ipv6Prefix` (default {@link DEFAULT_IPV6_PREFIX}).
 * Configurations that trust every client are refused with a `RangeError`: `true`, a hop count
 * above {@link MAX_TRUSTED_HOPS}, and a list whose ranges (alone or together) cover every
 * public IPv4 address or all of `2000::/3` (see {@link trustedFamilyOf}): `["0.0.0.0/0"]`,
 * `["::/0"]`, `["0.0.0.0/1", "128.0.0.0/1"]`, `["::ffff:0:0/96"]`.
 * @throws {TypeError} for a wrong type; {RangeError} for a bad hop count, address or prefix,
 *   or a configuration that trusts every client.
 */
export function checkClientKeyOptions(
  where: string,
  trustProxy: unknown,
  proxyHeader: unknown,
  ipv6Prefix: unknown,
): ClientKeyConfig {
  const trustRange = `a number of hops (an integer from 0 to ${MAX_TRUSTED_HOPS}) or an array of IP addresses or CIDR ranges`;
  let hops = 0;
  const ranges: IpRange[] = [];
  if (typeof trustProxy === "number") {
    if (!Number.isInteger(trustProxy) || trustProxy < 0) {
      throw mustBe(where, "trustProxy", trustRange, trustProxy);
    }
    if (trustProxy > MAX_TRUSTED_HOPS) {
      throw new RangeError(
        `${where}: trustProxy must be at most ${MAX_TRUSTED_HOPS} hops, got ${trustProxy}: a count larger than the proxies in front of the server lets every client pick its key; ${LIST_PROXIES}`,
      );
    }
    hops = trustProxy;
  } else if (Array.isArray(trustProxy)) {
    hops = -1;
    // An index loop, not map: map skips the holes of a sparse array ([, "10.0.0.0/8"]).
    for (let i = 0; i < trustProxy.length; i++) {
      const entry: unknown = trustProxy[i];
      const range = typeof entry === "string" ? parseRange(entry.trim()) : undefined;
      if (range === undefined) {
        const error = typeof entry === "string" ? RangeError : TypeError;
        const hole = i in trustProxy ? "" : " (a hole in the array)";
        throw new error(
          `${where}: trustProxy[${i}] must be an IP address or CIDR range ("10.0.0.5", "10.1.0.0/16"), got ${describe(entry)}${hole}`,
        );
      }
      ranges.push(range);
    }
    const family = trustedFamilyOf(ranges);
    if (family !== undefined) {
      const all = family === "IPv4" ? "every public IPv4 address" : "all of 2000::/3";
      throw new RangeError(
        `${where}: trustProxy must not trust every client, but its ranges cover ${all}, so every client could pick its key; ${LIST_PROXIES}`,
      );
    }
  } else if (trustProxy === true) {
    throw new RangeError(
      `${where}: trustProxy must not be true (trust every hop): every client could pick its key; ${LIST_PROXIES}`,
    );
  } else if (trustProxy !== undefined && trustProxy !== false) {
    throw mustBe(where, "trustProxy", trustRange, trustProxy);
  }
  const header = proxyHeader === undefined ? "x-forwarded-for" : proxyHeader;
  if (header !== "x-forwarded-for" && header !== "forwarded") {
    throw new (typeof header === "string" ? RangeError : TypeError)(
      `${where}: proxyHeader must be "x-forwarded-for" or "forwarded", got ${describe(header)}`,
    );
  }
  const prefix = checkInteger(where, "ipv6Prefix", ipv6Prefix, 1, 128, DEFAULT_IPV6_PREFIX);
  return { hops, ranges, header, ipv6Prefix: prefix };
}

/**
 * The hops listed in a forwarding header, client first, or `undefined` when the header does
 * not parse (then none of it may be trusted). `X-Forwarded-For: client, proxy1` gives
 * `["client", "proxy1"]` as written (trimmed later: it has no quoting, so it always parses);
 * for `Forwarded` (RFC 7239) each element's unquoted `for=` value (`""` for an element without
 * one), parsed strictly by {@link parseForwarded}, so a client's open quote cannot swallow the
 * element its proxy appended.
 */
export function forwardedHops(value: string, header: ProxyHeader): string[] | undefined {
  return header === "x-forwarded-for" ? value.split(",") : parseForwarded(value);
}

/** True when `ip` lies in one of `ranges`. */
function trusted(ip: ParsedIp, ranges: readonly IpRange[]): boolean {
  for (const range of ranges) if (inRange(ip, range)) return true;
  return false;
}

/**
 * A `Forwarded` node that hides the address (RFC 7239 section 6): `unknown` or an
 * obfuscated `_name`, with an optional port (digits, or an obfuscated `_port`).
 */
const UNDISCLOSED_NODE = /^(?:unknown|_[a-z0-9._-]+)(?::(?:\d{1,5}|_[a-z0-9._-]+))?$/i;

/**
 * The address of one hop as a trusted proxy wrote it, or why there is none: `"unknown"` for
 * what a proxy writes when it will not tell ({@link UNDISCLOSED_NODE}, an element without
 * `for=`, `unknown` in `X-Forwarded-For`), `"malformed"` for anything else that is no address.
 */
function hopAddress(text: string, header: ProxyHeader): ParsedIp | "unknown" | "malformed" {
  if (header === "x-forwarded-for") {
    const ip = parseHop(text);
    if (ip !== undefined) return ip;
    return text.trim().toLowerCase() === "unknown" ? "unknown" : "malformed";
  }
  const ip = parseNode(text);
  if (ip !== undefined) return ip;
  return text === "" || UNDISCLOSED_NODE.test(text) ? "unknown" : "malformed";
}

/**
 * The default rate-limit key of a request: its client address formatted by `formatKey` (IPv6
 * grouped by `ipv6Prefix`). That address is the socket peer, or (only with `trustProxy`) a hop
 * of the forwarding header chosen as {@link TrustProxy} says, counted from the right (the end
 * trusted proxies append to, so no prefix a client writes can move it); with a list of ranges
 * the header is read only when the peer is in one of them.
 *
 * {@link UNKNOWN_CLIENT_KEY} when there is no address to be had (no peer: a Unix socket; or a
 * hop a proxy wrote without telling: `unknown`, `_name`, no `for=`), and
 * {@link MALFORMED_FORWARDED_KEY} when the trusted header is broken. See docs/http.md#client-keys.
 */
export function clientKey(
  peer: string | undefined,
  forwarded: string | null | undefined,
  config: ClientKeyConfig,
): string {
  if (config.hops === 0 || typeof forwarded !== "string" || forwarded === "") {
    return ipKey(peer, config.ipv6Prefix) ?? UNKNOWN_CLIENT_KEY; // no proxy involved
  }
  let ip: ParsedIp | "unknown" | "malformed" | undefined =
    typeof peer === "string" ? parseIp(peer) : undefined;
  if (config.hops > 0 || (ip !== undefined && trusted(ip, config.ranges))) {
    const hops = forwardedHops(forwarded, config.header);
    if (hops === undefined || hops.length === 0) return MALFORMED_FORWARDED_KEY;
    if (config.hops > 0) {
      // [peer, last hop, ..., first hop][n], or the first hop when the chain is shorter.
      ip = hopAddress(hops[Math.max(0, hops.length - config.hops)]!, config.header);
    } else {
      for (let i = hops.length - 1; i >= 0; i--) {
        ip = hopAddress(hops[i]!, config.header);
        // A trusted proxy wrote no address, or the first untrusted hop is the client.
        if (typeof ip === "string" || !trusted(ip, config.ranges)) break;
      } // every hop trusted: the first one
    }
  }
  if (ip === undefined || ip === "unknown") return UNKNOWN_CLIENT_KEY;
  return ip === "malformed" ? MALFORMED_FORWARDED_KEY : formatKey(ip, config.ipv6Prefix);
}

/** How many raw peer addresses a {@link PeerKeyCache} remembers before it starts over. */
export const PEER_KEY_CACHE_SIZE = 1024;

/**
 * The default key of a request that carries no trusted forwarding header, remembered per raw
 * socket address: `key(peer)` is always `clientKey(peer, undefined, config)`, but an IPv6 peer
 * (about 0.6 µs to parse and group) or an IPv4-mapped one (`::ffff:a.b.c.d`, what a server
 * listening on `::` sees for IPv4 clients) is normalized once, not on every request of its
 * keep-alive connection. Bounded: after {@link PEER_KEY_CACHE_SIZE} distinct addresses it is
 * cleared, so a client cycling through its network's addresses cannot grow it. The mapping is
 * a pure function of the address, so a stale entry cannot exist.
 */
export class PeerKeyCache {
  /** @internal */
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

/** How often {@link UntrustedProxyWarning.checkFetch} looks at a request's headers. */
export const FETCH_CHECK_EVERY = 16;

/** The parts of a node:http (or Express) request that {@link UntrustedProxyWarning} reads. */
export interface ForwardedRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly socket?: { readonly remoteAddress?: string | undefined } | undefined;
  /** Express's application, whose `get("trust proxy")` names its own proxy setting. */
  readonly app?: unknown;
}

/**
 * Warns once, in one line, that a forwarding header (`X-Forwarded-For` or `Forwarded`) reached
 * a middleware that trusts no proxy: if a proxy sent it, every client behind that proxy is
 * keyed by the proxy's address and shares one budget. (express-rate-limit warns the same way;
 * tollgate does not inherit Express's `trust proxy` or Koa's `app.proxy`, which may trust
 * every client, so the warning says when the app sets one.)
 *
 * Cheap on the request path: until the warning has fired, a check reads the two header names
 * and nothing else (a fetch check, only every {@link FETCH_CHECK_EVERY}th request); after it,
 * nothing. A client can make it fire by sending the header itself: one line per middleware.
 */
export class UntrustedProxyWarning {
  /** True once the warning was written; from then on the checks read nothing. */
  get fired(): boolean {
    return this.done;
  }

  /** @internal */
  private done = false;
  /** @internal Fetch requests seen before the warning fired (see {@link checkFetch}). */
  private seen = 0;

  /**
   * @param where The middleware's name, for the message (`rateLimit`).
   * @param warn Writes the line; `console.warn` by default. Errors it throws are ignored.
   */
  constructor(
    private readonly where: string,
    private readonly warn: (line: string) => void = (line) => console.warn(line),
  ) {}

  /**
   * Checks a node:http or Express request (`req.headers`, lower-case names); `app` is the
   * framework's application when the request does not carry it (Koa's `ctx.app`).
   */
  checkNode(req: ForwardedRequest, app: unknown = req.app): void {
    if (this.done) return;
    const headers = req.headers;
    const xff = headers["x-forwarded-for"] !== undefined;
    if (xff || headers.forwarded !== undefined) this.fire(xff, req.socket?.remoteAddress, app);
  }

  /**
   * Checks a fetch `Request`'s headers; `peer` is its peer address, when known. A lookup in a
   * `Headers` costs about 0.1 µs in Node (a few ns for node's plain header object), so only the
   * first request and then every {@link FETCH_CHECK_EVERY}th one are looked at: behind a proxy
   * every request carries the header, so the warning comes within that many requests.
   */
  checkFetch(headers: Headers, peer: string | undefined): void {
    if (this.done || this.seen++ % FETCH_CHECK_EVERY !== 0) return;
    const xff = headers.has("x-forwarded-for");
    if (xff || headers.has("forwarded")) this.fire(xff, peer, undefined);
  }

  /** @internal Writes the one line: `xff` when the header was X-Forwarded-For, else Forwarded. */
  private fire(xff: boolean, peer: string | undefined, app: unknown): void {
    this.done = true;
    const header = xff ? "X-Forwarded-For" : "Forwarded";
    // The canonical form of a parsed address only: never text a client could have chosen.
    const address = ipKey(peer, 128);
    const from = address === undefined ? "" : ` from ${address}`;
    const example = address === undefined ? '"10.0.0.5"' : JSON.stringify(address);
    const line =
      `${this.where}: a request${from} carried ${header} but trustProxy is not set, so it was keyed by its peer address; ` +
      `if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy's addresses (trustProxy: [${example}])` +
      (expressTrustsProxies(app)
        ? `. This Express app sets "trust proxy", which tollgate does not inherit (it may trust every client)`
        : (app as { proxy?: unknown } | undefined)?.proxy === true
          ? ". This Koa app sets app.proxy, which tollgate does not inherit (it trusts X-Forwarded-For from every peer)"
          : "") +
      ". This warning is written once.";
    try {
      this.warn(line);
    } catch {
      // A logger that throws must not fail the request.
    }
  }
}

/** True when `app` is an Express application whose `trust proxy` setting trusts some proxy. */
function expressTrustsProxies(app: unknown): boolean {
  try {
    const get = (app as { get?: unknown } | null | undefined)?.get;
    if (typeof get !== "function") return false;
    const setting: unknown = get.call(app, "trust proxy");
    return setting !== undefined && setting !== false && setting !== 0 && setting !== null;
  } catch {
    return false; // not Express after all
  }
}
