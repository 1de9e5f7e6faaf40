// One AbortSignal given to many waits: every waiter hears the abort, in arrival order, and
// the signal carries one listener however many wait on it.
import { afterEach, describe, expect, test } from "vitest";
import {
  allOf,
  FixedWindow,
  KeyedLimiter,
  LeakyBucket,
  type Limiter,
  TokenBucket,
} from "../src/index.js";
import { manualClock } from "./support/manual-clock.js";

const warnings: Error[] = [];
const onWarning = (warning: Error) => warnings.push(warning);

afterEach(() => {
  process.off("warning", onWarning);
  warnings.length = 0;
});

describe("a signal shared by many waits", () => {
  const clock = manualClock();
  test.each<{ name: string; wait: (signal: AbortSignal) => Promise<unknown> }>([
    {
      name: "TokenBucket",
      wait: (() => {
        const bucket = new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock });
        bucket.consume(1);
        return (signal) => bucket.wait(1, { signal });
      })(),
    },
    {
      name: "LeakyBucket",
      wait: (() => {
        const bucket = new LeakyBucket({ capacity: 100, leakPerSecond: 0.001, clock });
        bucket.consume(1);
        return (signal) => bucket.wait(1, { signal });
      })(),
    },
    {
      name: "FixedWindow",
      wait: (() => {
        const window: Limiter = new FixedWindow({ limit: 1, windowMs: 1e9, clock });
        window.consume(1);
        return (signal) => window.wait(1, { signal });
      })(),
    },
    {
      name: "allOf",
      wait: (() => {
        const both = allOf(
          new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock }),
          new FixedWindow({ limit: 5, windowMs: 1e9, clock }),
        );
        both.consume(1);
        return (signal) => both.wait(1, { signal });
      })(),
    },
    {
      name: "KeyedLimiter",
      wait: (() => {
        const keyed = new KeyedLimiter(
          new TokenBucket({ capacity: 1, refillPerSecond: 0.001, clock }),
          { sweepIntervalMs: Number.POSITIVE_INFINITY },
        );
        keyed.consume("k", 1);
        return (signal) => keyed.wait("k", 1, { signal });
      })(),
    },
  ])(
    "regression: $name: the eleventh wait on one signal set off MaxListenersExceededWarning",
    async ({ wait }) => {
      process.on("warning", onWarning);
      const controller = new AbortController();
      const order: number[] = [];
      const waits = Array.from({ length: 30 }, (_, i) =>
        wait(controller.signal).catch((reason: unknown) => {
          order.push(i);
          return reason;
        }),
      );
      const reason = new Error("client went away");
      controller.abort(reason);
      expect(await Promise.all(waits)).toEqual(Array(30).fill(reason));
      expect(order, "every waiter hears the abort, in arrival order").toEqual(
        Array.from({ length: 30 }, (_, i) => i),
      );
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
      expect(warnings.map((w) => w.name)).toEqual([]);
    },
  );
});
