import { describe, expect, test } from "vitest";
import {
  checkClientKeyOptions,
  clientKey,
  forwardedHops,
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
      "Forwarded read, X-Forwarded-For style value is not for=: unknown",
      "10.0.0.2",
      "6.6.6.6",
      1,
      "forwarded",
      UNKNOWN_CLIENT_KEY,
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

describe("forwardedHops", () => {
  test("splits Forwarded elements on commas outside quotes", () => {
    expect(forwardedHops('for="a,b";by=x, for=c', "forwarded")).toStrictEqual(['"a,b"', "c"]);
    expect(forwardedHops("a, b,c", "x-forwarded-for")).toStrictEqual(["a", " b", "c"]);
  });
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
