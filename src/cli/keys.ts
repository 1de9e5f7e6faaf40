import type { LogRecord } from "./parse-log.js";

/**
 * How `tollgate replay --key` groups requests into clients:
 * - `ip`: the logged client address (or host name) as is;
 * - `ip24`: IPv4 by /24 network (`192.0.2.0/24`), IPv6 by /64 (`2001:db8:1:2::/64`);
 * - `ip64`: IPv6 by /64, IPv4 by whole address;
 * - `user`: the authenticated user (`%u`); lines logged with `-` have no key;
 * - any other name: that field of a JSON line (string or number); CLF lines have none.
 * A host that is not an IP address (a logged host name) is its own key in every ip mode.
 */
export type KeySpec = "ip" | "ip24" | "ip64" | "user" | { readonly field: string };

/** The key names every format can supply (any other `--key` is a JSON field name). */
export const KEY_NAMES = ["ip", "ip24", "ip64", "user"] as const;

/** Reads a `--key` value: one of {@link KEY_NAMES}, or a JSON field name. */
export function parseKeySpec(text: string): KeySpec {
  if ((KEY_NAMES as readonly string[]).includes(text)) return text as (typeof KEY_NAMES)[number];
  return { field: text };
}

/** The text of a key spec, as the user wrote it. */
export function keySpecName(spec: KeySpec): string {
  return typeof spec === "string" ? spec : spec.field;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** `a.b.c.0/24` for a dotted-quad IPv4 address; undefined for anything else. */
export function ipv4Network24(host: string): string | undefined {
  const m = IPV4.exec(host);
  if (m === null || m.slice(1).some((octet) => Number(octet) > 255)) return undefined;
  return `${m[1]}.${m[2]}.${m[3]}.0/24`;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded), or undefined. */
function ipv6Groups(host: string): number[] | undefined {
  let text = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const zone = text.indexOf("%");
  if (zone !== -1) text = text.slice(0, zone);
  if (!text.includes(":")) return undefined;
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string): number[] | undefined => {
    if (part === "") return [];
    const groups: number[] = [];
    for (const g of part.split(":")) {
      if (g.includes(".")) {
        // A trailing dotted quad (::ffff:192.0.2.1) is two groups.
        const m = IPV4.exec(g);
        if (m === null) return undefined;
        const [a, b, c, d] = m.slice(1).map(Number) as [number, number, number, number];
        if (a > 255 || b > 255 || c > 255 || d > 255) return undefined;
        groups.push(a * 256 + b, c * 256 + d);
      } else if (/^[0-9a-fA-F]{1,4}$/.test(g)) {
        groups.push(Number.parseInt(g, 16));
      } else {
        return undefined;
      }
    }
    return groups;
  };
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}

/**
 * `g0:g1:g2:g3::/64` (lower-case hex, no leading zeros) for an IPv6 address; undefined
 * for anything else.
 */
export function ipv6Network64(host: string): string | undefined {
  const groups = ipv6Groups(host);
  if (groups === undefined) return undefined;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`;
}

/** A function from a record to its client key; undefined when the record has none. */
export type KeyOf = (record: LogRecord) => string | undefined;

/** The key function for `spec`. */
export function keyFunction(spec: KeySpec): KeyOf {
  switch (spec) {
    case "ip":
      return (r) => r.host;
    case "ip24":
      return (r) =>
        r.host === undefined
          ? undefined
          : (ipv4Network24(r.host) ?? ipv6Network64(r.host) ?? r.host);
    case "ip64":
      return (r) => (r.host === undefined ? undefined : (ipv6Network64(r.host) ?? r.host));
    case "user":
      return (r) => r.user;
    default: {
      const field = spec.field;
      return (r) => {
        const value = r.fields?.[field];
        if (typeof value === "string") return value === "" ? undefined : value;
        if (typeof value === "number" && Number.isFinite(value)) return String(value);
        return undefined;
      };
    }
  }
}
