import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { DEFAULT_MAX_LINE_BYTES, LineSplitter } from "../../src/cli/lines.js";
import { singlePolicy } from "../../src/cli/policy.js";
import { replay } from "../../src/cli/replay.js";

type Event = string | { overlong: string; bytes: number };

/** Feeds `chunks` to a splitter and returns what it delivered. */
function split(chunks: readonly (string | Buffer)[], maxLineBytes = 1024): Event[] {
  const events: Event[] = [];
  const splitter = new LineSplitter(maxLineBytes, {
    line: (text) => events.push(text),
    overlong: (head, bytes) => events.push({ overlong: head, bytes }),
  });
  for (const chunk of chunks) splitter.push(chunk);
  splitter.end();
  return events;
}

const e = Buffer.from("é", "utf8"); // two bytes: c3 a9

describe("LineSplitter", () => {
  const steps: { name: string; chunks: (string | Buffer)[]; max?: number; want: Event[] }[] = [
    { name: "no input", chunks: [], want: [] },
    { name: "an empty chunk", chunks: [""], want: [] },
    { name: "last line without a newline", chunks: ["a\nb"], want: ["a", "b"] },
    { name: "a final newline makes no empty line", chunks: ["a\nb\n"], want: ["a", "b"] },
    { name: "empty lines are lines", chunks: ["\n\na\n\n"], want: ["", "", "a", ""] },
    { name: "CRLF", chunks: ["a\r\nb\r\n"], want: ["a", "b"] },
    { name: "CRLF split between chunks", chunks: ["a\r", "\nb"], want: ["a", "b"] },
    { name: "a lone CR stays in the line", chunks: ["a\rb\n"], want: ["a\rb"] },
    { name: "a line over three chunks", chunks: ["ab", "cd", "ef\ng"], want: ["abcdef", "g"] },
    { name: "newline alone in a chunk", chunks: ["abc", "\n", "d"], want: ["abc", "d"] },
    {
      name: "a UTF-8 character split between chunks",
      chunks: [Buffer.concat([Buffer.from("caf"), e.subarray(0, 1)]), e.subarray(1), "\n"],
      want: ["café"],
    },
    { name: "exactly max bytes is delivered", chunks: ["abcd\n"], max: 4, want: ["abcd"] },
    {
      name: "max + 1 bytes is overlong",
      chunks: ["abcde\nf\n"],
      max: 4,
      want: [{ overlong: "abcde", bytes: 5 }, "f"],
    },
    {
      name: "max counted over chunks",
      chunks: ["ab", "cd", "e\nf"],
      max: 4,
      want: [{ overlong: "abcde", bytes: 5 }, "f"],
    },
    {
      name: "overlong last line without a newline",
      chunks: ["ab", "cdefg"],
      max: 4,
      want: [{ overlong: "abcdefg", bytes: 7 }],
    },
    {
      name: "a CR counts towards the bound",
      chunks: ["abcd\r\n"],
      max: 4,
      want: [{ overlong: "abcd\r", bytes: 5 }],
    },
  ];
  test.each(steps.map((s, i) => ({ ...s, i })))("step $i: $name", ({ i, chunks, max, want }) => {
    expect(split(chunks, max), `step ${i}`).toEqual(want);
  });

  test("the head of an overlong line is its first 640 bytes", () => {
    const [event] = split(["x".repeat(5000), "\n"], 1000);
    expect(event).toEqual({ overlong: "x".repeat(640), bytes: 5000 });
  });

  test.each([
    { name: "0", value: 0 },
    { name: "fraction", value: 1.5 },
    { name: "NaN", value: Number.NaN },
    { name: "above 256 MiB", value: 268_435_457 },
  ])("maxLineBytes $name is a RangeError", ({ value }) => {
    const make = () => new LineSplitter(value, { line() {}, overlong() {} });
    expect(make).toThrow(RangeError);
    expect(make).toThrow(
      `LineSplitter: maxLineBytes must be an integer from 1 to 268435456, got ${value}`,
    );
  });

  test("matches splitting the whole text, for any chunking (property)", () => {
    // A naive model: the whole text split at \n, no empty last line, CR before LF dropped,
    // lines longer than max reported instead.
    const model = (text: string, max: number): Event[] => {
      const lines = text.split("\n");
      if (lines.at(-1) === "") lines.pop();
      return lines.map((line) =>
        line.length > max
          ? { overlong: line.slice(0, 640), bytes: line.length }
          : line.endsWith("\r")
            ? line.slice(0, -1)
            : line,
      );
    };
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "b", "\n", "\r"), maxLength: 60 }),
        fc.array(fc.nat({ max: 60 }), { maxLength: 8 }),
        fc.integer({ min: 1, max: 8 }),
        (text, cuts, max) => {
          const at = [...new Set(cuts.filter((c) => c <= text.length))].sort((a, b) => a - b);
          const chunks = [0, ...at].map((from, i) => text.slice(from, at[i] ?? text.length));
          expect(split(chunks, max)).toEqual(model(text, max));
        },
      ),
    );
  });
});

describe("replay with a huge line (regression: readline grew one string until RangeError: Invalid string length)", () => {
  test("a 50 MB line without a newline is skipped, memory stays bounded, the next line parses", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const CHUNK = 64 * 1024;
    const TOTAL = 50 * 1024 * 1024;
    const normal = `192.0.2.7 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "-"\n`;
    let peak = 0;
    let sent = 0;
    gc();
    const base = process.memoryUsage();
    const input = new Readable({
      read() {
        if (sent < TOTAL) {
          sent += CHUNK;
          if (sent % (4 * 1024 * 1024) === 0) {
            gc();
            const now = process.memoryUsage();
            const grown = now.heapUsed - base.heapUsed + (now.arrayBuffers - base.arrayBuffers);
            if (grown > peak) peak = grown;
          }
          this.push(Buffer.alloc(CHUNK, 0x61)); // "aaaa…", no newline
        } else {
          this.push(`\n${normal}`);
          this.push(null);
        }
      },
    });
    const report = await replay(input, {
      policies: [singlePolicy("token-bucket", { capacity: 1, refillPerSecond: 1 })],
    });
    // The cap (1 MiB) plus a few chunks in flight; readline held the whole 50 MB.
    expect(peak).toBeLessThan(8 * 1024 * 1024);
    expect(report.lines).toMatchObject({ read: 2, parsed: 1, skipped: 1 });
    expect(report.format).toBe("combined");
    expect(report.firstMs).toBe(Date.UTC(2015, 4, 17, 10, 5, 3));
    expect(report.results[0]).toMatchObject({ allowed: 1, denied: 0 });
    expect(report.lines.samples).toEqual([
      {
        line: 1,
        reason: `line of ${TOTAL} bytes, longer than ${DEFAULT_MAX_LINE_BYTES} (--max-line-bytes)`,
        text: "a".repeat(160),
      },
    ]);
  });
});
