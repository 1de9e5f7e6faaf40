import { describe, mustBe } from "../core/errors.js";

/**
 * Snapshots: a limiter's state (its kernel slot) as plain, JSON-safe data, so that it can
 * leave the process and come back (a file, a Durable Object's storage, a graceful restart).
 * docs/semantics.md#snapshots.
 * @module
 */

/** The version of the snapshot format this library writes for a snapshot without blocks. */
export const SNAPSHOT_VERSION = 1;
/**
 * The version of a `KeyedLimiter` snapshot that carries blocks: version 1 and its block
 * fields. A reader of version 1 alone refuses it rather than lift the bans it holds.
 */
export const SNAPSHOT_BLOCKS_VERSION = 2;

/**
 * A number in a snapshot: a finite number as it is; `Infinity`, `-Infinity` (an unused
 * window's end, a full bucket's anchor) as the strings `"Infinity"` and `"-Infinity"`, which
 * JSON cannot hold as numbers.
 */
export type SnapshotNumber = number | "Infinity" | "-Infinity";

/** A snapshot's options: the algorithm's, by name; an `allOf`'s parts', in order. */
export type SnapshotOptions =
  | Readonly<Record<string, number>>
  | readonly Readonly<Record<string, number>>[];

/**
 * What every snapshot carries: which algorithm and options wrote it, and the latest time the
 * limiter had seen. A restore refuses one whose `version`, `algorithm` or `options` differ.
 */
export interface SnapshotHeader {
  /** The snapshot format's version: 1, or 2 for a `KeyedLimiter` snapshot carrying blocks. */
  readonly version: number;
  /** The catalog id of the algorithm (`"token-bucket"`, ...), or `"all-of"`. */
  readonly algorithm: string;
  /**
   * The options that decide (not the clock), in the constructor's order: the snapshot's
   * fingerprint, with `version` and `algorithm`. An `allOf`'s are its parts', in order.
   */
  readonly options: SnapshotOptions;
  /** The latest time the limiter had seen, in ms on its clock. */
  readonly latestMs: SnapshotNumber;
}

/**
 * A snapshot of one limiter, or one key of a `KeyedLimiter`: the header and its kernel
 * slot's state as plain numbers (a log's entries; an `allOf`'s parts, in order).
 */
export interface LimiterSnapshot extends SnapshotHeader {
  readonly state: readonly SnapshotNumber[];
}

/**
 * A snapshot of one key of a `KeyedLimiter` (`snapshot(key)`): a {@link LimiterSnapshot},
 * and the key's block when it is blocked.
 */
export interface KeySnapshot extends LimiterSnapshot {
  /**
   * When the key's block ends, in ms on the registry's clock (as `latestMs`), after
   * `latestMs`; absent when the key is not blocked (the snapshot is then of version 1).
   */
  readonly blockedUntilMs?: SnapshotNumber;
}

/**
 * A snapshot of every kept key of a `KeyedLimiter` (`snapshotAll`), for a graceful restart:
 * one header, the keys, and their states one after another.
 */
export interface RegistrySnapshot extends LimiterSnapshot {
  /** The kept keys, in the registry's order. */
  readonly keys: readonly string[];
  /**
   * Numbers per key in `state`; 0 when a key's state varies in size (a log), each key's
   * numbers then following their count.
   */
  readonly width: number;
  /**
   * The trace table of keys pushed out while in use, when any entry still applies: its
   * hash key (two 32-bit words), when its last entry stops applying, and its numbers. Restored only into a
   * registry with the same `maxKeys` and `maxBytes` that has pushed out no key yet.
   */
  readonly trace?: {
    readonly seed: readonly [number, number];
    readonly untilMs: SnapshotNumber;
    readonly entries: readonly SnapshotNumber[];
  };
  /**
   * The blocked keys and when each block ends, in ms on the registry's clock (as `latestMs`), each
   * after `latestMs`; absent when no key is blocked (the snapshot is then of version 1).
   */
  readonly blocks?: {
    readonly keys: readonly string[];
    readonly untilMs: readonly SnapshotNumber[];
  };
}

/** `x` as a {@link SnapshotNumber}. @internal */
export function encodeNumber(x: number): SnapshotNumber {
  if (x - x === 0) return x;
  if (x === Number.POSITIVE_INFINITY) return "Infinity";
  if (x === Number.NEGATIVE_INFINITY) return "-Infinity";
  throw new RangeError(`snapshot: a state holds NaN, which no snapshot can carry`);
}

