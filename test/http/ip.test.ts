import { isIP } from "node:net";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  DEFAULT_IPV6_PREFIX,
  formatKey,
  type IpRange,
  inRange,
  ipKey,
  parseHop,
  parseIp,
  parseRange,
  trustedFamilyOf,
} from "../../src/http/ip.js";

describe("ipKey", () => {
  test.each([
    { name: "IPv4", address: "203.0.113.7", key: "203.0.113.7" },
    { name: "IPv4 0.0.0.0", address: "0.0.0.0", key: "0.0.0.0" },
    { name: "IPv4 255s", address: "255.255.255.255", key: "255.255.255.255" },
    { name: "IPv4-mapped IPv6 -> IPv4", address: "::ffff:203.0.113.7", key: "203.0.113.7" },
    { name: "IPv4-mapped, hex form", address: "::ffff:cb00:7107", key: "203.0.113.7" },
    { name: "IPv4-mapped, upper case", address: "::FFFF:127.0.0.1", key: "127.0.0.1" },
    { name: "IPv4-mapped, long form", address: "0:0:0:0:0:ffff:7f00:1", key: "127.0.0.1" },
    {
      name: "IPv6 grouped by /56",
      address: "2001:db8:1:2aa:aaaa:bbbb:cccc:dddd",
      key: "2001:db8:1:200::/56",
    },
    { name: "same /56, other /64", address: "2001:db8:1:2ff::1", key: "2001:db8:1:200::/56" },
    { name: "IPv6 loopback", address: "::1", key: "::/56" },
    {
      name: "IPv6 upper case and leading zeros",
      address: "2001:0DB8:0001:0002::1",
      key: "2001:db8:1::/56",
    },
    { name: "IPv6 with zone", address: "fe80::1%eth0", key: "fe80::/56" },
    { name: "IPv6 in brackets", address: "[2001:db8::1]", key: "2001:db8::/56" },
    { name: "IPv4 tail in IPv6 (not mapped)", address: "64:ff9b::192.0.2.33", key: "64:ff9b::/56" },
    { name: "not an address", address: "example.com", key: undefined },
    { name: "empty", address: "", key: undefined },
    { name: "IPv4 out of range", address: "256.1.1.1", key: undefined },
    { name: "IPv4 leading zero (octal elsewhere)", address: "010.1.1.1", key: undefined },
    { name: "IPv4 three parts", address: "1.2.3", key: undefined },
    { name: "IPv4 five parts", address: "1.2.3.4.5", key: undefined },
    { name: "IPv4 trailing dot", address: "1.2.3.4.", key: undefined },
    { name: "IPv4 with port", address: "1.2.3.4:80", key: undefined },
    { name: "IPv6 two ::", address: "1::2::3", key: undefined },
    { name: "IPv6 nine groups", address: "1:2:3:4:5:6:7:8:9", key: undefined },
    { name: "IPv6 seven groups", address: "1:2:3:4:5:6:7", key: undefined },
    { name: "IPv6 :: with eight groups", address: "1:2:3:4::5:6:7:8", key: undefined },
    { name: "IPv6 group too long", address: "12345::1", key: undefined },
    { name: "IPv6 bad hex", address: "g::1", key: undefined },
    { name: "undefined", address: undefined, key: undefined },
  ])("$name: $address -> $key", ({ address, key }) => {
    expect(ipKey(address)).toBe(key);
  });

  test.each([
    { prefix: 128, key: "2001:db8:1:2:aaaa:bbbb:cccc:dddd" },
    { prefix: 64, key: "2001:db8:1:2::/64" },
    { prefix: 56, key: "2001:db8:1::/56" },
    { prefix: 48, key: "2001:db8:1::/48" },
    { prefix: 63, key: "2001:db8:1:2::/63" },
    { prefix: 1, key: "::/1" },
  ])("ipv6Prefix $prefix", ({ prefix, key }) => {
    expect(ipKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd", prefix)).toBe(key);
  });

  test("RFC 5952: the longest zero run is compressed, the first on a tie, never a single group", () => {
    expect(ipKey("2001:db8:0:0:1:0:0:1", 128)).toBe("2001:db8::1:0:0:1");
    expect(ipKey("2001:0:0:1:0:0:0:1", 128)).toBe("2001:0:0:1::1");
    expect(ipKey("2001:db8:0:1:1:1:1:1", 128)).toBe("2001:db8:0:1:1:1:1:1");
    expect(ipKey("::", 128)).toBe("::");
  });

  test("every IPv4 address round-trips, also through its mapped IPv6 form", () => {
    fc.assert(
      fc.property(fc.ipV4(), (address) => {
        return ipKey(address) === address && ipKey(`::ffff:${address}`) === address;
      }),
    );
  });

  test("IPv6 keys are equal exactly when the first 56 bits are (model: 14 hex digits)", () => {
    const digits = (n: number) =>
      fc
        .array(fc.constantFrom(..."0123456789abcdef"), { minLength: n, maxLength: n })
        .map((d) => d.join(""));
    /** Full-form text of 32 hex digits. */
    const full = (hex: string) => hex.match(/.{4}/g)!.join(":");
    fc.assert(
      fc.property(digits(14), digits(18), digits(14), digits(18), (headA, tailA, headB, tailB) => {
        if (/^0{14}$/.test(headA) || /^0{14}$/.test(headB)) return true; // ::ffff:… is IPv4-mapped
        const a = ipKey(full(headA + tailA));
        const a2 = ipKey(full(headA + tailB));
        const b = ipKey(full(headB + tailB));
        return a === a2 && (a === b) === (headA === headB);
      }),
    );
  });

  test("a customer holding a /56 gets one key by default, not one per /64 (256 budgets)", () => {
    const keys = new Set<string | undefined>();
    for (let subnet = 0; subnet < 256; subnet++) {
      keys.add(ipKey(`2001:db8:a:b${subnet.toString(16).padStart(2, "0")}::1`));
    }
    expect([...keys]).toStrictEqual(["2001:db8:a:b00::/56"]);
    expect(DEFAULT_IPV6_PREFIX).toBe(56);
  });
});

describe("parseIp against node:net as the reference", () => {
  test("accepts exactly what node:net.isIP accepts (random strings over the address alphabet)", () => {
    const alphabet = fc.constantFrom(..."0123456789abcdefABCDEF:.".split(""), "::", "ffff:");
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 40 }), (parts) => {
        const text = parts.join("");
        return (parseIp(text) !== undefined) === (isIP(text) !== 0);
      }),
      { numRuns: 20_000 },
    );
  });

  test("accepts every address fast-check generates, in every notation", () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (address) => parseIp(address) !== undefined),
    );
  });
});

