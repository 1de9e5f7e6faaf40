// The HTTP middleware with a LeasedTokenBucket (node:http over loopback, MemoryLeaseStore on
// a manual clock): blockDurationMs, refundIf, refundAborted and settle(request, units) go
// through the leased limiter's receipts and blocks, as with a KeyedLimiter.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterEach, describe, expect, test, vi } from "vitest";
import { ABORTED_STATUS } from "../../src/http/after-response.js";
import { checkAdapterOptions } from "../../src/http/core.js";
import { rateLimit } from "../../src/http/index.js";
import { Pipeline } from "../../src/http/pipeline.js";
import {
  LeasedTokenBucket,
  type LeasedTokenBucketOptions,
  MemoryLeaseStore,
  RedisTokenBucket,
} from "../../src/redis/index.js";
import { manualClock } from "../support/manual-clock.js";
import { manualScheduler } from "../support/manual-scheduler.js";
import { close, listen } from "./support.js";

const servers: Server[] = [];
const limiters: LeasedTokenBucket[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(close));
  await Promise.all(limiters.splice(0).map((l) => l.close()));
});

const KEY = "127.0.0.1";

function leased(capacity: number, options: Partial<LeasedTokenBucketOptions> = {}, rate = 0) {
  const clock = manualClock(1000);
  const timers = manualScheduler(clock);
  const store = new MemoryLeaseStore({
    capacity,
    refillPerSecond: rate,
    clock,
    scheduler: timers.schedule,
  });
  const limiter = new LeasedTokenBucket({
    capacity,
    refillPerSecond: rate,
    store,
    clock,
    scheduler: timers.schedule,
    batchWindowMs: 5,
    ...options,
  });
  limiters.push(limiter);
  return { clock, timers, store, limiter };
}

/** A node:http server behind the middleware: `/ok` 200, `/fail` 401, `/hang` never answers, `/settle/N`. */
async function serve(options: Parameters<typeof rateLimit>[0]): Promise<string> {
  const limit = rateLimit(options);
  const server = createServer((req: IncomingMessage, res: ServerResponse) =>
    limit(req, res, () => {
      const [, route, n] = (req.url ?? "/").split("/");
      if (route === "hang") return;
      if (route === "settle") limit.settle(req as never, Number(n));
      res.statusCode = route === "fail" ? 401 : 200;
      res.end(route ?? "");
    }),
  );
  servers.push(server);
  return listen(server);
}