/**
 * A {@link SnapshotNumber} as a number.
 * @throws {TypeError} For anything else, naming it.
 * @internal
 */
export function decodeNumber(where: string, value: unknown): number {
  if (typeof value === "number" && value - value === 0) return value;
  if (value === "Infinity") return Number.POSITIVE_INFINITY;
  if (value === "-Infinity") return Number.NEGATIVE_INFINITY;
  throw new TypeError(
    `${where}: a snapshot number must be a finite number, "Infinity" or "-Infinity", got ${describe(value)}`,
  );
}

/** `values` encoded. @internal */
export function encodeState(values: readonly number[]): SnapshotNumber[] {
  return values.map(encodeNumber);
}

/**
 * Which snapshot a restore takes: `"one"` for `restore` (one limiter, or one key of a
 * `KeyedLimiter`: what `snapshot()` returns), `"all"` for `KeyedLimiter.restoreAll` (what
 * `snapshotAll()` returns).
 */
type SnapshotKind = "one" | "all";

/** The fields every snapshot has, in the order they are written. */
const FIELDS = ["version", "algorithm", "options", "latestMs", "state"] as const;

/**
 * Checks that `snapshot` was written by a limiter of `algorithm` with `options` and a format
 * version this library reads, and returns its state decoded. Blocks (version 2) only where
 * `keepsBlocks` (a `KeyedLimiter`, which decodes them itself). A snapshot of the other kind (a
 * `snapshotAll()` given to `restore`, one key's given to `restoreAll`), a JSON string, and
 * an object missing the snapshot's fields are each refused with what to call or pass
 * instead, and what a snapshot looks like.
 * @throws {TypeError} For something that is not a snapshot, or one of another version,
 *   algorithm or options, naming what differs, or one carrying blocks where none is kept.
 * @internal
 */
export function checkSnapshot(
  where: string,
  snapshot: unknown,
  algorithm: string,
  options: SnapshotOptions,
  kind: SnapshotKind = "one",
  keepsBlocks = false,
): { state: number[]; latestMs: number } {
  const shape = () => snapshotShape(algorithm, options, kind);
  const expected = `${where}: snapshot must be the object ${kind === "all" ? "snapshotAll()" : "snapshot()"} returned`;
  if (typeof snapshot === "string") {
    throw new TypeError(
      `${expected}, got a string; if you stored it as JSON, pass JSON.parse(text). A snapshot looks like ${shape()}`,
    );
  }
  if (typeof snapshot !== "object" || snapshot === null || Array.isArray(snapshot)) {
    throw new TypeError(`${expected}, ${shape()}, got ${describe(snapshot)}`);
  }
  const s = snapshot as Partial<RegistrySnapshot>;
  const whole = Array.isArray(s.keys);
  if (kind === "one" && whole) {
    const keyed = where.startsWith("KeyedLimiter");
    throw new TypeError(
      `${where}: this is a snapshot of a whole KeyedLimiter (snapshotAll(), ${s.keys!.length} key${s.keys!.length === 1 ? "" : "s"}); restore it with ${keyed ? "restoreAll(snapshot)" : "keyedLimiter.restoreAll(snapshot)"}${keyed ? ", or pass one key's snapshot(key) here" : ""}`,
    );
  }
  if (kind === "all" && !whole && FIELDS.every((f) => f in s)) {
    throw new TypeError(
      `${where}: this is a snapshot of one limiter or one key (snapshot() or snapshot(key), it has no keys); restore it with restore(key, snapshot), or pass what snapshotAll() returned here`,
    );
  }
  const missing: string[] = FIELDS.filter((f) => s[f] === undefined);
  if (kind === "all" && !whole) missing.push("keys");
  if (missing.length > 0 && (missing.length > 1 || missing[0] === "version")) {
    throw new TypeError(
      `${expected}, ${shape()}; got ${describe(snapshot)}, which has no ${missing.join(", ")}`,
    );
  }
  // The header against the limiter restoring it: the first thing that differs.
  if (s.version !== SNAPSHOT_VERSION && s.version !== SNAPSHOT_BLOCKS_VERSION) {
    throw new TypeError(
      `${where}: the snapshot is of format version ${describe(s.version)}, this library reads versions ${SNAPSHOT_VERSION} and ${SNAPSHOT_BLOCKS_VERSION}`,
    );
  }
  if (s.algorithm !== algorithm) {
    throw new TypeError(
      `${where}: the snapshot is of algorithm ${typeof s.algorithm === "string" ? JSON.stringify(s.algorithm) : describe(s.algorithm)}, this limiter is ${JSON.stringify(algorithm)}`,
    );
  }
  const differs = optionDifference(s.options, options, "");
  if (differs !== undefined) {
    throw new TypeError(`${where}: the snapshot is of another configuration: ${differs}`);
  }
  const blocks = "blockedUntilMs" in s || "blocks" in s;
  if (!keepsBlocks && (blocks || s.version === SNAPSHOT_BLOCKS_VERSION)) {
    throw new TypeError(
      `${where}: the snapshot carries blocks (format version 2), which only a KeyedLimiter keeps: restore it into one`,
    );
  }
  if (blocks && s.version !== SNAPSHOT_BLOCKS_VERSION) {
    throw new TypeError(
      `${where}: the snapshot is of format version 1, which carries no blocks, yet holds some`,
    );
  }
  if (!Array.isArray(s.state))
    throw mustBe(where, "snapshot.state", "an array", s.state, TypeError);
  return {
    // Array.from visits a sparse array's holes (map skips them, leaving NaN in the state).
    state: Array.from(s.state as unknown[], (v) => decodeNumber(where, v)),
    latestMs: decodeNumber(where, s.latestMs),
  };
}

