import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { luaFloats } from "../../src/redis/lua/common.js";
import { replyArray, replyFloat } from "../../src/redis/reply.js";
import { runScript, Script } from "../../src/redis/script.js";
import { ADAPTERS, type TestClient } from "../support/redis-clients.js";
import { useRedis } from "../support/redis-server.js";
import { floatItems } from "../support/reply-floats.js";

// The hot decision scripts send each float as two small integers (luaFloats); this runs the
// real Lua on the server and reads the reply through each client library, for doubles that
// cover every exponent, both signs, the integers ioredis's decoder rounds (near 2^53, which
// a mantissa scaled by 2^53 would be) and the values the scripts send (epoch ms with
// microseconds, tokens a hair from an integer).

/** Replies `{1, x1, x2, x3, serverNow}` for three floats sent as `%.17g` text. */
const ECHO = new Script(
  "float-echo",
  `local serverNow = 0
local a, b, c = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
${luaFloats(["1"], ["a", "b", "c"])}`,
);

const EDGES = [
  0,
  1,
  -1,
  0.5,
  1048576 - 1e-9,
  2 ** 53 - 1,
  2 ** 53,
  -(2 ** 53 - 1),
  9007199254740983,
  1764633600123.456,
  -1e-9,
  5e-324,
  2.2250738585072014e-308,
  1.7976931348623157e308,
  -1.7976931348623157e308,
  2 ** 1023,
  Math.PI,
];

const redis = useRedis();
describe.skipIf(!redis.available).each(ADAPTERS)("floats in replies through $name", (adapter) => {
  let c: TestClient;
  beforeAll(async () => {
    c = await adapter.connect(redis.url());
  });
  afterAll(async () => {
    await c?.close();
  });

  async function echo(values: readonly [number, number, number]): Promise<number[]> {
    const args = values.map((x) => x.toPrecision(17));
    const reply = replyArray(await runScript(c.client, ECHO, [], args), 8);
    return [replyFloat(reply, 1), replyFloat(reply, 3), replyFloat(reply, 5)];
  }

  test("edge doubles come back bit for bit", async () => {
    for (let i = 0; i < EDGES.length; i += 3) {
      const values = [EDGES[i]!, EDGES[i + 1] ?? 0, EDGES[i + 2] ?? 0] as const;
      expect(await echo(values), `values ${values.join(", ")}`).toEqual(values);
    }
  });

  test("any finite double comes back bit for bit", async () => {
    const double = fc.double({ noNaN: true, noDefaultInfinity: true });
    await fc.assert(
      fc.asyncProperty(fc.tuple(double, double, double), async (values) => {
        // -0 is sent as 0 (Redis replies integers), as the scripts always did.
        const expected = values.map((x) => (x === 0 ? 0 : x));
        expect(await echo(values)).toEqual(expected);
      }),
      { seed: 20261202, numRuns: 200 },
    );
  });

  test("a non-finite float is an error reply, never a number", async () => {
    await expect(
      runScript(c.client, ECHO, [], ["1", "inf", "0"]).then((r) => replyArray(r, 8)),
    ).rejects.toThrow("tollgate: a reply number is not finite");
  });
});

describe("replyFloat", () => {
  test("reads the test helper's encoding of any double back (the helper mirrors luaFloats)", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        expect(replyFloat(floatItems(x), 0)).toBe(x === 0 ? 0 : x);
      }),
      { seed: 20261202 },
    );
  });

  test.each([
    { name: "a mantissa part out of range", items: [1100, 67108864] },
    { name: "a negative mantissa part", items: [1100, -1] },
    { name: "a fraction", items: [1100.5, 0] },
    { name: "text that is not a number", items: ["x", 0] },
  ])("rejects $name with a TypeError", ({ items }) => {
    expect(() => replyFloat(items, 0)).toThrow(TypeError);
  });
});
