import express from "express";
import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import {
  checkClientKeyOptions,
  clientKey,
  FETCH_CHECK_EVERY,
  forwardedHops,
  MALFORMED_FORWARDED_KEY,
  MAX_TRUSTED_HOPS,
  PEER_KEY_CACHE_SIZE,
  PeerKeyCache,
  type ProxyHeader,
  type TrustProxy,
  UNKNOWN_CLIENT_KEY,
  UntrustedProxyWarning,
} from "../../src/http/client-key.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";

const config = (trustProxy: TrustProxy, proxyHeader?: ProxyHeader, ipv6Prefix?: number) =>
  checkClientKeyOptions("test", trustProxy, proxyHeader, ipv6Prefix);

describe("clientKey", () => {
  // peer, forwarding header value, trustProxy, header, expected key
  const steps: Array<
    [string, string | undefined, string | undefined, TrustProxy, ProxyHeader, string]
  > = [
    ["no trust: the peer, header ignored", "10.0.0.2", "6.6.6.6", 0, "x-forwarded-for", "10.0.0.2"],
    ["no trust (false)", "10.0.0.2", "6.6.6.6", false, "x-forwarded-for", "10.0.0.2"],
    [
      "no trust, mapped peer",
      "::ffff:10.0.0.2",
      "6.6.6.6",
      undefined,
      "x-forwarded-for",
      "10.0.0.2",
    ],
    [
      "1 hop: the entry our proxy appended",
      "10.0.0.2",
      "6.6.6.6, 203.0.113.9",
      1,
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "2 hops: one further back",
      "10.0.0.2",
      "6.6.6.6, 203.0.113.9, 10.0.0.1",
      2,
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "1 hop, forged prefix ignored",
      "10.0.0.2",
      "1.1.1.1, 2.2.2.2, 203.0.113.9",
      1,
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "more hops than entries: the first entry",
      "10.0.0.2",
      "203.0.113.9",
      3,
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "1 hop but no header: the peer (the proxy)",
      "10.0.0.2",
      undefined,
      1,
      "x-forwarded-for",
      "10.0.0.2",
    ],
    ["1 hop, empty header: the peer", "10.0.0.2", "", 1, "x-forwarded-for", "10.0.0.2"],
    ["1 hop, entry with port", "10.0.0.2", "203.0.113.9:5555", 1, "x-forwarded-for", "203.0.113.9"],
    [
      "1 hop, IPv6 entry grouped",
      "10.0.0.2",
      "2001:db8:1:2::99",
      1,
      "x-forwarded-for",
      "2001:db8:1::/56",
    ],
    [
      "1 hop, garbage entry: malformed",
      "10.0.0.2",
      "6.6.6.6, nonsense",
      1,
      "x-forwarded-for",
      MALFORMED_FORWARDED_KEY,
    ],
    [
      "1 hop, the proxy wrote unknown: unknown",
      "10.0.0.2",
      "6.6.6.6, Unknown",
      1,
      "x-forwarded-for",
      UNKNOWN_CLIENT_KEY,
    ],
    [
      "list: trusted peer, client is the first untrusted",
      "10.0.0.2",
      "6.6.6.6, 203.0.113.9, 10.0.0.1",
      ["10.0.0.0/8"],
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "list: untrusted peer is the client, header ignored",
      "198.51.100.4",
      "6.6.6.6",
      ["10.0.0.0/8"],
      "x-forwarded-for",
      "198.51.100.4",
    ],
    [
      "list: all trusted: the first entry",
      "10.0.0.2",
      "10.9.9.9, 10.0.0.1",
      ["10.0.0.0/8"],
      "x-forwarded-for",
      "10.9.9.9",
    ],
    [
      "list: loopback proxy over IPv6",
      "::1",
      "203.0.113.9",
      ["::1", "127.0.0.1"],
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "list: mapped peer matches an IPv4 range",
      "::ffff:127.0.0.1",
      "203.0.113.9",
      ["127.0.0.1"],
      "x-forwarded-for",
      "203.0.113.9",
    ],
    [
      "list: garbage in the chain stops the walk: unknown",
      "10.0.0.2",
      "203.0.113.9, unknown",
      ["10.0.0.0/8"],
      "x-forwarded-for",
      UNKNOWN_CLIENT_KEY,
    ],
    [
      "Forwarded: for= of the last element",
      "10.0.0.2",
      'for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https',
      1,
      "forwarded",
      "2001:db8:cafe::/56",
    ],
    [
      "Forwarded: case-insensitive name, other pairs",
      "10.0.0.2",
      "For=192.0.2.60;proto=http;by=203.0.113.43",
      1,
      "forwarded",
      "192.0.2.60",
    ],
    [
      "Forwarded: element without for=: unknown",
      "10.0.0.2",
      "for=6.6.6.6, proto=https",
      1,
      "forwarded",
      UNKNOWN_CLIENT_KEY,
    ],
    [
      "Forwarded: obfuscated node: unknown",
      "10.0.0.2",
      "for=_hidden",
      1,
      "forwarded",
      UNKNOWN_CLIENT_KEY,
    ],
    [
      "Forwarded: unknown with an obfuscated port: unknown",
      "10.0.0.2",
      'for="unknown:_p1"',
      1,
      "forwarded",
      UNKNOWN_CLIENT_KEY,
    ],
    [
      "Forwarded: a for= that is no node at all: malformed",
      "10.0.0.2",
      "for=nonsense",
      1,
      "forwarded",
      MALFORMED_FORWARDED_KEY,
    ],
    [
      "Forwarded read, X-Forwarded-For style value does not parse: malformed, not the peer",
      "10.0.0.2",
      "6.6.6.6",
      1,
      "forwarded",
      MALFORMED_FORWARDED_KEY,
    ],
    [
      "Forwarded with only empty elements (no proxy appended): malformed, not the peer",
      "10.0.0.2",
      " , ,",
      1,
      "forwarded",
      MALFORMED_FORWARDED_KEY,
    ],
    [
      "list: malformed Forwarded from a trusted peer: malformed",
      "10.0.0.2",
      'for="1.2.3.4',
      ["10.0.0.0/8"],
      "forwarded",
      MALFORMED_FORWARDED_KEY,
    ],
    [
      "list: malformed Forwarded from an untrusted peer: the peer, its own key",
      "198.51.100.4",
      'for="1.2.3.4',
      ["10.0.0.0/8"],
      "forwarded",
      "198.51.100.4",
    ],
    [
      "no peer at all (Unix socket): unknown",
      undefined,
      undefined,
      0,
      "x-forwarded-for",
      UNKNOWN_CLIENT_KEY,
    ],
  ];
  steps.forEach(([name, peer, header, trust, proxyHeader, key], i) => {
    test(`step ${i}: ${name}`, () => {
      expect(clientKey(peer, header, config(trust, proxyHeader)), `step ${i}`).toBe(key);
    });
  });

  test("ipv6Prefix changes the grouping of the peer (default /56)", () => {
    expect(clientKey("2001:db8:1:2::99", undefined, config(0))).toBe("2001:db8:1::/56");
    expect(clientKey("2001:db8:1:2::99", undefined, config(0, undefined, 64))).toBe(
      "2001:db8:1:2::/64",
    );
    expect(clientKey("2001:db8:1:2::99", undefined, config(0, undefined, 128))).toBe(
      "2001:db8:1:2::99",
    );
    expect(clientKey("2001:db8:1:2::99", undefined, config(0, undefined, 48))).toBe(
      "2001:db8:1::/48",
    );
  });
});

