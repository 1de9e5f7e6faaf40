import { systemClock } from "../core/limiter.js";
import type { RedisKey, RedisLike } from "./client.js";
import { StoreTimeoutError } from "./errors.js";
import { replyArray, replyNumber } from "./reply.js";
import { runScript, type Script } from "./script.js";

/**
 * The client's view of a Redis server's clock, for decision deadlines: no call the failure
 * policy answered (a timeout) may take units when Redis runs it later, out of the client's
 * queue. So each call carries a deadline on the server's clock, and the script does nothing
 * past it (src/redis/lua/common.ts).
 *
 * The offset (server ms minus local ms) is kept as a lower bound: the server read its clock
 * before the client received the reply, so `serverNowMs - receivedAtMs` is at most the true
 * offset, and the largest such sample is the tightest bound. An underestimate only makes the
 * deadline earlier. Samples age out after 10 to 20 s (two buckets of
 * {@link SAMPLE_BUCKET_MS}), so a server clock stepped back, or drifting, is followed within
 * that time; with no sample left, the next call measures the offset first.
 * @module
 */

/** A sample bucket's span, in ms of the local clock: samples live one to two of these. */
export const SAMPLE_BUCKET_MS = 10_000;

/**
 * The part of `timeoutMs` kept back from the deadline: the server must have run the script
 * by `sentAt + timeoutMs * (1 - DEADLINE_MARGIN_SHARE)` on its clock, leaving a quarter of
 * the timeout for the reply to come back and be read before the client's timer fires (a
 * loopback or LAN hop is well under a millisecond; the client's own event-loop lag under
 * load, tens of ms, is what the margin is for). A call the server runs inside the margin is
 * answered as a timeout at once when its `{-1}` reply arrives, never charged.
 */
export const DEADLINE_MARGIN_SHARE = 0.25;

/** One client's estimate of its offset to the server's clock. */
export class ServerClock {
  /** @internal Largest sample of the current bucket. */
  private current = Number.NEGATIVE_INFINITY;
  /** @internal Largest sample of the bucket before. */
  private previous = Number.NEGATIVE_INFINITY;
  /** @internal When the current bucket began (local ms). */
  private bucketAt = Number.NEGATIVE_INFINITY;
  /** @internal The offset probe in flight, shared by the calls that wait for it. */
  private probing: Promise<void> | undefined;

  /** @param now The local clock, in ms (monotonic: `performance.now()` by default). */
  constructor(readonly now: () => number = systemClock) {}

  /** @internal Starts a new bucket when the current one is over. */
  private roll(at: number): void {
    if (at - this.bucketAt < SAMPLE_BUCKET_MS) return;
    this.previous = at - this.bucketAt < 2 * SAMPLE_BUCKET_MS ? this.current : -Infinity;
    this.current = Number.NEGATIVE_INFINITY;
    this.bucketAt = at;
  }

  /**
   * Records a reply: the server's now (ms, as the script read `TIME`, truncated) and the
   * local time the reply was received (ms); a non-finite reading is ignored.
   */
  observe(serverNowMs: number, receivedAtMs: number = this.now()): void {
    const sample = serverNowMs - receivedAtMs;
    if (!Number.isFinite(sample)) return;
    this.roll(receivedAtMs);
    if (sample > this.current) this.current = sample;
  }

  /** The offset (server ms minus local ms, a lower bound), or undefined with no recent sample. */
  offsetMs(): number | undefined {
    this.roll(this.now());
    const best = this.current > this.previous ? this.current : this.previous;
    return best === Number.NEGATIVE_INFINITY ? undefined : best;
  }

  /**
   * The deadline of a call sent at local time `sentAtMs` that the client gives up on after
   * `timeoutMs`: `sentAt + offset + timeoutMs * (1 - DEADLINE_MARGIN_SHARE)` on the
   * server's clock, whole ms (rounded down: earlier is safe), as the script's ARGV text.
   * Undefined without an offset.
   */
  deadlineArg(sentAtMs: number, timeoutMs: number): string | undefined {
    const offset = this.offsetMs();
    if (offset === undefined) return undefined;
    return String(Math.floor(sentAtMs + offset + timeoutMs * (1 - DEADLINE_MARGIN_SHARE)));
  }

