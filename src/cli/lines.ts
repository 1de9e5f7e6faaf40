/**
 * Splits a byte stream into lines with a bound on the length of a line, so that memory
 * stays bounded whatever the input: a line longer than the bound is not collected but
 * counted and reported, and its bytes are dropped up to the next newline.
 *
 * `node:readline` cannot do this: it keeps the whole unterminated line in one string,
 * so a 700 MB line without a newline (or a small .gz that inflates to one) grows the
 * heap until V8 fails with "RangeError: Invalid string length".
 */
import { checkInteger } from "../core/errors.js";

/** The default bound of a line, in bytes (1 MiB): far above any real access-log line. */
export const DEFAULT_MAX_LINE_BYTES = 1_048_576;

/** The largest `maxLineBytes` accepted (256 MiB; V8 strings end a little above 512 M). */
export const MAX_LINE_BYTES_LIMIT = 268_435_456;

/** Bytes of an overlong line kept (decoded) to show its start in the report. */
const HEAD_BYTES = 640;

const NEWLINE = 10;
const CARRIAGE_RETURN = 13;

/** Where a {@link LineSplitter} delivers what it finds. */
export interface LineSink {
  /** A line (UTF-8 decoded), without its `\n` or `\r\n`. */
  line(text: string): void;
  /**
   * A line longer than `maxLineBytes`: its start (up to 640 bytes, decoded) and its
   * length in bytes, not counting the newline.
   */
  overlong(head: string, bytes: number): void;
}

/**
 * Cuts UTF-8 bytes into lines at `\n` (a `\r` before it is dropped too; a lone `\r` is part of the
 * line). The last line needs no newline; an input ending in a newline has no empty last line (as
 * `readline`). Memory held: at most `maxLineBytes` of the current line plus the chunk it is cut
 * from. Cutting at byte 10 is safe in UTF-8, where that byte occurs in no multi-byte character.
 */
export class LineSplitter {
  /** Byte slices of the current line that are not yet delivered (it spans chunks). */
  private parts: Buffer[] = [];
  /** Bytes of the current line seen so far, kept or dropped. */
  private lineBytes = 0;
  /** The first bytes of the current line once it is known to be overlong; undefined before. */
  private head: Buffer | undefined;

  /**
   * @param maxLineBytes The longest line delivered, in bytes without the newline.
   * @throws {RangeError} When it is not an integer from 1 to {@link MAX_LINE_BYTES_LIMIT}
   *   ({TypeError} when not a number).
   */
  constructor(
    readonly maxLineBytes: number,
    private readonly sink: LineSink,
  ) {
    checkInteger("LineSplitter", "maxLineBytes", maxLineBytes, 1, MAX_LINE_BYTES_LIMIT);
  }

  /** Feeds the next chunk (a string is taken as UTF-8 text). */
  push(chunk: Buffer | string): void {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    let start = 0;
    for (;;) {
      const newline = bytes.indexOf(NEWLINE, start);
      const end = newline === -1 ? bytes.length : newline;
      if (newline !== -1 && this.lineBytes === 0 && end - start <= this.maxLineBytes) {
        // The common case: a whole line inside this chunk, decoded without copying bytes.
        this.sink.line(decode(bytes, start, end));
      } else {
        this.take(bytes, start, end);
        if (newline === -1) return;
        this.endLine();
      }
      start = newline + 1;
    }
  }

  /** Ends the input: delivers a last line that had no newline. */
  end(): void {
    if (this.lineBytes > 0) this.endLine();
  }

  private take(bytes: Buffer, start: number, end: number): void {
    const n = end - start;
    if (n === 0) return;
    const held = this.head === undefined ? this.lineBytes : this.head.length;
    this.lineBytes += n;
    if (this.head !== undefined && held >= HEAD_BYTES) return; // overlong: drop to the newline
    const slice = bytes.subarray(start, end);
    if (this.lineBytes > this.maxLineBytes) {
      // Overlong (from now or before): keep only the first HEAD_BYTES for the report.
      // Buffer.concat zero-fills up to the length given, so never ask for more than is held.
      const parts = this.head === undefined ? [...this.parts, slice] : [this.head, slice];
      this.head = Buffer.concat(parts, Math.min(HEAD_BYTES, held + n));
      this.parts = [];
      return;
    }
    this.parts.push(slice);
  }

  private endLine(): void {
    if (this.head !== undefined) {
      this.sink.overlong(this.head.toString("utf8"), this.lineBytes);
    } else {
      const parts = this.parts;
      const whole = parts.length === 1 ? parts[0]! : Buffer.concat(parts, this.lineBytes);
      this.sink.line(decode(whole, 0, whole.length));
    }
    this.parts = [];
    this.lineBytes = 0;
    this.head = undefined;
  }
}

/** `bytes[start, end)` as UTF-8 text, without a final `\r`. */
function decode(bytes: Buffer, start: number, end: number): string {
  const last = end > start && bytes[end - 1] === CARRIAGE_RETURN ? end - 1 : end;
  return bytes.toString("utf8", start, last);
}