describe("parseHop", () => {
  test.each([
    { hop: " 192.0.2.1 ", key: "192.0.2.1" },
    { hop: "192.0.2.1:4711", key: "192.0.2.1" },
    { hop: '"[2001:db8:cafe::17]:4711"', key: "2001:db8:cafe::/64" },
    { hop: "[2001:db8::1]", key: "2001:db8::/64" },
    { hop: "2001:db8::1", key: "2001:db8::/64" },
    { hop: "unknown", key: undefined },
    { hop: "_hidden", key: undefined },
    { hop: "[2001:db8::1", key: undefined },
    { hop: "[2001:db8::1]garbage", key: undefined },
    { hop: "[2001:db8::1]:_port", key: "2001:db8::/64" },
    { hop: "", key: undefined },
  ])("$hop", ({ hop, key }) => {
    const ip = parseHop(hop);
    expect(ip === undefined ? undefined : formatKey(ip, 64)).toBe(key);
  });
});

describe("parseRange / inRange", () => {
  test.each([
    { range: "10.0.0.0/8", address: "10.200.1.1", inside: true },
    { range: "10.0.0.0/8", address: "11.0.0.1", inside: false },
    { range: "10.0.0.0/8", address: "::ffff:10.0.0.1", inside: true },
    { range: "192.0.2.1", address: "192.0.2.1", inside: true },
    { range: "192.0.2.1", address: "192.0.2.2", inside: false },
    { range: "0.0.0.0/0", address: "8.8.8.8", inside: true },
    { range: "0.0.0.0/0", address: "::1", inside: false },
    { range: "::1", address: "::1", inside: true },
    { range: "fd00::/8", address: "fd12:3456::1", inside: true },
    { range: "fd00::/8", address: "fe80::1", inside: false },
    { range: "::ffff:10.0.0.0/104", address: "10.1.2.3", inside: true },
    { range: "::/0", address: "2001:db8::1", inside: true },
    { range: "2001:db8::/32", address: "10.0.0.1", inside: false },
    { range: "172.16.0.0/12", address: "172.31.255.255", inside: true },
    { range: "172.16.0.0/12", address: "172.32.0.0", inside: false },
  ])("$address in $range: $inside", ({ range, address, inside }) => {
    expect(inRange(parseIp(address)!, parseRange(range)!)).toBe(inside);
  });

  test.each(["10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/a", "nonsense", "10.0.0.0/-1"])(
    "rejects %s",
    (range) => {
      expect(parseRange(range)).toBeUndefined();
    },
  );
});