describe("PeerKeyCache", () => {
  test("gives clientKey's key for any peer, asked once or again, for any ipv6Prefix and the default", () => {
    const peer = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV4().map((v4) => `::ffff:${v4}`),
      fc.string({ maxLength: 12 }),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 1, max: 128 }), { nil: undefined }), // undefined: the /56 default
        fc.array(peer, { maxLength: 20 }),
        (bits, peers) => {
          const c = config(0, undefined, bits);
          const cache = new PeerKeyCache(c);
          for (const p of [...peers, ...peers]) {
            expect(cache.key(p)).toBe(clientKey(p, undefined, c));
          }
        },
      ),
    );
  });

  test("stays correct past its bound (it starts over instead of growing)", () => {
    const c = config(0);
    const cache = new PeerKeyCache(c);
    for (let i = 0; i < PEER_KEY_CACHE_SIZE * 2 + 5; i++) {
      const peer = `2001:db8:${(i >> 16) & 0xffff}:${i & 0xffff}::1`;
      expect(cache.key(peer), `step ${i}`).toBe(clientKey(peer, undefined, c));
    }
    expect(cache.key("::ffff:192.0.2.1")).toBe("192.0.2.1");
    expect(cache.key(undefined)).toBe(UNKNOWN_CLIENT_KEY);
  });
});

