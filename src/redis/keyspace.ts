import { mustBe } from "../core/errors.js";

/**
 * The key layout of the Redis limiters: `<prefix><keyspace>:<key>`, where the keyspace is,
 * unless pinned, a fingerprint of the algorithm and the options that define its state.
 * So two limiters share keys exactly when they would read those keys the same way.
 * @module
 */

/**
 * The version of the state layout each algorithm's scripts keep under a key, part of every
 * fingerprint: a release that changes what a script stores changes it, so new code never reads old
 * state it would misread. 1 at first; the sliding log's list became a hash of chunks (2), its meta
 * may carry a block (3); the buckets store the capacity they were counted with, the fixed window
 * its end, the counter its window length, and each may carry a block after its state (2).
 */
const STATE_LAYOUT_VERSIONS: Readonly<Record<string, number>> = {
  "sliding-window-log": 3,
  "token-bucket": 2,
  "leaky-bucket": 2,
  "fixed-window": 2,
  "sliding-window-counter": 2,
};

/** What a limiter's fingerprint is computed from. */
export interface KeyspaceSource {
  /** The algorithm, `token-bucket`, `leaky-bucket`, `fixed-window`, `sliding-window-log`, `sliding-window-counter`. */
  readonly algorithm: string;
  /** The options that define the state, by name (`capacity`, `refillPerSecond`; `limit`, `windowMs`). */
  readonly state: Readonly<Record<string, number>>;
  /** Whose clock stamps the state: Redis's `TIME` or the caller's explicit `clock`. */
  readonly clock: "server" | "caller";
}

/**
 * The canonical text a fingerprint hashes: `tollgate/2 token-bucket capacity=10
 * refillPerSecond=5 clock=server` (the number is the state layout's version). Numbers are
 * written as JavaScript writes them (the shortest text that reads back as the same double),
 * so every runtime and process that was given the same numbers writes the same text; the
 * options appear in a fixed order.
 */
export function canonicalText(source: KeyspaceSource): string {
  const state = Object.entries(source.state).map(([name, value]) => `${name}=${String(value)}`);
  return [
    `tollgate/${STATE_LAYOUT_VERSIONS[source.algorithm] ?? 1}`,
    source.algorithm,
    ...state,
    `clock=${source.clock}`,
  ].join(" ");
}

/**
 * 32-bit FNV-1a of the UTF-8 bytes of `text`, as 8 lowercase hex digits. Not a secret
 * and not collision-proof against a chooser: it only keeps limiters with different
 * options apart by accident (two given fingerprints collide with probability 2^-32).
 * Known value: `fnv1a32("")` is `811c9dc5`, `fnv1a32("a")` is `e40c292c`.
 */
export function fnv1a32(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, "0");
}

/** The default keyspace of a limiter: the fingerprint of {@link canonicalText}. */
export function fingerprint(source: KeyspaceSource): string {
  return fnv1a32(canonicalText(source));
}

/**
 * Checks the `keyspace` option: undefined means the fingerprint; otherwise a non-empty
 * string, used as given.
 * @throws {TypeError} For a non-string; {RangeError} for the empty string.
 */
export function checkKeyspace(where: string, value: unknown, source: KeyspaceSource): string {
  if (value === undefined) return fingerprint(source);
  if (typeof value !== "string") {
    throw mustBe(where, "keyspace", "a non-empty string", value, TypeError);
  }
  if (value === "") {
    throw new RangeError(`${where}: keyspace must be a non-empty string, got ""`);
  }
  return value;
}