describe("the HTTP middleware with a LeasedTokenBucket", () => {
  test("blockDurationMs blocks a client over its limit in every process, Retry-After the block", async () => {
    const { timers, limiter } = leased(2, { initialCredit: 2 }, 0.1);
    const url = await serve({ limiter, blockDurationMs: 60_000 });
    expect((await fetch(`${url}/ok`)).status).toBe(200);
    expect((await fetch(`${url}/ok`)).status).toBe(200); // the credit: 2
    // A lease on its way: denied, not blocked; the store then says the bucket is empty.
    expect((await fetch(`${url}/ok`)).status).toBe(429);
    expect(limiter.blockedMs(KEY)).toBe(0);
    await timers.advance(5);
    const limited = await fetch(`${url}/ok`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("60");
    expect(limiter.blockedMs(KEY)).toBe(60_000);
    await timers.advance(10_000);
    const later = await fetch(`${url}/ok`);
    expect(later.status).toBe(429);
    expect(later.headers.get("retry-after")).toBe("50"); // not extended by requests meanwhile
    // The other processes learn it from the store.
    const other = new LeasedTokenBucket({
      capacity: 2,
      refillPerSecond: 0.1,
      store: (limiter as unknown as { store: MemoryLeaseStore }).store,
      clock: () => 1000 + 10_005,
      scheduler: timers.schedule,
      batchWindowMs: 5,
      initialCredit: 0,
    });
    limiters.push(other);
    other.consume(KEY);
    await timers.advance(5);
    expect(other.consume(KEY).source).toBe("blocked");
  });

  test("a lease on its way is not a client over its limit: blockDurationMs does not block for it", async () => {
    // Every denial blocked: a new key's second request, denied while its first lease was on
    // its way ('pending'), blocked the client for a minute.
    const { limiter } = leased(100, { initialCredit: 1 });
    const url = await serve({ limiter, blockDurationMs: 60_000 });
    expect((await fetch(`${url}/ok`)).status).toBe(200);
    expect(limiter.peek(KEY).source).toBe("pending");
    expect((await fetch(`${url}/ok`)).status).toBe(429);
    expect(limiter.blockedMs(KEY)).toBe(0);
  });

  test("a closed limiter answers 503, not a 403 saying the quota never comes back", async () => {
    // After close() (a server shutting down), every request got 403 "can never succeed at
    // this cost ... Retrying will not help": the limiter decides nothing any more, the
    // client's quota is not spent.
    const { limiter } = leased(100, { initialCredit: 5 });
    const url = await serve({ limiter });
    expect((await fetch(`${url}/ok`)).status).toBe(200);
    await limiter.close();
    expect(limiter.peek(KEY).source).toBe("stopped");
    const response = await fetch(`${url}/ok`);
    expect(response.status).toBe(503);
    expect(await response.text()).not.toMatch(/never|quota-exceeded/);
  });

  test("a limited request of a leased limiter is answered without a promise", () => {
    // blockOnce answered a number, wrapped in a promise: every limited request of a
    // synchronous limiter went through a microtask.
    const { limiter } = leased(1, { initialCredit: 0 });
    limiter.block(KEY, 10_000);
    const { config, hooks } = checkAdapterOptions(
      "rateLimit",
      { limiter, blockDurationMs: 60_000 } as never,
      [],
    );
    const pipeline = new Pipeline("rateLimit", config, hooks as never, {
      peer: () => KEY,
      header: () => undefined,
      untrusted: () => {},
    });
    const outcome = pipeline.run({}, undefined);
    expect(outcome).not.toBeInstanceOf(Promise);
    expect(outcome).toMatchObject({ kind: "limited" });
  });

  test("refundIf gives back through the receipts; an aborted request stays charged unless refundAborted", async () => {
    for (const refundAborted of [false, true]) {
      const { limiter } = leased(3, { initialCredit: 3 });
      const statuses: number[] = [];
      const url = await serve({
        limiter,
        refundAborted,
        refundIf: (status: number) => {
          statuses.push(status);
          return status >= 400;
        },
      });
      for (let i = 0; i < 5; i++) expect((await fetch(`${url}/fail`)).status).toBe(401);
      await vi.waitFor(() => expect(statuses).toHaveLength(5));
      expect(limiter.stats.refunded).toBe(5);
      // Each failure came off the credit it took: the 3 units are all there.
      expect(limiter.peek(KEY, 3).allowed).toBe(true);
      const abort = new AbortController();
      const hanging = fetch(`${url}/hang`, { signal: abort.signal }).catch(() => "aborted");
      await vi.waitFor(() => expect(limiter.peek(KEY, 3).allowed).toBe(false));
      abort.abort();
      expect(await hanging).toBe("aborted");
      if (refundAborted) {
        await vi.waitFor(() => expect(statuses).toContain(ABORTED_STATUS));
        await vi.waitFor(() => expect(limiter.peek(KEY, 3).allowed).toBe(true));
      } else {
        await new Promise((resolve) => setImmediate(resolve));
        expect(statuses).not.toContain(ABORTED_STATUS);
        expect(limiter.peek(KEY, 3).allowed).toBe(false);
      }
    }
  });

  test("settle(request, units) gives back what the request did not use", async () => {
    const { limiter } = leased(10, { initialCredit: 10 });
    const url = await serve({ limiter, cost: () => 8 });
    expect((await fetch(`${url}/settle/3`)).status).toBe(200);
    expect(limiter.stats.refunded).toBe(5);
    expect(limiter.peek(KEY, 7).allowed).toBe(true); // 10 - 3
    expect(limiter.peek(KEY, 8).allowed).toBe(false);
  });
});

describe("blockDurationMs and an outage", () => {
  test("a store that failed closed does not block the clients that asked during the outage", async () => {
    // Every denial blocked: a 'closed' denial of a Redis limiter whose Redis was down blocked
    // each client that made a request, for blockDurationMs after Redis was back.
    const down = () => Promise.reject(new Error("connect ECONNREFUSED"));
    const limiter = new RedisTokenBucket({
      client: { evalSha: down, evalScript: down },
      capacity: 5,
      refillPerSecond: 1,
      failure: "closed",
      timeoutMs: 1000,
      onError: () => {},
    });
    const url = await serve({ limiter, blockDurationMs: 60_000 });
    const res = await fetch(`${url}/ok`);
    expect(res.status).toBe(429);
    expect(limiter.blockedMs(KEY)).toBe(0);
  });
});
