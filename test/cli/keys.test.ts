import { describe, expect, test } from "vitest";
import {
  ipv4Network24,
  ipv6Network64,
  type KeySpec,
  keyFunction,
  parseKeySpec,
} from "../../src/cli/keys.js";
import type { LogRecord } from "../../src/cli/parse-log.js";

describe("network prefixes", () => {
  test.each([
    { name: "IPv4", host: "100.64.7.216", want: "100.64.7.0/24" },
    { name: "IPv4 edge octets", host: "0.0.0.255", want: "0.0.0.0/24" },
    { name: "octet above 255", host: "1.2.256.4", want: undefined },
    { name: "three octets", host: "1.2.3", want: undefined },
    { name: "IPv6", host: "2001:db8::1", want: undefined },
    { name: "host name", host: "example.com", want: undefined },
  ])("ipv4Network24: $name", ({ host, want }) => {
    expect(ipv4Network24(host)).toBe(want);
  });

  test.each([
    { name: "compressed", host: "2001:db8::1", want: "2001:db8:0:0::/64" },
    {
      name: "full, upper case, leading zeros",
      host: "2001:0DB8:00AB:0001:1:2:3:4",
      want: "2001:db8:ab:1::/64",
    },
    { name: "brackets and zone", host: "[fe80::1%eth0]", want: "fe80:0:0:0::/64" },
    { name: "trailing dotted quad", host: "64:ff9b:1:2::192.0.2.1", want: "64:ff9b:1:2::/64" },
    { name: "loopback", host: "::1", want: "0:0:0:0::/64" },
    { name: "two ::", host: "1::2::3", want: undefined },
    { name: "nine groups", host: "1:2:3:4:5:6:7:8:9", want: undefined },
    { name: "bad group", host: "2001:db8::xyz", want: undefined },
    { name: "IPv4", host: "192.0.2.1", want: undefined },
  ])("ipv6Network64: $name", ({ host, want }) => {
    expect(ipv6Network64(host)).toBe(want);
  });
});

describe("keyFunction", () => {
  const rec = (
    host: string | undefined,
    user?: string,
    fields?: Record<string, unknown>,
  ): LogRecord => ({
    timeMs: 0,
    host,
    user,
    fields,
  });
  test.each<{ name: string; spec: KeySpec; record: LogRecord; want: string | undefined }>([
    { name: "ip", spec: "ip", record: rec("192.0.2.1"), want: "192.0.2.1" },
    { name: "ip24 of IPv4", spec: "ip24", record: rec("192.0.2.1"), want: "192.0.2.0/24" },
    {
      name: "ip24 of IPv6 is its /64",
      spec: "ip24",
      record: rec("2001:db8:1:2:3::4"),
      want: "2001:db8:1:2::/64",
    },
    { name: "ip24 of a host name", spec: "ip24", record: rec("example.com"), want: "example.com" },
    {
      name: "ip64 of IPv6",
      spec: "ip64",
      record: rec("2001:db8:1:2:3::4"),
      want: "2001:db8:1:2::/64",
    },
    {
      name: "ip64 of IPv4 is the address",
      spec: "ip64",
      record: rec("192.0.2.1"),
      want: "192.0.2.1",
    },
    { name: "ip without host", spec: "ip", record: rec(undefined), want: undefined },
    { name: "user", spec: "user", record: rec("192.0.2.1", "alice"), want: "alice" },
    { name: "user absent", spec: "user", record: rec("192.0.2.1"), want: undefined },
    {
      name: "JSON string field",
      spec: { field: "api_key" },
      record: rec(undefined, undefined, { api_key: "k1" }),
      want: "k1",
    },
    {
      name: "JSON number field",
      spec: { field: "tenant" },
      record: rec(undefined, undefined, { tenant: 42 }),
      want: "42",
    },
    {
      name: "JSON empty field",
      spec: { field: "api_key" },
      record: rec(undefined, undefined, { api_key: "" }),
      want: undefined,
    },
    {
      name: "JSON object field",
      spec: { field: "api_key" },
      record: rec(undefined, undefined, { api_key: {} }),
      want: undefined,
    },
    {
      name: "field of a CLF record",
      spec: { field: "api_key" },
      record: rec("192.0.2.1"),
      want: undefined,
    },
  ])("$name", ({ spec, record, want }) => {
    expect(keyFunction(spec)(record)).toBe(want);
  });

  test("parseKeySpec", () => {
    expect(parseKeySpec("ip24")).toBe("ip24");
    expect(parseKeySpec("api_key")).toEqual({ field: "api_key" });
  });
});