describe("forwardedHops", () => {
  test("splits Forwarded elements on commas outside quotes, X-Forwarded-For on every comma", () => {
    expect(forwardedHops('for="a,b";by=x, for=c', "forwarded")).toStrictEqual(["a,b", "c"]);
    expect(forwardedHops('for="a, c', "forwarded")).toBeUndefined();
    expect(forwardedHops("a, b,c", "x-forwarded-for")).toStrictEqual(["a", " b", "c"]);
    expect(forwardedHops('"a, c', "x-forwarded-for")).toStrictEqual(['"a', " c"]);
  });
});

describe("a client's open quote in Forwarded cannot swallow the element the trusted proxy appended", () => {
  // The QA repros: the old parser flipped a flag on every `"` and ignored `\`, so the
  // client's unterminated quote ran over the proxy's `, for=203.0.113.9` and the client's
  // own `for=1.2.3.4` (or garbage, giving "unknown") was taken instead. A field broken so
  // is keyed "malformed-forwarded": neither the client's pick nor the proxy (10.0.0.1).
  const headers: Array<[string, string, string]> = [
    ["open quote in a later pair", 'for=1.2.3.4;a=", for=203.0.113.9', MALFORMED_FORWARDED_KEY],
    [
      "escaped quote, then an open quote",
      'for="x\\", for=1.2.3.4;a=", for=203.0.113.9',
      "203.0.113.9",
    ],
    ["open quote as the for= value", 'for="1.2.3.4, for=203.0.113.9', MALFORMED_FORWARDED_KEY],
    ["closed quote with an escaped quote inside", 'for="a\\"b", for=203.0.113.9', "203.0.113.9"],
  ];
  const trusts: Array<[string, TrustProxy]> = [
    ["1 hop", 1],
    ["a trusted range", ["10.0.0.0/8"]],
  ];
  for (const [trustName, trust] of trusts) {
    headers.forEach(([name, header, key], i) => {
      test(`${trustName}, step ${i}: ${name}`, () => {
        expect(clientKey("10.0.0.1", header, config(trust, "forwarded")), `step ${i}`).toBe(key);
      });
    });
  }

  /** An address the proxy saw, never in 10.0.0.0/8 (the trusted range below). */
  const proxySeen = fc
    .tuple(fc.integer({ min: 11, max: 223 }), fc.nat(255), fc.nat(255), fc.nat(255))
    .map((parts) => parts.join("."));
  const piece = fc.constantFrom(
    '"',
    "\\",
    ",",
    ";",
    "=",
    " ",
    "for",
    "1.2.3.4",
    '"[2001:db8::66]"',
    "[",
    "]",
    ":",
    "a",
    "unknown",
  );
  /** What a client may send: anything, or a mix of the characters that matter. */
  const clientPrefix = fc.oneof(
    fc.string(),
    fc.array(piece).map((parts) => parts.join("")),
  );
  const peer = "10.0.0.1";

  test.each([
    { name: "1 hop", trust: 1 as TrustProxy },
    { name: "a trusted range", trust: ["10.0.0.0/8"] as TrustProxy },
  ])(
    "property ($name): the proxy's for= is the key, or malformed-forwarded when the field is malformed; never the client's pick nor the proxy",
    ({ trust }) => {
      const cfg = config(trust, "forwarded");
      fc.assert(
        fc.property(clientPrefix, proxySeen, (prefix, addr) => {
          const key = clientKey(peer, `${prefix}, for=${addr}`, cfg);
          if (forwardedHops(prefix, "forwarded") !== undefined) expect(key).toBe(addr);
          else expect([addr, MALFORMED_FORWARDED_KEY]).toContain(key);
        }),
        { numRuns: 3000 },
      );
    },
  );

  test("property (2 hops): two trusted proxies appending, the outer one's view is the key", () => {
    const cfg = config(2, "forwarded");
    fc.assert(
      fc.property(clientPrefix, proxySeen, (prefix, addr) => {
        const key = clientKey(peer, `${prefix}, for=${addr}, for=10.0.0.9`, cfg);
        if (forwardedHops(prefix, "forwarded") !== undefined) expect(key).toBe(addr);
        else expect([addr, MALFORMED_FORWARDED_KEY]).toContain(key);
      }),
      { numRuns: 1000 },
    );
  });

  test.each([
    { name: "1 hop", trust: 1 as TrustProxy },
    { name: "a trusted range", trust: ["10.0.0.0/8"] as TrustProxy },
  ])(
    "property ($name): X-Forwarded-For has no quoting, so the appended entry always wins",
    ({ trust }) => {
      const cfg = config(trust, "x-forwarded-for");
      fc.assert(
        fc.property(clientPrefix, proxySeen, (prefix, addr) => {
          expect(clientKey(peer, `${prefix}, ${addr}`, cfg)).toBe(addr);
        }),
        { numRuns: 3000 },
      );
    },
  );
});