describe("trustedFamilyOf (a trusted list that covers every client)", () => {
  test.each([
    { ranges: ["0.0.0.0/0"], family: "IPv4" },
    { ranges: ["::/0"], family: "IPv6" },
    { ranges: ["0.0.0.0/0", "::/0"], family: "IPv4" },
    { ranges: ["0.0.0.0/1", "128.0.0.0/1"], family: "IPv4" },
    { ranges: ["::ffff:0:0/96"], family: "IPv4" },
    { ranges: ["::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"], family: "IPv4" },
    { ranges: ["0.0.0.0/1", "::ffff:128.0.0.0/97"], family: "IPv4" },
    { ranges: ["1.2.3.4/0"], family: "IPv4" }, // host bits do not narrow a range
    // every public address, the special-purpose blocks left out
    { ranges: ["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"], family: "IPv4" },
    { ranges: ["2000::/3"], family: "IPv6" },
    { ranges: ["2000::/4", "3000::/4"], family: "IPv6" },
    { ranges: ["::/1", "8000::/1"], family: "IPv6" },
    { ranges: ["0.0.0.0/1"], family: undefined },
    { ranges: ["0.0.0.0/1", "128.0.0.0/2"], family: undefined },
    { ranges: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.1"], family: undefined },
    { ranges: ["2000::/4"], family: undefined },
    { ranges: ["::/3", "4000::/2"], family: undefined }, // all but 2000::/3: every client still untrusted
    { ranges: ["::/80"], family: undefined }, // holds the mapped block, but IPv4 clients are matched as IPv4
    { ranges: [], family: undefined },
  ])("$ranges: $family", ({ ranges, family }) => {
    expect(trustedFamilyOf(ranges.map((r) => parseRange(r)!))).toBe(family);
  });

  /** The special-purpose IPv4 blocks, as the module lists them. */
  const nonPublic = [
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
  ].map((r) => parseRange(r)!);

  /** Reference: does some range hold the block `value/prefix`, or do both its halves? */
  function covered(ranges: readonly IpRange[], value: number, prefix: number): boolean {
    const block = { ip: { v4: value }, prefix };
    const holds = (r: IpRange) =>
      r.prefix <= prefix && inRange({ v4: value }, r) && inRange(block.ip, r);
    if (ranges.some(holds)) return true;
    if (prefix >= 24 || !ranges.some((r) => r.prefix > prefix && inRange(r.ip, block))) {
      return false; // nothing smaller inside to fill it (ranges are at most /24 here)
    }
    const half = 2 ** (31 - prefix);
    return covered(ranges, value, prefix + 1) && covered(ranges, value + half, prefix + 1);
  }

  test("property: IPv4 is reported exactly when the ranges and the special blocks cover everything (model: halving)", () => {
    const range = fc
      .tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 0, max: 24 }))
      .map(([v4, prefix]) => {
        const size = 2 ** (32 - prefix);
        return { ip: { v4: Math.floor(v4 / size) * size }, prefix } as IpRange;
      });
    // Coarse halves of the space, so that a random list covers it now and then.
    const half = fc
      .constantFrom(0, 1, 2, 3)
      .chain((prefix) =>
        fc
          .integer({ min: 0, max: 2 ** prefix - 1 })
          .map((i) => ({ ip: { v4: i * 2 ** (32 - prefix) }, prefix }) as IpRange),
      );
    fc.assert(
      fc.property(fc.array(fc.oneof(range, half), { maxLength: 12 }), (ranges) => {
        const expected = covered([...ranges, ...nonPublic], 0, 0);
        expect(trustedFamilyOf(ranges) === "IPv4").toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });
});