  /**
   * Measures the offset once (concurrent callers share the one probe): `probe` resolves
   * with the server's now in ms; its rejection is the caller's.
   */
  measure(probe: () => Promise<number>): Promise<void> {
    if (this.probing === undefined) {
      this.probing = probe()
        .then((serverNowMs) => this.observe(serverNowMs))
        .finally(() => {
          this.probing = undefined;
        });
    }
    return this.probing;
  }
}

/** Most clocks kept by node per client; past it, keys of a new node share the client's clock. */
export const MAX_NODE_CLOCKS = 1024;

/** The clocks of one client adapter: its own, and one per cluster node. */
interface ClientClocks {
  readonly main: ServerClock;
  readonly nodes: Map<string, ServerClock>;
}

/** The clocks of each client adapter, shared by every limiter on it. */
const CLOCKS = new WeakMap<RedisLike, ClientClocks>();

/**
 * The {@link ServerClock} of `client`, made on first use; with `node` (a cluster node's
 * address), that node's own: cluster nodes are separate servers whose clocks may differ,
 * and an offset measured on a node ahead would put the deadlines of a node behind past
 * the client's timeout (late charges again), for as long as the sample lives.
 */
export function serverClockOf(client: RedisLike, node?: string): ServerClock {
  let clocks = CLOCKS.get(client);
  if (clocks === undefined) {
    clocks = { main: new ServerClock(), nodes: new Map() };
    CLOCKS.set(client, clocks);
  }
  if (node === undefined) return clocks.main;
  let clock = clocks.nodes.get(node);
  if (clock === undefined) {
    if (clocks.nodes.size >= MAX_NODE_CLOCKS) return clocks.main;
    clock = new ServerClock();
    clocks.nodes.set(node, clock);
  }
  return clock;
}

/**
 * The `cause` of a store failure when Redis ran a decision past its deadline: a timeout (it
 * is a {@link StoreTimeoutError}) whose reply came back, saying nothing was written.
 */
export class DeadlinePassedError extends StoreTimeoutError {
  constructor(timeoutMs: number) {
    super(timeoutMs);
    this.message = `Redis ran the call past its deadline (${timeoutMs} ms less the margin, on the server's clock) and wrote nothing`;
  }
}

/** The deadline ARGV of an offset probe: long past on any server clock, so the script only replies. */
export const PROBE_DEADLINE = "0";

/**
 * Runs a decision script with a deadline: `args` are the script's ARGV before `deadlineMs`, which
 * is appended. Without an offset to the server's clock (the client's first call, or none for 10 to
 * 20 s) the same script first runs with a deadline long past (it replies `{-1, serverNowMs}` and
 * touches nothing) to measure it; so every call that can write carries a deadline. The caller
 * (`StoreLimiter`) bounds the whole, probe included, by `timeoutMs`, its timer started when this is
 * called. Rejects like `runScript`, with a {@link DeadlinePassedError} when Redis ran the call past
 * its deadline, and a `TypeError` for a malformed reply.
 */
export async function runDecision(
  client: RedisLike,
  script: Script,
  keys: readonly RedisKey[],
  args: readonly string[],
  timeoutMs: number,
): Promise<unknown> {
  const key = keys[0];
  const clock = serverClockOf(client, key === undefined ? undefined : client.nodeOf?.(key));
  const sentAt = clock.now();
  let deadline = clock.deadlineArg(sentAt, timeoutMs);
  if (deadline === undefined) {
    await clock.measure(async () => {
      const reply = await runScript(client, script, keys, [...args, PROBE_DEADLINE]);
      const items = replyArray(reply, 2);
      if (replyNumber(items[0]) !== -1) {
        throw new TypeError(`unexpected reply to a clock probe ${String(items[0])}`);
      }
      return replyNumber(items[items.length - 1]);
    });
    deadline = clock.deadlineArg(sentAt, timeoutMs);
    if (deadline === undefined) throw new TypeError("no server time in the clock probe's reply");
  }
  const reply = await runScript(client, script, keys, [...args, deadline]);
  // The last element is the server's now; `{-1, serverNowMs}`: past the deadline, nothing written.
  const receivedAt = clock.now();
  const items = replyArray(reply, 2);
  clock.observe(replyNumber(items[items.length - 1]), receivedAt);
  if (replyNumber(items[0]) === -1) throw new DeadlinePassedError(timeoutMs);
  return reply;
}