describe("checkClientKeyOptions", () => {
  const trust =
    "a number of hops (an integer from 0 to 4) or an array of IP addresses or CIDR ranges";
  const listProxies =
    'list your proxies\' addresses or CIDR ranges instead (trustProxy: ["10.0.0.5", "10.1.0.0/16"])';
  test.each([
    {
      name: "trustProxy true (trust everyone)",
      args: [true, undefined, undefined],
      error: new RangeError(
        `w: trustProxy must not be true (trust every hop): every client could pick its key; ${listProxies}`,
      ),
    },
    {
      name: "trustProxy negative",
      args: [-1, undefined, undefined],
      error: new RangeError(`w: trustProxy must be ${trust}, got -1`),
    },
    {
      name: "trustProxy fractional",
      args: [1.5, undefined, undefined],
      error: new RangeError(`w: trustProxy must be ${trust}, got 1.5`),
    },
    {
      name: "trustProxy too many",
      args: [5, undefined, undefined],
      error: new RangeError(
        `w: trustProxy must be at most 4 hops, got 5: a count larger than the proxies in front of the server lets every client pick its key; ${listProxies}`,
      ),
    },
    {
      name: "trustProxy a string",
      args: ["10.0.0.1", undefined, undefined],
      error: new TypeError(`w: trustProxy must be ${trust}, got "10.0.0.1" (string)`),
    },
    {
      name: "trustProxy bad entry",
      args: [["10.0.0.0/33"], undefined, undefined],
      error: new RangeError(
        `w: trustProxy[0] must be an IP address or CIDR range ("10.0.0.5", "10.1.0.0/16"), got "10.0.0.0/33" (string)`,
      ),
    },
    {
      name: "trustProxy non-string entry",
      args: [["10.0.0.1", 10]],
      error: new TypeError(
        `w: trustProxy[1] must be an IP address or CIDR range ("10.0.0.5", "10.1.0.0/16"), got 10`,
      ),
    },
    {
      name: "trustProxy sparse array (was a raw TypeError reading 'ip' of undefined)",
      // biome-ignore lint/suspicious/noSparseArray: the hole is what is tested
      args: [[, "10.0.0.0/8"]],
      error: new TypeError(
        `w: trustProxy[0] must be an IP address or CIDR range ("10.0.0.5", "10.1.0.0/16"), got undefined (a hole in the array)`,
      ),
    },
    {
      name: "proxyHeader unknown",
      args: [1, "x-real-ip", undefined],
      error: new RangeError(
        'w: proxyHeader must be "x-forwarded-for" or "forwarded", got "x-real-ip" (string)',
      ),
    },
    {
      name: "proxyHeader not a string",
      args: [1, 1, undefined],
      error: new TypeError('w: proxyHeader must be "x-forwarded-for" or "forwarded", got 1'),
    },
    {
      name: "ipv6Prefix 0",
      args: [0, undefined, 0],
      error: new RangeError("w: ipv6Prefix must be an integer from 1 to 128, got 0"),
    },
    {
      name: "ipv6Prefix 129",
      args: [0, undefined, 129],
      error: new RangeError("w: ipv6Prefix must be an integer from 1 to 128, got 129"),
    },
    {
      name: "ipv6Prefix string",
      args: [0, undefined, "64"],
      error: new TypeError('w: ipv6Prefix must be an integer from 1 to 128, got "64" (string)'),
    },
  ])("rejects $name", ({ args, error }) => {
    const call = () => checkClientKeyOptions("w", args[0], args[1], args[2]);
    expect(call).toThrow(error);
    expect(call).toThrow(error.constructor as typeof Error);
  });
});

