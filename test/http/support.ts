import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { describe, expect, test, vi } from "vitest";
import { FixedWindow } from "../../src/algorithms/fixed-window.js";
import { LeakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import type { Decision } from "../../src/core/limiter.js";
import type { CommonRateLimitOptions } from "../../src/http/core.js";
import { QUOTA_EXCEEDED_TYPE } from "../../src/http/headers.js";
import { MALFORMED_FORWARDED_KEY } from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";

/**
 * A KeyedLimiter of TokenBuckets on a manual clock that also records the keys and costs it
 * was asked about, so tests can assert which client key the middleware computed.
 */
export class RecordingLimiter {
  readonly keyed: KeyedLimiter;
  readonly calls: Array<[key: string, cost: number | undefined]> = [];

  constructor(capacity: number, refillPerSecond: number, clock: ManualClock) {
    this.keyed = new KeyedLimiter(new TokenBucket({ capacity, refillPerSecond, clock }));
  }

  consume(key: string, cost?: number): Decision {
    this.calls.push([key, cost]);
    return this.keyed.consume(key, cost);
  }
}

/** Starts `server` on an ephemeral port of `host` and returns its base URL. */
export async function listen(server: Server, host = "127.0.0.1"): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** Closes `server`, dropping idle keep-alive connections so the test does not wait. */
export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/**
 * Serves a fetch handler with @hono/node-server on an ephemeral port of 127.0.0.1 (it
 * passes `{ incoming, outgoing }` as the handler's second argument), records the server in
 * `servers` for {@link closeServed}, and gives its base URL.
 */
export async function serveFetch(
  fetch: Parameters<typeof serve>[0]["fetch"],
  servers: ServerType[],
): Promise<string> {
  const info = await new Promise<AddressInfo>((resolve) => {
    servers.push(serve({ fetch, port: 0, hostname: "127.0.0.1" }, resolve));
  });
  return `http://127.0.0.1:${info.port}`;
}

/** Closes a server started by {@link serveFetch}, dropping idle keep-alive connections. */
export function closeServed(server: ServerType): Promise<void> {
  return new Promise<void>((resolve) => {
    (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    server.close(() => resolve());
  });
}

/**
 * The step table every real-server adapter test starts with: capacity 2, 1 token per
 * second, `windowSeconds: 2`; two allowed requests answered "ok" with the headers, a 429
 * at 500 ms with `Retry-After` and the `quota-exceeded` body (sent as `contentType`),
 * allowed again at 1 s, each counted under the peer 127.0.0.1. `start` serves the
 * middleware made from the options on 127.0.0.1 and gives its URL.
 */
export async function expectQuotaSteps(
  start: (options: CommonRateLimitOptions) => Promise<string>,
  contentType: string,
): Promise<void> {
  const clock = manualClock();
  const limiter = new RecordingLimiter(2, 1, clock);
  const url = await start({ limiter, windowSeconds: 2 });
  // at ms, status, RateLimit
  const steps = [
    [0, 200, '"default";r=1;t=1'],
    [0, 200, '"default";r=0;t=2'],
    [500, 429, '"default";r=0;t=1'],
    [1000, 200, '"default";r=0;t=2'],
  ] as const;
  for (const [i, [atMs, status, rate]] of steps.entries()) {
    clock.set(atMs);
    const response = await fetch(url);
    const body = await response.text();
    expect(response.status, `step ${i}`).toBe(status);
    expect(response.headers.get("ratelimit"), `step ${i}`).toBe(rate);
    expect(response.headers.get("ratelimit-policy"), `step ${i}`).toBe('"default";q=2;w=2');
    if (status === 429) {
      expect(response.headers.get("retry-after"), `step ${i}`).toBe("1");
      expect(response.headers.get("content-type")).toBe(contentType);
      expect(JSON.parse(body)).toStrictEqual({
        type: QUOTA_EXCEEDED_TYPE,
        title: "Request cannot be satisfied as assigned quota has been exceeded",
        status: 429,
        detail: "Quota exceeded; retry after 1 second.",
        "violated-policies": ["default"],
      });
    } else {
      expect(body, `step ${i}`).toBe("ok");
    }
  }
  expect(limiter.calls.map(([key]) => key)).toStrictEqual(steps.map(() => "127.0.0.1"));
}

/** The rate-limit headers of a response, by lower-case name, for compact assertions. */
export function limitHeaders(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") {
      out[name] = value;
    }
  });
  return out;
}

