import type { RedisKey, RedisLike } from "../../src/redis/client.js";
import { PROBE_DEADLINE, serverClockOf } from "../../src/redis/server-clock.js";

/** The server time every reply of the fake carries, in ms. */
const SERVER_NOW_MS = 1_700_000_000_000;

/** One script call the fake received, settled by hand. */
export interface PendingCall {
  readonly key: RedisKey;
  readonly args: readonly string[];
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/**
 * A RedisLike whose every call waits until the test settles it (`calls[i].resolve(...)`),
 * so each circuit transition happens exactly where the test says. `nodeOf`, when given,
 * names each key's node.
 */
export class FakeRedis implements RedisLike {
  readonly calls: PendingCall[] = [];
  nodeOf?: (key: RedisKey) => string | undefined;

  constructor(nodeOf?: (key: RedisKey) => string | undefined) {
    // Known offset to the server's clock (each node's too: they keep their own), so each
    // decision goes out at once (no probe first) and the tests settle calls in the order
    // they make them.
    if (nodeOf !== undefined) {
      this.nodeOf = (key) => {
        const node = nodeOf(key);
        if (node !== undefined) serverClockOf(this, node).observe(SERVER_NOW_MS);
        return node;
      };
    }
    serverClockOf(this).observe(SERVER_NOW_MS);
  }

  evalSha(_sha1: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown> {
    // The limiter's clock probe (deadline long past) is answered at once, as Redis would.
    if (args.at(-1) === PROBE_DEADLINE) return Promise.resolve([-1, SERVER_NOW_MS]);
    return new Promise((resolve, reject) => {
      // A script's reply ends with the server's now; the tests give only the decision.
      const answer = (reply: unknown) =>
        resolve(Array.isArray(reply) ? [...reply, SERVER_NOW_MS] : reply);
      this.calls.push({ key: keys[0] as RedisKey, args, resolve: answer, reject });
    });
  }

  evalScript(
    _script: string,
    keys: readonly RedisKey[],
    args: readonly string[],
  ): Promise<unknown> {
    return this.evalSha("", keys, args);
  }

  /** The last call received. */
  last(): PendingCall {
    const call = this.calls.at(-1);
    if (call === undefined) throw new Error("no call yet");
    return call;
  }
}

/** Lets every settled promise's callbacks run (a few microtask turns). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
