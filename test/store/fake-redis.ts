import type { RedisKey, RedisLike } from "../../src/redis/client.js";

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
    if (nodeOf !== undefined) this.nodeOf = nodeOf;
  }

  evalSha(_sha1: string, keys: readonly RedisKey[], args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.calls.push({ key: keys[0] as RedisKey, args, resolve, reject });
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