describe("trust-everything configurations are refused like trustProxy: true", () => {
  test.each([
    {
      name: "all of IPv4 and IPv6",
      trust: ["0.0.0.0/0", "::/0"],
      all: "every public IPv4 address",
    },
    { name: "all of IPv6", trust: ["::/0"], all: "all of 2000::/3" },
    {
      name: "IPv4 as two halves",
      trust: ["0.0.0.0/1", "128.0.0.0/1"],
      all: "every public IPv4 address",
    },
    {
      name: "IPv4 as a mapped IPv6 range",
      trust: ["::ffff:0:0/96"],
      all: "every public IPv4 address",
    },
    { name: "every public IPv6 address", trust: ["2000::/3", "::1"], all: "all of 2000::/3" },
    {
      name: "every public IPv4 address, private blocks left out",
      trust: ["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"],
      all: "every public IPv4 address",
    },
  ])("a CIDR list covering $name", ({ trust, all }) => {
    expect(() => config(trust)).toThrow(
      new RangeError(
        `test: trustProxy must not trust every client, but its ranges cover ${all}, so every client could pick its key; list your proxies' addresses or CIDR ranges instead (trustProxy: ["10.0.0.5", "10.1.0.0/16"])`,
      ),
    );
    expect(() => config(trust)).toThrow(RangeError);
  });

  test("a hop count of 64 is refused (it trusted every client of a shorter chain); up to 4 are accepted", () => {
    expect(MAX_TRUSTED_HOPS).toBe(4);
    for (const hops of [5, 64]) expect(() => config(hops), `${hops}`).toThrow(/at most 4 hops/);
    for (let hops = 0; hops <= 4; hops++) expect(config(hops).hops).toBe(hops);
  });

  test("proxy lists that trust part of the address space are accepted", () => {
    for (const trust of [
      ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
      ["0.0.0.0/1"], // half the internet: unwise, but not every client
      ["173.245.48.0/20", "2400:cb00::/32"],
    ]) {
      expect(config(trust).ranges.length, JSON.stringify(trust)).toBe(trust.length);
    }
  });
});

