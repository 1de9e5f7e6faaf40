// wait's jitterMs: a caller that had to wait is released a random time after its grant,
// below jitterMs; the grant itself (and so the limit) is as without jitter. The draws come
// from jitterSource, which each test here sets (test/support/seeds.ts fixes it otherwise).
import { afterEach, describe, expect, test, vi } from "vitest";
import { jitterSource } from "../src/core/wait.js";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  TokenBucket,
} from "../src/index.js";
import { timerClock } from "./support/timer-clock.js";

const seeded = jitterSource.next;
afterEach(() => {
  jitterSource.next = seeded;
  vi.useRealTimers();
});

/** Makes the next draws `values`, in order. */
function draws(...values: number[]): void {
  const queue = [...values];
  jitterSource.next = () => {
    const u = queue.shift();
    if (u === undefined) throw new Error("more jitter draws than the test planned");
    return u;
  };
}

describe("validation", () => {
  const bucket = () => new TokenBucket({ capacity: 1, refillPerSecond: 1 });
  test.each([
    {
      name: "negative",
      options: { jitterMs: -1 },
      error: RangeError,
      message: "TokenBucket.wait: jitterMs must be a finite number >= 0, got -1",
    },
    {
      name: "infinite",
      options: { jitterMs: Number.POSITIVE_INFINITY },
      error: RangeError,
      message: "TokenBucket.wait: jitterMs must be a finite number >= 0, got Infinity",
    },
    {
      name: "a string",
      options: { jitterMs: "50" },
      error: TypeError,
      message: 'TokenBucket.wait: jitterMs must be a finite number >= 0, got "50" (string)',
    },
    {
      name: "named jitter",
      options: { jitter: 50 },
      error: TypeError,
      message:
        'TokenBucket.wait: unknown option "jitter" (use "jitterMs" (milliseconds)); known options: signal, maxWaitMs, jitterMs',
    },
  ])("$name: rejected, nothing taken", async ({ options, error, message }) => {
    const b = bucket();
    const result = b.wait(1, options as never);
    await expect(result).rejects.toBeInstanceOf(error);
    await expect(result).rejects.toThrow(new error(message));
    expect(b.peek(0).remaining, "nothing taken").toBe(1);
  });
});

describe("a jittered wait", () => {
  test("is granted when it would be, and released jitter later: the limit holds meanwhile", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 10, clock });
    bucket.consume(1);
    draws(0.5);
    let releasedAt: number | undefined;
    const waiting = bucket.wait(1, { jitterMs: 40 }).then((d) => {
      releasedAt = clock();
      return d;
    });
    await advance(100);
    // Granted at 100 ms (the token is taken), not yet released.
    expect(bucket.peek()).toMatchObject({ allowed: false, retryAfterMs: 100 });
    expect(releasedAt).toBeUndefined();
    await advance(19);
    expect(releasedAt).toBeUndefined();
    await advance(1);
    expect(releasedAt).toBe(120);
    await expect(waiting).resolves.toMatchObject({ allowed: true });
  });

  test("a wait granted at once is released at once, drawing nothing", async () => {
    const { advance } = timerClock();
    const bucket = new LeakyBucket({ capacity: 5, leakPerSecond: 1 });
    draws(); // any draw throws
    let released = false;
    bucket.wait(1, { jitterMs: 1000 }).then(() => {
      released = true;
    });
    await advance(0);
    expect(released).toBe(true);
  });

  test("waiters granted at one instant (a window's edge) are released apart", async () => {
    const { clock, advance } = timerClock();
    const window = new FixedWindow({ limit: 3, windowMs: 1000, clock });
    window.consume(3);
    draws(0.9, 0.1, 0.5);
    const released: string[] = [];
    const waits = ["a", "b", "c"].map((name) =>
      window.wait(1, { jitterMs: 100 }).then(() => released.push(`${name}@${clock()}`)),
    );
    await advance(1100);
    await Promise.all(waits);
    expect(released).toEqual(["b@1010", "c@1050", "a@1090"]);
  });

  test("aborted before its release: rejects with the reason and gives its units back", async () => {
    const { clock, advance } = timerClock();
    const bucket = new TokenBucket({ capacity: 2, refillPerSecond: 10, clock });
    bucket.consume(2);
    draws(0.99);
    const controller = new AbortController();
    const waiting = bucket.wait(1, { jitterMs: 1000, signal: controller.signal });
    await advance(100); // granted at 100 ms: the bucket is back at 0
    expect(bucket.peek(0).remaining).toBe(0);
    const reason = new Error("client went away");
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(bucket.peek(0).remaining, "the granted token came back").toBe(1);
  });

  test.each<{
    name: string;
    make: (clock: () => number) => { wait: (o: object) => Promise<unknown>; fill: () => void };
  }>([
    {
      name: "allOf",
      make: (clock) => {
        const both: Limiter = allOf(
          new TokenBucket({ capacity: 1, refillPerSecond: 10, clock }),
          new FixedWindow({ limit: 10, windowMs: 1000, clock }),
        );
        return { wait: (o) => both.wait(1, o), fill: () => both.consume(1) };
      },
    },
    {
      name: "KeyedLimiter",
      make: (clock) => {
        const keyed = new KeyedLimiter(
          new TokenBucket({ capacity: 1, refillPerSecond: 10, clock }),
          {
            sweepIntervalMs: Number.POSITIVE_INFINITY,
          },
        );
        return { wait: (o) => keyed.wait("k", 1, o), fill: () => keyed.consume("k", 1) };
      },
    },
  ])("$name: released jitter after its grant", async ({ make }) => {
    const { clock, advance } = timerClock();
    const limiter = make(clock);
    limiter.fill();
    draws(0.25);
    let releasedAt: number | undefined;
    const waiting = limiter.wait({ jitterMs: 80 }).then(() => {
      releasedAt = clock();
    });
    await advance(200);
    await waiting;
    expect(releasedAt).toBe(120);
  });

  test("the delays stay below jitterMs, as the draws say", async () => {
    const { clock, advance } = timerClock();
    const shaper = new LeakyBucket({ capacity: 100, leakPerSecond: 1000, clock });
    shaper.consume(1);
    // Draws over (0, 1), shuffled: delay = draw * 40 ms (whole, as timers count), after
    // grants 1 ms apart. (A draw of 0 would still take a timer's least delay, 1 ms.)
    const values = Array.from({ length: 39 }, (_, i) => ((i * 17) % 39) + 1).map((k) => k / 40);
    draws(...values);
    const delays: number[] = [];
    const waits = values.map((_, i) =>
      shaper.wait(1, { jitterMs: 40 }).then(() => delays.push(clock() - (i + 1))),
    );
    await advance(200);
    await Promise.all(waits);
    expect(Math.max(...delays)).toBeLessThan(40);
    expect([...delays].sort((a, b) => a - b)).toEqual(
      values.map((u) => u * 40).sort((a, b) => a - b),
    );
  });
});
