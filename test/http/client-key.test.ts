import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  checkClientKeyOptions,
  clientKey,
  forwardedHops,
  PEER_KEY_CACHE_SIZE,
  PeerKeyCache,
  type ProxyHeader,
  type TrustProxy,
  UNKNOWN_CLIENT_KEY,
} from "../../src/http/client-key.js";

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
      "2001:db8:1:2::/64",
    ],
    [
      "1 hop, garbage entry: unknown",
      "10.0.0.2",
      "6.6.6.6, nonsense",
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
      "2001:db8:cafe::/64",
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
      "Forwarded read, X-Forwarded-For style value does not parse: as if absent, the peer",
      "10.0.0.2",
      "6.6.6.6",
      1,
      "forwarded",
      "10.0.0.2",
    ],
    [
      "Forwarded with only empty elements: as if absent, the peer",
      "10.0.0.2",
      " , ,",
      1,
      "forwarded",
      "10.0.0.2",
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

  test("ipv6Prefix changes the grouping of the peer", () => {
    expect(clientKey("2001:db8:1:2::99", undefined, config(0, undefined, 128))).toBe(
      "2001:db8:1:2::99",
    );
    expect(clientKey("2001:db8:1:2::99", undefined, config(0, undefined, 48))).toBe(
      "2001:db8:1::/48",
    );
  });
});

describe("PeerKeyCache", () => {
  test("gives clientKey's key for any peer, asked once or again, for any ipv6Prefix", () => {
    const peer = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV4().map((v4) => `::ffff:${v4}`),
      fc.string({ maxLength: 12 }),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 128 }),
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
  // own `for=1.2.3.4` (or garbage, giving "unknown") was taken instead.
  const headers: Array<[string, string, string]> = [
    ["open quote in a later pair", 'for=1.2.3.4;a=", for=203.0.113.9', "10.0.0.1"],
    [
      "escaped quote, then an open quote",
      'for="x\\", for=1.2.3.4;a=", for=203.0.113.9',
      "203.0.113.9",
    ],
    ["open quote as the for= value", 'for="1.2.3.4, for=203.0.113.9', "10.0.0.1"],
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
    "property ($name): the proxy's for= is the key, or the peer when the field is malformed; never the client's pick",
    ({ trust }) => {
      const cfg = config(trust, "forwarded");
      fc.assert(
        fc.property(clientPrefix, proxySeen, (prefix, addr) => {
          const key = clientKey(peer, `${prefix}, for=${addr}`, cfg);
          if (forwardedHops(prefix, "forwarded") !== undefined) expect(key).toBe(addr);
          else expect([addr, peer]).toContain(key);
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
        else expect([addr, peer]).toContain(key);
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
    "a number of hops (an integer from 0 to 64) or an array of IP addresses or CIDR ranges";
  test.each([
    {
      name: "trustProxy true (trust everyone)",
      args: [true, undefined, undefined],
      error: new RangeError(`w: trustProxy must be ${trust}, got true (boolean)`),
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
      args: [65, undefined, undefined],
      error: new RangeError(`w: trustProxy must be ${trust}, got 65`),
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
        `w: trustProxy must be ${trust}, got "10.0.0.0/33" (string) in the array`,
      ),
    },
    {
      name: "trustProxy non-string entry",
      args: [[10]],
      error: new TypeError(`w: trustProxy must be ${trust}, got 10 in the array`),
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