describe("a malformed forwarding header is keyed malformed-forwarded, never as the proxy", () => {
  // Regression: a malformed Forwarded field from the trusted proxy was keyed as the proxy,
  // so a client got the proxy's budget on top of its own (+5 requests at capacity 3) and
  // the proxy's own header-less health check was then answered 429.
  const proxy = "10.0.0.1";
  test.each([
    { name: "Forwarded, 1 hop", trust: 1 as TrustProxy, header: "forwarded" as ProxyHeader },
    {
      name: "Forwarded, a trusted range",
      trust: ["10.0.0.0/8"] as TrustProxy,
      header: "forwarded" as ProxyHeader,
    },
    {
      name: "X-Forwarded-For, 1 hop",
      trust: 1 as TrustProxy,
      header: "x-forwarded-for" as ProxyHeader,
    },
  ])(
    "$name: the proxy's health check keeps its budget after a client's flood",
    ({ trust, header }) => {
      const cfg = config(trust, header);
      const broken = header === "forwarded" ? 'for="203.0.113.9' : "203.0.113.9, not-an-address";
      const keyed = new KeyedLimiter(
        new TokenBucket({ capacity: 3, refillPerSecond: 1e-9, clock: () => 0 }),
      );
      let clientAllowed = 0;
      for (let i = 0; i < 8; i++) {
        const key = clientKey(
          proxy,
          header === "forwarded" ? "for=203.0.113.9" : "203.0.113.9",
          cfg,
        );
        if (keyed.consume(key).allowed) clientAllowed++;
      }
      for (let i = 0; i < 8; i++) {
        expect(clientKey(proxy, broken, cfg)).toBe(MALFORMED_FORWARDED_KEY);
        keyed.consume(clientKey(proxy, broken, cfg));
      }
      expect(clientAllowed).toBe(3);
      // The proxy's own request, without a forwarding header, still has its full budget.
      expect(keyed.consume(clientKey(proxy, undefined, cfg)).remaining).toBe(2);
    },
  );

  test("property: whatever a client writes before the proxy's element, the key is never the proxy's", () => {
    const cfg = config(["10.0.0.0/8"], "forwarded");
    fc.assert(
      fc.property(fc.string(), (prefix) => {
        const key = clientKey(proxy, `${prefix}, for=203.0.113.9`, cfg);
        expect(key).not.toBe(proxy);
        expect(["203.0.113.9", MALFORMED_FORWARDED_KEY, UNKNOWN_CLIENT_KEY]).toContain(key);
      }),
      { numRuns: 2000 },
    );
  });

  test("an untrusted peer is keyed by its own address, however broken its header", () => {
    const cfg = config(["10.0.0.0/8"], "forwarded");
    fc.assert(
      fc.property(fc.ipV4(), fc.string(), (peer, header) => {
        fc.pre(!peer.startsWith("10."));
        expect(clientKey(peer, header, cfg)).toBe(peer);
      }),
    );
  });
});