/**
 * Runs `probe`, a kernel's check of a snapshot's state (its `loadSlot` into scratch space),
 * and names the method called in what it throws: a kernel knows the state it was given
 * (`snapshot.state[0] is a count, ...`), not whose `restore` gave it.
 * @throws {TypeError} {RangeError} As `probe`, the message led by `where`.
 * @internal
 */
export function checkStateAt(where: string, probe: () => void): void {
  try {
    probe();
  } catch (error) {
    if (error instanceof RangeError) throw new RangeError(`${where}: ${error.message}`);
    if (error instanceof TypeError) throw new TypeError(`${where}: ${error.message}`);
    throw error;
  }
}

/** What a snapshot this limiter reads looks like, in one line of text. */
function snapshotShape(algorithm: string, options: SnapshotOptions, kind: SnapshotKind): string {
  const head = `{ version: ${SNAPSHOT_VERSION}, algorithm: ${JSON.stringify(algorithm)}, options: ${JSON.stringify(options)}, latestMs: <ms>, `;
  return kind === "all"
    ? `${head}keys: [<key>, ...], width: <numbers per key>, state: [<numbers>] }`
    : `${head}state: [<numbers>] }`;
}

/**
 * A block's end in a snapshot taken at `latestMs`: a snapshot holds only blocks in force,
 * so a finite time after `latestMs`. A time at or before it, or an infinite one, was not
 * written by a registry (a tampered snapshot) and is refused.
 * @throws {TypeError} For a value that is not a snapshot number. {RangeError} Out of range.
 * @internal
 */
export function decodeBlockEnd(
  where: string,
  name: string,
  value: unknown,
  latestMs: number,
): number {
  const number = typeof value === "number" && !Number.isNaN(value);
  if (!number && value !== "Infinity" && value !== "-Infinity") {
    throw new TypeError(
      `${where}: ${name} is when a block ends, which must be a time in ms (a number), got ${describe(value)}`,
    );
  }
  const untilMs = decodeNumber(where, value);
  if (!(untilMs > latestMs && untilMs - untilMs === 0)) {
    throw new RangeError(
      `${where}: ${name} is when a block ends, which must be a finite time after latestMs (${latestMs}), got ${untilMs}`,
    );
  }
  return untilMs;
}

/** The first option that differs between a snapshot's and a limiter's, as words; else undefined. */
function optionDifference(
  got: unknown,
  want: SnapshotHeader["options"],
  at: string,
): string | undefined {
  if (Array.isArray(want)) {
    if (!Array.isArray(got) || got.length !== want.length) {
      return `${at || "options"} has ${Array.isArray(got) ? got.length : describe(got)} parts, this limiter ${want.length}`;
    }
    for (let i = 0; i < want.length; i++) {
      const d = optionDifference(got[i], want[i]!, `${at}part ${i} `);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  if (typeof got !== "object" || got === null || Array.isArray(got)) {
    return `${at}options ${describe(got)}, this limiter's are ${JSON.stringify(want)}`;
  }
  const mine = want as Readonly<Record<string, number>>;
  const theirs = got as Readonly<Record<string, unknown>>;
  for (const name of new Set([...Object.keys(mine), ...Object.keys(theirs)])) {
    if (!Object.is(theirs[name], mine[name])) {
      return `${at}${name} is ${describe(theirs[name])} in the snapshot, ${describe(mine[name])} here`;
    }
  }
  return undefined;
}