/**
 * A wall clock reading 2026-01-01T00:00:00.250Z, for `X-RateLimit-Reset`: a reset `t` of
 * 1 s is then the Unix time {@link RESET_AT_T1}.
 */
export const WALL_MS = 1_767_225_600_250;

/** `X-RateLimit-Reset` for a moment 1 s after {@link WALL_MS}: floor((WALL_MS + 1000) / 1000). */
export const RESET_AT_T1 = "1767225601";

/**
 * The end-to-end checks of the header and client-key wiring that every adapter shares,
 * over real HTTP on loopback: `start` serves the middleware made from `options` (answering
 * "ok") on 127.0.0.1 and gives its URL; a factory that refuses the options rejects.
 * `where` is the factory's name, as in its messages; `name` names the suite (the
 * framework, where one factory serves several).
 */
export function describeWiring(
  where: string,
  start: (options: CommonRateLimitOptions) => Promise<string>,
  name = where,
): void {
  describe(`${name}: headers and client keys, wired end to end`, () => {
    test("legacy X-RateLimit-Reset over HTTP is a Unix time", async () => {
      const clock = manualClock();
      const url = await start({
        limiter: new RecordingLimiter(2, 1, clock),
        headers: "legacy",
        wallClock: () => WALL_MS,
      });
      // allowed, t = 1 -> floor(1767225600.25 + 1)
      expect(limitHeaders(await fetch(url))).toStrictEqual({
        "x-ratelimit-limit": "2",
        "x-ratelimit-remaining": "1",
        "x-ratelimit-reset": RESET_AT_T1,
      });
      await fetch(url);
      const denied = await fetch(url); // denied, t = Retry-After = 1
      expect(denied.status).toBe(429);
      expect(limitHeaders(denied)).toStrictEqual({
        "x-ratelimit-limit": "2",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": RESET_AT_T1,
        "retry-after": "1",
      });
    });

    test("t on an allowed bucket response is the time to the next unit, not until full", async () => {
      // TokenBucket capacity 3 at 1/s: each response says one more unit comes in 1 s. It
      // said t=1, 2, 3 (the time until full), then t=1 on the 429 that followed t=3.
      const clock = manualClock();
      const limiter = new KeyedLimiter(new TokenBucket({ capacity: 3, refillPerSecond: 1, clock }));
      const url = await start({ limiter, policy: "demo" });
      const seen: Array<[number, string | null]> = [];
      for (let i = 0; i < 4; i++) {
        const response = await fetch(url);
        seen.push([response.status, response.headers.get("ratelimit")]);
      }
      expect(seen).toStrictEqual([
        [200, '"demo";r=2;t=1'],
        [200, '"demo";r=1;t=1'],
        [200, '"demo";r=0;t=1'],
        [429, '"demo";r=0;t=1'],
      ]);
      clock.set(500); // half a unit back: the next one is 0.5 s away, said as 1
      expect((await fetch(url)).headers.get("ratelimit")).toBe('"demo";r=0;t=1');
      clock.set(2500); // 2.5 units back: the third in 0.5 s
      const response = await fetch(url);
      expect(response.headers.get("ratelimit")).toBe('"demo";r=1;t=1');
      // A LeakyBucket, and a reconfigured rate, read at response time.
      limiter.reconfigure({ refillPerSecond: 0.25 });
      clock.set(2500);
      expect((await fetch(url)).headers.get("ratelimit")).toBe('"demo";r=0;t=2');
      const leaky = new KeyedLimiter(new LeakyBucket({ capacity: 2, leakPerSecond: 0.5, clock }));
      const leakyUrl = await start({ limiter: leaky, policy: "demo" });
      expect((await fetch(leakyUrl)).headers.get("ratelimit")).toBe('"demo";r=1;t=2');
    });

    test("w= follows reconfigure({ windowMs }) of the limiter: the next response says w=30", async () => {
      const limiter = new KeyedLimiter(
        new FixedWindow({ limit: 3, windowMs: 60_000, clock: manualClock() }),
      );
      const url = await start({ limiter, policy: "api" });
      expect((await fetch(url)).headers.get("ratelimit-policy")).toBe('"api";q=3;w=60');
      limiter.reconfigure({ windowMs: 30_000 });
      expect((await fetch(url)).headers.get("ratelimit-policy")).toBe('"api";q=3;w=30');
      limiter.reconfigure({ limit: 5, windowMs: 1500 }); // not whole seconds: no w at all
      expect((await fetch(url)).headers.get("ratelimit-policy")).toBe('"api";q=5');
      // One unkeyed window, agreeing windowSeconds given at creation: the live one still wins.
      const global = new FixedWindow({ limit: 3, windowMs: 60_000, clock: manualClock() });
      const globalUrl = await start({ limiter: global, policy: "api", windowSeconds: 60 });
      global.reconfigure({ windowMs: 30_000 });
      expect((await fetch(globalUrl)).headers.get("ratelimit-policy")).toBe('"api";q=3;w=30');
    });

    test("a never-passing limit answered 429 without Retry-After: now 403 (spent) or 413 (cost above capacity)", async () => {
      // ky, got, undici's RetryAgent and axios-retry all retried that 429 (axios-retry at
      // once); none of them retries a 403 or 413 that has no Retry-After.
      const clock = manualClock();
      const spent = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 0, clock }));
      const url = await start({ limiter: spent, policy: "trial", headers: "both" });
      expect((await fetch(url)).status).toBe(200);
      const refused = await fetch(url);
      expect(refused.status).toBe(403);
      // Neither X-RateLimit-Remaining: 0 nor a reset: Octokit would retry on those.
      expect(limitHeaders(refused)).toStrictEqual({
        "ratelimit-policy": '"trial";q=1',
        ratelimit: '"trial";r=0',
        "x-ratelimit-limit": "1",
      });
      const body = await refused.json();
      expect([body.status, body.type]).toStrictEqual([403, QUOTA_EXCEEDED_TYPE]);
      expect(body.detail).toMatch(/can never succeed at this cost.*Retrying will not help/);
      const bucket = new KeyedLimiter(new TokenBucket({ capacity: 2, refillPerSecond: 1, clock }));
      const costly = await start({
        limiter: bucket,
        policy: "api",
        cost: () => 3,
      } as CommonRateLimitOptions);
      const tooLarge = await fetch(costly);
      expect(tooLarge.status).toBe(413);
      expect(limitHeaders(tooLarge)).toStrictEqual({
        "ratelimit-policy": '"api";q=2',
        ratelimit: '"api";r=2;t=0',
      });
      expect((await tooLarge.json()).status).toBe(413);
    });

    test("a 429 carries X-RateLimit-Remaining: 0 and X-RateLimit-Reset by default, for Octokit", async () => {
      // Octokit's throttling plugin retries only a refusal that says x-ratelimit-remaining: 0.
      const clock = manualClock();
      const limiter = new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1, clock }));
      const url = await start({ limiter, wallClock: () => WALL_MS });
      const allowed = await fetch(url);
      expect(limitHeaders(allowed)).toStrictEqual({
        "ratelimit-policy": '"default";q=1',
        ratelimit: '"default";r=0;t=1',
      });
      const refused = await fetch(url);
      expect(refused.status).toBe(429);
      expect(limitHeaders(refused)).toStrictEqual({
        "ratelimit-policy": '"default";q=1',
        ratelimit: '"default";r=0;t=1',
        "x-ratelimit-limit": "1",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": RESET_AT_T1,
        "retry-after": "1",
      });
      const none = await start({ limiter, headers: "none" });
      expect(limitHeaders(await fetch(none))).toStrictEqual({ "retry-after": "1" });
    });

    test("onNearLimit is called for an admitted request with at most nearLimitShare * limit left", async () => {
      const clock = manualClock();
      const calls: Array<[number, string]> = [];
      const limiter = new KeyedLimiter(new TokenBucket({ capacity: 5, refillPerSecond: 1, clock }));
      const url = await start({
        limiter,
        nearLimitShare: 0.4, // remaining <= 2
        onNearLimit: (_request: unknown, decision: Decision, key: string) => {
          calls.push([decision.remaining, key]);
        },
      } as CommonRateLimitOptions);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await fetch(url)).status);
      expect(statuses).toStrictEqual([200, 200, 200, 200, 200, 429]);
      expect(calls).toStrictEqual([
        [2, "127.0.0.1"],
        [1, "127.0.0.1"],
        [0, "127.0.0.1"],
      ]); // not for 4 and 3 left, nor for the refusal
      const onError = vi.fn();
      const broken = await start({
        limiter: new KeyedLimiter(new TokenBucket({ capacity: 1, refillPerSecond: 1, clock })),
        onError,
        onNearLimit: () => {
          throw new Error("hook bug");
        },
      } as CommonRateLimitOptions);
      expect((await fetch(broken)).status).toBe(500);
      expect(onError.mock.calls[0]![1]).toMatchObject({ kind: "programming", outcome: "error" });
      await expect(start({ limiter, nearLimitShare: 2 })).rejects.toThrow(
        new RangeError(`${where}: nearLimitShare must be a finite number from 0 to 1, got 2`),
      );
    });

    test("a wall clock that reads NaN is a programming error (500), not an outage", async () => {
      const onError = vi.fn();
      const url = await start({
        limiter: new RecordingLimiter(2, 1, manualClock()),
        headers: "both",
        failure: "open",
        onError,
        wallClock: () => Number.NaN,
      });
      const response = await fetch(url);
      expect(response.status).toBe(500);
      expect(limitHeaders(response)).toStrictEqual({});
      expect(onError.mock.calls.map(([error, info]) => [String(error), info.kind])).toStrictEqual([
        [
          "RangeError: rateLimitHeaders: wallClock must return a finite number of milliseconds since the Unix epoch >= 0, got NaN",
          "programming",
        ],
      ]);
    });

    test("w= comes from a FixedWindow limiter; a disagreeing windowSeconds is refused", async () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 30_000 }));
      await expect(start({ limiter, windowSeconds: 60 })).rejects.toThrow(
        new RangeError(
          `${where}: windowSeconds is 60 but the limiter's window is 30 s (windowMs 30000); leave windowSeconds out to send the limiter's own`,
        ),
      );
      // An unkeyed one is read before it is wrapped as one global limit.
      const global = new FixedWindow({ limit: 5, windowMs: 30_000 });
      await expect(start({ limiter: global, windowSeconds: 60 })).rejects.toThrow(
        new RangeError(
          `${where}: windowSeconds is 60 but the limiter's window is 30 s (windowMs 30000); leave windowSeconds out to send the limiter's own`,
        ),
      );
      const keyed = await start({ limiter });
      expect((await fetch(keyed)).headers.get("ratelimit-policy")).toBe('"default";q=5;w=30');
      const agreeing = await start({ limiter: global, windowSeconds: 30 });
      expect((await fetch(agreeing)).headers.get("ratelimit-policy")).toBe('"default";q=5;w=30');
    });

    test("a malformed Forwarded from a trusted proxy is keyed as malformed-forwarded, not the proxy", async () => {
      const limiter = new RecordingLimiter(1, 0.001, manualClock());
      const url = await start({ limiter, trustProxy: ["127.0.0.1"], proxyHeader: "forwarded" });
      const send = (forwarded?: string) =>
        fetch(url, forwarded === undefined ? {} : { headers: { forwarded } });
      expect((await send('for="198.51.100.7')).status).toBe(200); // an unterminated quote
      expect((await send("for=nonsense")).status).toBe(429); // the same shared budget
      expect((await send()).status).toBe(200); // the proxy's own request keeps its budget
      expect((await send("for=198.51.100.7")).status).toBe(200);
      expect(limiter.calls.map(([key]) => key)).toStrictEqual([
        MALFORMED_FORWARDED_KEY,
        MALFORMED_FORWARDED_KEY,
        "127.0.0.1",
        "198.51.100.7",
      ]);
    });

    test("a forwarding header with no proxy trusted: one console.warn line, none when trusted", async () => {
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
      try {
        const limiter = new RecordingLimiter(99, 1, manualClock());
        const untrusted = await start({ limiter });
        const trusted = await start({ limiter, trustProxy: ["127.0.0.1"] });
        const forwarded = { headers: { "x-forwarded-for": "203.0.113.7" } };
        for (let i = 0; i < 40; i++) expect((await fetch(untrusted, forwarded)).status).toBe(200);
        for (let i = 0; i < 3; i++) expect((await fetch(trusted, forwarded)).status).toBe(200);
        expect(warn.mock.calls).toStrictEqual([
          [
            `${where}: a request from 127.0.0.1 carried X-Forwarded-For but trustProxy is not set, so it was keyed by its peer address; if the peer is a proxy, every client behind it shares one key: set trustProxy to the proxy's addresses (trustProxy: ["127.0.0.1"]). This warning is written once.`,
          ],
        ]);
      } finally {
        warn.mockRestore();
      }
    });
  });
}

/** What `onError` is told, besides `key`, of an outage answered under `failure`. */
export function outageInfo(error: unknown, failure: "open" | "closed") {
  return { error, operation: "consume", outcome: failure, kind: "outage", failure } as const;
}