describe("UntrustedProxyWarning (forwarding headers with no proxy trusted)", () => {
  /** A node request whose header reads are counted. */
  function request(headers: Record<string, string>, app?: unknown) {
    const reads: string[] = [];
    const counted = new Proxy(headers, {
      get: (target, name) => {
        reads.push(String(name));
        return target[name as string];
      },
    });
    return { req: { headers: counted, socket: { remoteAddress: "::ffff:10.0.0.7" }, app }, reads };
  }

  test("warns once, in one line, naming the header, the peer and what to set", () => {
    const lines: string[] = [];
    const warning = new UntrustedProxyWarning("rateLimit", (line) => lines.push(line));
    warning.checkNode(request({}).req);
    expect(lines).toStrictEqual([]);
    warning.checkNode(request({ "x-forwarded-for": "203.0.113.9" }).req);
    warning.checkNode(request({ forwarded: "for=203.0.113.9" }).req);
    expect(lines).toStrictEqual([
      'rateLimit: a request from 10.0.0.7 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy\'s addresses (trustProxy: ["10.0.0.7"]). This warning is written once.',
    ]);
    expect(lines[0]).not.toContain("\n");
    expect(warning.fired).toBe(true);
  });

  test("reads only the two header names until it fires, then nothing", () => {
    const warning = new UntrustedProxyWarning("rateLimit", () => {});
    const quiet = request({ host: "example" });
    warning.checkNode(quiet.req);
    expect(quiet.reads).toStrictEqual(["x-forwarded-for", "forwarded"]);
    warning.checkNode(request({ forwarded: "for=1.2.3.4" }).req);
    const after = request({ "x-forwarded-for": "1.2.3.4" });
    for (let i = 0; i < 3; i++) warning.checkNode(after.req);
    expect(after.reads).toStrictEqual([]);
  });

  test("says when the Express app sets trust proxy (which tollgate does not inherit)", () => {
    for (const setting of [true, 1, "loopback", ["10.0.0.0/8"]]) {
      const app = express();
      app.set("trust proxy", setting);
      const lines: string[] = [];
      new UntrustedProxyWarning("rateLimit", (line) => lines.push(line)).checkNode(
        request({ "x-forwarded-for": "1.2.3.4" }, app).req,
      );
      expect(lines[0], JSON.stringify(setting)).toContain(
        'This Express app sets "trust proxy", which tollgate does not inherit (it may trust every client).',
      );
    }
    const lines: string[] = [];
    new UntrustedProxyWarning("rateLimit", (line) => lines.push(line)).checkNode(
      request({ "x-forwarded-for": "1.2.3.4" }, express()).req, // the default: false
    );
    expect(lines[0]).not.toContain("Express");
  });

  test("fetch headers: Forwarded counts too; a peer that is no address is left out", () => {
    const lines: string[] = [];
    const warning = new UntrustedProxyWarning("withRateLimit", (line) => lines.push(line));
    warning.checkFetch(new Headers({ forwarded: "for=1.2.3.4" }), "evil\nline");
    warning.checkFetch(new Headers({ forwarded: "for=1.2.3.4" }), "192.0.2.1");
    expect(lines).toStrictEqual([
      'withRateLimit: a request carried Forwarded but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy\'s addresses (trustProxy: ["10.0.0.5"]). This warning is written once.',
    ]);
  });

  test("fetch headers are looked at on the first request, then every 16th, until it fires", () => {
    const lines: string[] = [];
    const warning = new UntrustedProxyWarning("withRateLimit", (line) => lines.push(line));
    warning.checkFetch(new Headers({ accept: "*/*" }), "192.0.2.1"); // looked at: none there
    const proxied = new Headers({ "x-forwarded-for": "1.2.3.4" });
    for (let i = 1; i < FETCH_CHECK_EVERY; i++) warning.checkFetch(proxied, "192.0.2.1");
    expect(lines).toStrictEqual([]);
    warning.checkFetch(proxied, "192.0.2.1"); // the 17th request: looked at
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("from 192.0.2.1 carried X-Forwarded-For");
  });

  test("a logger that throws is ignored, and counts as the one warning", () => {
    const warning = new UntrustedProxyWarning("rateLimit", () => {
      throw new Error("log down");
    });
    expect(() => warning.checkNode(request({ "x-forwarded-for": "1.2.3.4" }).req)).not.toThrow();
    expect(warning.fired).toBe(true);
  });

  test("a throwing app.get is not Express: no mention, no throw", () => {
    const lines: string[] = [];
    const app = {
      get: () => {
        throw new Error("not a settings getter");
      },
    };
    new UntrustedProxyWarning("rateLimit", (line) => lines.push(line)).checkNode(
      request({ "x-forwarded-for": "1.2.3.4" }, app).req,
    );
    expect(lines[0]).not.toContain("Express");
  });

  test("the default writes with console.warn", () => {
    const spy = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      new UntrustedProxyWarning("rateLimit").checkFetch(
        new Headers({ "x-forwarded-for": "1.2.3.4" }),
        undefined,
      );
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });
});
